// An in-memory Kinesis endpoint for bench/scaling.py: both daemons read the same records from memory, so
// the endpoint does not set the pace (kinesalite, one Node process, caps every reader near 35k records/s).
//
// One Node process, two ports over the same data: HTTP/1.1 for kcl-daemon and h2c (HTTP/2 with prior
// knowledge) for the Java SDK, which speaks only HTTP/2 to Kinesis, so Java needs no proxy in front.
// It answers GetShardIterator and GetRecords for the streams it holds; every other call (ListShards,
// DescribeStreamSummary, ...) and every call on another stream goes as it is to the upstream emulator
// over HTTP/1.1. Records are made here, never put into the upstream: each one rendered to its JSON once
// (100-byte payload, kinesalite's version-2 sequence-number layout, so both daemons' checks accept them),
// and a GetRecords page is the join of its records' rendered bytes.
//
// What a held stream answers as kinesalite does: shards stay open (a read at the end gets an empty page and
// a next iterator), MillisBehindLatest is 0, iterators never expire. Signatures are not checked.
//
// Control (HTTP/1.1 port, JSON bodies), used by bench/_memory_kinesis.py:
//   POST /_bench/hold   {stream, shards: [shardId...], perShard, size}  -> {perShard: {shardId: n}}
//   POST /_bench/append {stream, count}   (round-robin over the shards) -> {perShard: {shardId: n}}
//   POST /_bench/mark   (forget the first GetRecords seen)              -> {}
//   GET  /_bench/stats  -> {calls: {op: n}, records, firstGetRecordsAt (epoch s or null), appended}
//
// Usage: node _memory_kinesis.js <upstream-url>. Binds 127.0.0.1; prints "ready <http1-port> <h2c-port>".
'use strict';
const http = require('http');
const http2 = require('http2');

const [upstream] = process.argv.slice(2);
const target = new URL(upstream);
const agent = new http.Agent({ keepAlive: true, maxSockets: 32 });
const HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'host', 'content-length']);
const PREFIX = 'Kinesis_20131202.';
const JSON_TYPE = 'application/x-amz-json-1.1';

const streams = new Map(); // name -> {created: epoch s, shards: Map(shardId -> shard), order: [shard]}
const calls = {};
let served = 0;
let appended = 0;
let firstGetRecordsAt = null;
let requestIds = 0;

// -- records ------------------------------------------------------------------------------------------

function hex(value, width) {
  return value.toString(16).padStart(width, '0').slice(-width);
}

// kinesalite's version-2 layout: '2', shard creation (s), the shard index's last hex digit, the sequence
// index (16 hex), a byte, the record's time (s), the shard index (8 hex), '2'; as a decimal string
function sequenceNumber(created, shardIx, seqIx, seconds) {
  const digits = '2' + hex(created, 9) + hex(shardIx, 1) + hex(BigInt(seqIx), 16) + '00' + hex(seconds, 9) +
    hex(shardIx, 8) + '2';
  return BigInt('0x' + digits);
}

function newShard(shardId) {
  const match = /(\d+)$/.exec(shardId);
  return { id: shardId, index: match ? Number(match[1]) : 0, sequences: [], arrivals: [], rendered: [] };
}

function addRecords(stream, shard, count, payload) {
  const nowMs = Date.now();
  const seconds = Math.floor(nowMs / 1000);
  const data = JSON.stringify(payload);
  const key = JSON.stringify('pk-' + shard.index);
  for (let i = 0; i < count; i += 1) {
    const seq = sequenceNumber(stream.created, shard.index, shard.sequences.length, seconds);
    shard.sequences.push(seq);
    shard.arrivals.push(nowMs);
    shard.rendered.push(Buffer.from(
      `{"SequenceNumber":"${seq}","ApproximateArrivalTimestamp":${nowMs / 1000},"Data":${data},` +
      `"PartitionKey":${key}}`));
  }
  appended += count;
}

function perShard(stream) {
  const out = {};
  for (const shard of stream.order) out[shard.id] = shard.rendered.length;
  return out;
}

// -- the two operations answered here ------------------------------------------------------------------

function iteratorFor(stream, shard, index) {
  return Buffer.from(`${stream}\0${shard}\0${index}`).toString('base64');
}

function lowerBound(sorted, value, strict) {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (sorted[mid] < value || (strict && sorted[mid] === value)) lo = mid + 1; else hi = mid;
  }
  return lo;
}

function startIndex(shard, request) {
  switch (request.ShardIteratorType) {
    case 'TRIM_HORIZON': return 0;
    case 'LATEST': return shard.rendered.length;
    case 'AT_SEQUENCE_NUMBER': return lowerBound(shard.sequences, BigInt(request.StartingSequenceNumber), false);
    case 'AFTER_SEQUENCE_NUMBER': return lowerBound(shard.sequences, BigInt(request.StartingSequenceNumber), true);
    case 'AT_TIMESTAMP': return lowerBound(shard.arrivals, Math.round(Number(request.Timestamp) * 1000), false);
    default: throw new Error('unknown ShardIteratorType ' + request.ShardIteratorType);
  }
}

function clientError(type, message) {
  return [400, Buffer.from(JSON.stringify({ __type: type, message }))];
}

// [status, body] for a call on a held stream, or null: forward it
function answer(operation, body) {
  if (operation !== 'GetShardIterator' && operation !== 'GetRecords') return null;
  const request = JSON.parse(body.toString() || '{}');
  if (operation === 'GetShardIterator') {
    const stream = streams.get(request.StreamName);
    if (!stream) return null;
    const shard = stream.shards.get(request.ShardId);
    if (!shard) return clientError('ResourceNotFoundException', `Shard ${request.ShardId} does not exist`);
    const index = startIndex(shard, request);
    count(operation);
    return [200, Buffer.from(JSON.stringify({ ShardIterator: iteratorFor(request.StreamName, shard.id, index) }))];
  }
  const parts = Buffer.from(String(request.ShardIterator || ''), 'base64').toString().split('\0');
  const stream = parts.length === 3 ? streams.get(parts[0]) : undefined;
  if (!stream) return null;
  const shard = stream.shards.get(parts[1]);
  if (!shard) return clientError('InvalidArgumentException', 'unknown shard iterator');
  if (firstGetRecordsAt === null) firstGetRecordsAt = Date.now() / 1000;
  const index = Number(parts[2]);
  const end = Math.min(shard.rendered.length, index + Math.min(Number(request.Limit) || 10000, 10000));
  const pieces = [Buffer.from('{"Records":[')];
  for (let i = index; i < end; i += 1) {
    if (i > index) pieces.push(COMMA);
    pieces.push(shard.rendered[i]);
  }
  pieces.push(Buffer.from(`],"NextShardIterator":"${iteratorFor(parts[0], shard.id, end)}","MillisBehindLatest":0}`));
  count(operation);
  served += Math.max(0, end - index);
  return [200, Buffer.concat(pieces)];
}
const COMMA = Buffer.from(',');

function count(operation) {
  calls[operation] = (calls[operation] || 0) + 1;
}

// -- control ----------------------------------------------------------------------------------------

function control(path, body) {
  const request = body.length ? JSON.parse(body.toString()) : {};
  if (path === '/_bench/hold') {
    const stream = { created: Math.floor(Date.now() / 1000) - 60, shards: new Map(), order: [] };
    for (const shardId of request.shards) {
      const shard = newShard(shardId);
      stream.shards.set(shardId, shard);
      stream.order.push(shard);
    }
    stream.payload = Buffer.alloc(request.size || 100, 'x').toString('base64');
    stream.next = 0;
    for (const shard of stream.order) addRecords(stream, shard, request.perShard || 0, stream.payload);
    streams.set(request.stream, stream);
    return { perShard: perShard(stream) };
  }
  if (path === '/_bench/append') {
    const stream = streams.get(request.stream);
    if (!stream) throw new Error('no stream ' + request.stream);
    const n = stream.order.length;
    const base = Math.floor(request.count / n);
    let extra = request.count % n;
    for (let k = 0; k < n; k += 1) {
      const shard = stream.order[(stream.next + k) % n];
      const add = base + (extra > 0 ? 1 : 0);
      if (extra > 0) extra -= 1;
      if (add) addRecords(stream, shard, add, stream.payload);
    }
    stream.next = (stream.next + request.count) % n;
    return { perShard: perShard(stream) };
  }
  if (path === '/_bench/mark') {
    firstGetRecordsAt = null;
    return {};
  }
  if (path === '/_bench/stats') {
    return { calls, records: served, firstGetRecordsAt, appended };
  }
  throw new Error('unknown control path ' + path);
}

// -- forwarding ---------------------------------------------------------------------------------------

function forward(method, path, headers, body, reply) {
  const out = {};
  for (const [name, value] of Object.entries(headers)) {
    if (!name.startsWith(':') && !HOP.has(name)) out[name] = value;
  }
  out.host = target.host;
  out['content-length'] = String(body.length);
  count('forwarded');
  const req = http.request({ host: target.hostname, port: target.port, method, path, headers: out, agent }, (res) => {
    const parts = [];
    res.on('data', (c) => parts.push(c));
    res.on('end', () => {
      const back = {};
      for (const [name, value] of Object.entries(res.headers)) if (!HOP.has(name) && name !== 'date') back[name] = value;
      reply(res.statusCode, back, Buffer.concat(parts));
    });
  });
  req.on('error', (err) => reply(502, { 'content-type': 'text/plain' }, Buffer.from(String(err))));
  req.end(body);
}

// one request, whichever protocol it came on: reply(status, headers, body)
function handle(method, path, headers, body, reply) {
  try {
    if (path.startsWith('/_bench/')) {
      reply(200, { 'content-type': 'application/json' }, Buffer.from(JSON.stringify(control(path, body))));
      return;
    }
    const targetHeader = String(headers['x-amz-target'] || '');
    const answered = targetHeader.startsWith(PREFIX) ? answer(targetHeader.slice(PREFIX.length), body) : null;
    if (answered === null) {
      forward(method, path, headers, body, reply);
      return;
    }
    requestIds += 1;
    reply(answered[0], { 'content-type': JSON_TYPE, 'x-amzn-requestid': 'memory-' + requestIds }, answered[1]);
  } catch (err) {
    reply(500, { 'content-type': 'text/plain' }, Buffer.from(String(err && err.stack ? err.stack : err)));
  }
}

function collect(source, done) {
  const chunks = [];
  source.on('data', (c) => chunks.push(c));
  source.on('end', () => done(Buffer.concat(chunks)));
}

const plain = http.createServer({ keepAliveTimeout: 60000 }, (req, res) => {
  collect(req, (body) => handle(req.method, req.url, req.headers, body, (status, headers, data) => {
    res.writeHead(status, { ...headers, 'content-length': data.length });
    res.end(data);
  }));
});
plain.headersTimeout = 0;
plain.requestTimeout = 0;

// Node's default of 10 MB per session is less than 256 shards' first pages in flight at once: past it Node
// drops the connection (the SDK then saw "received 0 bytes before the connection was closed"), so the
// session may hold what the pages need; no idle timeout either
const h2c = http2.createServer({
  maxSessionMemory: 4096,
  settings: { maxConcurrentStreams: 100000, initialWindowSize: 16 * 1024 * 1024 },
});
h2c.setTimeout(0);
h2c.on('sessionError', () => {});
h2c.on('stream', (stream, headers) => {
  stream.on('error', () => {});
  collect(stream, (body) => handle(headers[':method'], headers[':path'], headers, body, (status, back, data) => {
    if (stream.destroyed) return;
    stream.respond({ ...back, ':status': status, 'content-length': data.length });
    stream.end(data);
  }));
});

plain.listen(0, '127.0.0.1', () => {
  h2c.listen(0, '127.0.0.1', () => console.log(`ready ${plain.address().port} ${h2c.address().port}`));
});
