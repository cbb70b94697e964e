#!/usr/bin/env bash
# The conformance processor (protocol/transcripts/README.md) written with kcl.sh. The golden transcripts
# replay against it in tests/protocol/test_shell_client.py:
#
#   * processRecords: a record whose text is "checkpoint" checkpoints at that record, "checkpoint-batch"
#     checkpoints with no position; "log" and "metric" use kcl-daemon's channel; "dead-letter" hands the
#     record to the dead-letter destination (reason "conformance") when offered; anything else: nothing.
#   * shardEnded, shutdownRequested: checkpoint with no position.  leaseLost, initialize: nothing.
#   * ThrottlingException is retried once, immediately; other errors are logged and processing carries on.
set -euo pipefail

# shellcheck source=SCRIPTDIR/kcl.sh
source "$(dirname "${BASH_SOURCE[0]}")/kcl.sh"

# Base64 is canonical (the daemon always sends standard padded base64), so "the payload is the text
# `checkpoint`" is the same test as "KCL_DATA_BASE64 is the encoding of `checkpoint`". Comparing the
# encodings spares a base64 process per record; a payload that is not UTF-8 never matches either.
CHECKPOINT_B64=$(printf %s checkpoint | base64)
CHECKPOINT_BATCH_B64=$(printf %s checkpoint-batch | base64)
LOG_B64=$(printf %s log | base64)
METRIC_B64=$(printf %s metric | base64)
DEAD_LETTER_B64=$(printf %s dead-letter | base64)

checkpoint() {
  kcl_checkpoint "$@" && return 0
  if [[ $KCL_CHECKPOINT_ERROR == ThrottlingException ]]; then
    kcl_checkpoint "$@" && return 0
  fi
  kcl_log "checkpoint ${1:-(no position)} failed: $KCL_CHECKPOINT_ERROR"
}

kcl_process_records() {
  while kcl_next_record; do
    case $KCL_DATA_BASE64 in
      "$CHECKPOINT_B64") checkpoint "$KCL_SEQUENCE_NUMBER" "$KCL_SUB_SEQUENCE_NUMBER" ;;
      "$CHECKPOINT_BATCH_B64") checkpoint ;;
      "$LOG_B64") kcl_channel_log info log ;;
      "$METRIC_B64") kcl_metric conformance 1 Count source=transcript ;;
      "$DEAD_LETTER_B64") kcl_dead_letter conformance || true ;;
    esac
  done
}

kcl_shard_ended() {
  checkpoint
}

kcl_shutdown_requested() {
  checkpoint
}

kcl_run
