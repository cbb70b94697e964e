#!/usr/bin/env node
'use strict';
/**
 * The conformance processor of protocol/transcripts/README.md, written with this client:
 *   - a record whose data is the UTF-8 text "checkpoint" → checkpoint at that record;
 *   - "checkpoint-batch" → checkpoint with no position; anything else → nothing;
 *   - "log" / "metric" → a log line / a metric on kcl-daemon's channel;
 *   - "dead-letter" → the record to the dead-letter destination (reason "conformance"), when offered;
 *   - shardEnded and shutdownRequested → checkpoint with no position;
 *   - a ThrottlingException is retried once, immediately; other errors are logged and ignored.
 * Run it as `node clients/node/conformance.js` with the daemon (or a transcript replay) on stdio.
 */

const { run, log } = require('./index.js');

const utf8 = new TextDecoder('utf-8', { fatal: true });

function text(buffer) {
  try {
    return utf8.decode(buffer);
  } catch {
    return null; // not UTF-8: never a command
  }
}

async function checkpoint(checkpointer, ...position) {
  for (let attempt = 1; ; attempt++) {
    try {
      await checkpointer.checkpoint(...position);
      return;
    } catch (err) {
      log(`conformance: checkpoint failed (${err.code || err.name}), attempt ${attempt}`);
      if (err.code !== 'ThrottlingException' || attempt === 2) return;
    }
  }
}

run(() => ({ // a factory: takes kcl-daemon's offer of lanes (protocol/transcripts/lanes.jsonl)
  async processRecords({ records, checkpointer, log: channelLog, metric, deadLetter }) {
    for (const record of records) {
      const command = text(record.data);
      if (command === 'checkpoint') await checkpoint(checkpointer, record);
      else if (command === 'log') await channelLog('info', 'log');
      else if (command === 'metric') await metric('conformance', 1, 'Count', { source: 'transcript' });
      else if (command === 'dead-letter') await deadLetter(record, 'conformance');
      else if (command === 'checkpoint-batch') await checkpoint(checkpointer);
    }
  },
  async shardEnded({ checkpointer }) {
    await checkpoint(checkpointer);
  },
  async shutdownRequested({ checkpointer }) {
    await checkpoint(checkpointer);
  },
}));
