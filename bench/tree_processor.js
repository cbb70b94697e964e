// The decoding processor of bench/process_tree.py on the project's Node client (kcl-daemon-node and
// kcl-daemon-node-lanes): json-parses every record's payload (the client has base64-decoded it), adds up
// one field, checkpoints at the end of each batch and appends one line per batch to BENCH_BATCH_LOG
// ("<shard> <start epoch s> <end epoch s> <records>"), as tree_processor.py does. A class is given to
// run(), so kcl-daemon's offer of lanes is taken when made.
'use strict';
const fs = require('fs');
const path = require('path');
const { run } = require(path.join(__dirname, '..', 'clients', 'node', 'index.js'));

const log = fs.openSync(process.env.BENCH_BATCH_LOG, 'a');

class DecodingProcessor {
  constructor() {
    this.shard = '?';
    this.total = 0;
  }

  initialize({ shardId }) {
    this.shard = shardId;
  }

  async processRecords({ records, checkpointer }) {
    const start = Date.now() / 1000;
    let total = 0;
    for (const record of records) total += JSON.parse(record.data).amount;
    this.total += total;
    if (records.length) await checkpointer.checkpoint();
    const end = Date.now() / 1000;
    fs.writeSync(log, `${this.shard} ${start.toFixed(6)} ${end.toFixed(6)} ${records.length}\n`);
  }
}

run(DecodingProcessor);
