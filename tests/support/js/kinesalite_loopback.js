#!/usr/bin/env node
// kinesalite's own cli.js has no --host flag and binds ALL interfaces; never start it that way.
// This wrapper takes cli.js's flags plus --host (default 127.0.0.1) and binds loopback only.
// Usage: node kinesalite_loopback.js --port 4567 --createStreamMs 0 --deleteStreamMs 0 ...
// Modules come from $KINESALITE_DIR, by default <repo>/.cache/node/node_modules.
// --countsPort N (benchmarks): count the API calls by X-Amz-Target and answer any GET on 127.0.0.1:N
// with the counts as JSON ({"Kinesis_20131202.GetRecords": 123, ...}); counting costs a map update.
// --callLog FILE (benchmarks): append one line per GetRecords call when its response is sent:
// "<start epoch s> <end epoch s> <shard id> <status> <records>", to see when a daemon reads what.
'use strict';
const path = require('path');
const modDir = process.env.KINESALITE_DIR || path.join(__dirname, '..', '..', '..', '.cache', 'node', 'node_modules');
const argv = require(path.join(modDir, 'minimist'))(process.argv.slice(2));
const kinesalite = require(path.join(modDir, 'kinesalite'));
const host = argv.host || '127.0.0.1';
const port = argv.port || 4567;
const server = kinesalite(argv).listen(port, host, function () {
  const address = server.address();
  console.log('Listening at http://%s:%s', address.address, address.port);
});
if (argv.countsPort) {
  const counts = {};
  server.prependListener('request', (req) => {
    const target = req.headers['x-amz-target'] || '?';
    counts[target] = (counts[target] || 0) + 1;
  });
  require('http').createServer((req, res) => {
    res.setHeader('Content-Type', 'application/json');
    res.end(JSON.stringify(counts));
  }).listen(argv.countsPort, '127.0.0.1');
}
if (argv.callLog) {
  const fs = require('fs');
  const crypto = require('crypto');
  const db = require(path.join(modDir, 'kinesalite', 'db'));
  const log = fs.createWriteStream(argv.callLog, { flags: 'a' });
  const shardOf = (body) => {
    try {
      const buffer = Buffer.from(JSON.parse(body).ShardIterator, 'base64');
      const decipher = crypto.createDecipheriv('aes-256-cbc', db.ITERATOR_PWD_KEY, db.ITERATOR_PWD_IV);
      return Buffer.concat([decipher.update(buffer.slice(8)), decipher.final()]).toString('utf8').split('/')[2];
    } catch (e) {
      return '?';
    }
  };
  server.prependListener('request', (req, res) => {
    if (!String(req.headers['x-amz-target'] || '').endsWith('.GetRecords')) return;
    const start = Date.now() / 1000;
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    let records = 0;
    const end = res.end.bind(res);
    res.end = (c, ...rest) => {
      if (c && typeof c !== 'function') records = String(c).split('"PartitionKey"').length - 1;
      return end(c, ...rest);
    };
    res.on('finish', () => {
      const shard = shardOf(Buffer.concat(chunks).toString('utf8'));
      log.write(`${start.toFixed(3)} ${(Date.now() / 1000).toFixed(3)} ${shard} ${res.statusCode} ${records}\n`);
    });
  });
}
process.on('SIGTERM', () => process.exit(0));
process.on('SIGINT', () => process.exit(0));
