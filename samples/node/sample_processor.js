#!/usr/bin/env node
'use strict';
/**
 * A sample record processor for kcl-daemon, written with kcl-client (clients/node).
 *
 * It logs each record's shard, partition key, sequence number and size to stderr (never the payload:
 * that is your data), checkpoints at the end of a batch at most every 10 seconds, and checkpoints
 * properly when the shard ends or the worker shuts down. Throttled checkpoints are retried with a
 * backoff.
 *
 * Run it under the daemon from this directory:  kcl-daemon run --properties app.properties
 * or without AWS:  kcl-daemon replay --properties app.properties --records ../records.jsonl
 *
 * stdout belongs to the daemon protocol: log with `log` (or console.error), never process.stdout.
 */

// Inside this repository the client is loaded from its source directory. In your own project install
// it instead (`npm install /path/to/kcl-daemon/clients/node`, or from your registry once published)
// and write: const { run, log } = require('kcl-client');
const { run, log } = require('../../clients/node');

const CHECKPOINT_INTERVAL_MS = 10_000; // 0 checkpoints after every batch
const CHECKPOINT_ATTEMPTS = 6; // a retriable failure waits 1 s, 2 s, 4 s, 8 s, 16 s, then gives up
const CHECKPOINT_BACKOFF_MS = 1_000;

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

let shardId = '?';
let lastCheckpoint = Date.now();

/**
 * Checkpoint at `position` (a record) or, with none, at everything delivered so far. Retriable errors
 * (ThrottlingException, KinesisClientLibDependencyException) are retried with an exponential backoff;
 * nothing here stops the shard, a failed checkpoint is simply tried again after the next batch.
 */
async function checkpoint(checkpointer, position) {
  for (let attempt = 1; attempt <= CHECKPOINT_ATTEMPTS; attempt++) {
    try {
      await (position ? checkpointer.checkpoint(position) : checkpointer.checkpoint());
      lastCheckpoint = Date.now();
      return;
    } catch (err) {
      if (err.code === 'ShutdownException') {
        log(`${shardId}: the lease is already gone, not checkpointing`);
        return;
      }
      if (!err.retriable || attempt === CHECKPOINT_ATTEMPTS) {
        log(`${shardId}: checkpoint failed, will try again after the next batch: ${err.message}`);
        return;
      }
      const waitMs = CHECKPOINT_BACKOFF_MS * 2 ** (attempt - 1);
      log(`${shardId}: checkpoint got ${err.code}, retrying in ${waitMs} ms`);
      await sleep(waitMs);
    }
  }
}

run({
  initialize({ shardId: id, sequenceNumber }) {
    shardId = id;
    lastCheckpoint = Date.now();
    log(`${shardId}: starting after ${sequenceNumber}`);
  },

  async processRecords({ records, millisBehindLatest, checkpointer, metric }) {
    for (const record of records) {
      // Your processing goes here (record.data is a Buffer). Checkpoint only what is really done.
    }
    if (records.length) {
      // One summary per batch, and the batch size as a metric on kcl-daemon's channel.
      const first = records[0];
      const bytes = records.reduce((sum, record) => sum + record.data.length, 0);
      log(`${shardId}: ${records.length} record(s), ${bytes} bytes, first record key=${first.partitionKey}`
        + ` seq=${first.sequenceNumber}/${first.subSequenceNumber}`);
      await metric('sample_batch_records', records.length, 'Count');
    }
    if (records.length && Date.now() - lastCheckpoint >= CHECKPOINT_INTERVAL_MS) {
      log(`${shardId}: checkpointing (${millisBehindLatest ?? '?'} ms behind the tip of the stream)`);
      await checkpoint(checkpointer, records[records.length - 1]);
    }
  },

  async shardEnded({ checkpointer }) {
    // Mandatory: the child shards are only processed once this shard is checkpointed at its end.
    log(`${shardId}: shard ended`);
    await checkpoint(checkpointer);
  },

  async shutdownRequested({ checkpointer }) {
    log(`${shardId}: shutdown requested`);
    await checkpoint(checkpointer);
  },

  leaseLost() {
    log(`${shardId}: lease lost; another worker has this shard now`);
  },
});
