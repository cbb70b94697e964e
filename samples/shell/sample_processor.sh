#!/usr/bin/env bash
# A sample record processor written with the shell client (clients/shell/kcl.sh).
#
# For every record it logs the shard, partition key, sequence number and payload size to stderr (never the
# payload itself: records can hold personal data). It checkpoints at the end of every batch and when the
# shard ends or the worker shuts down, retrying a throttled checkpoint a few times.
#
# Run it from this directory with `kcl-daemon --properties app.properties` (AWS), or without AWS:
#   kcl-daemon replay --properties app.properties --records ../records.jsonl
#
# The client library is sourced from this repository, relative to this script. To use it in your own
# project, vendor it: copy clients/shell/kcl.sh next to your processor and source
# "$(dirname "${BASH_SOURCE[0]}")/kcl.sh" instead.
set -uo pipefail

# shellcheck source=SCRIPTDIR/../../clients/shell/kcl.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../clients/shell/kcl.sh"

# How often to try a throttled checkpoint, and how long to wait in between (the environment can override).
CHECKPOINT_ATTEMPTS=${CHECKPOINT_ATTEMPTS:-5}
CHECKPOINT_RETRY_SECONDS=${CHECKPOINT_RETRY_SECONDS:-2}
RECORDS_SEEN=0 # handlers run in the main shell, so globals carry over from batch to batch

kcl_initialize() {
  kcl_log "initialized; the lease checkpoint is ${KCL_INITIAL_SEQUENCE_NUMBER:-(none)}"
}

log_record() {
  local size
  kcl_record_size size
  kcl_log "record shard=$KCL_SHARD_ID partitionKey=$KCL_PARTITION_KEY" \
    "sequenceNumber=$KCL_SEQUENCE_NUMBER/$KCL_SUB_SEQUENCE_NUMBER size=$size"
  RECORDS_SEEN=$((RECORDS_SEEN + 1))
  # To work with the payload: kcl_record_text text (or kcl_record_data > file) decodes it.
}

# checkpoint [SEQ [SUB]]: checkpoint, retrying ThrottlingException; status 1 if it finally failed.
# shellcheck disable=SC2120  # the arguments are optional; this sample never passes any
checkpoint() {
  local attempt
  for ((attempt = 1; attempt <= CHECKPOINT_ATTEMPTS; attempt++)); do
    if kcl_checkpoint "$@"; then
      return 0
    fi
    case $KCL_CHECKPOINT_ERROR in
      ThrottlingException)
        if ((attempt < CHECKPOINT_ATTEMPTS)); then
          kcl_log "checkpoint throttled; retrying in ${CHECKPOINT_RETRY_SECONDS}s"
          sleep "$CHECKPOINT_RETRY_SECONDS"
        fi
        ;;
      ShutdownException)
        kcl_log "the lease is gone (ShutdownException); skipping the checkpoint"
        return 1
        ;;
      *)
        kcl_log "checkpoint failed: $KCL_CHECKPOINT_ERROR"
        return 1
        ;;
    esac
  done
  kcl_log "checkpoint still throttled after $CHECKPOINT_ATTEMPTS attempts; giving up for now"
  return 1
}

kcl_process_records() {
  kcl_each_record log_record || return
  # The batch size as a metric on kcl-daemon's log/metric channel (nothing under the Java daemon).
  ((KCL_RECORD_COUNT == 0)) || kcl_metric sample_batch_records "$KCL_RECORD_COUNT" Count
  # No position: everything delivered so far, i.e. this whole batch. checkpoint logs a failure; records
  # after the last written checkpoint are simply delivered again after a restart.
  checkpoint || true
}

kcl_lease_lost() {
  kcl_log "lease lost after $RECORDS_SEEN records; another worker takes over (no checkpoint possible)"
}

kcl_shard_ended() {
  kcl_log "shard ended after $RECORDS_SEEN records; checkpointing at SHARD_END"
  checkpoint || true
}

kcl_shutdown_requested() {
  kcl_log "shutdown requested after $RECORDS_SEEN records; checkpointing"
  checkpoint || true
}

kcl_run
