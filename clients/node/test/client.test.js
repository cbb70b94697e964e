'use strict';
// In-process tests of the client: the daemon side is scripted up front (every line it would send,
// checkpoint replies included), which only works because the client never reads ahead of the protocol.

const test = require('node:test');
const assert = require('node:assert/strict');
const { PassThrough } = require('node:stream');

const { run, CheckpointError } = require('..');

const SEQ = '49590338271490256608559692538361571095921575989136588898';

function record(text, sequenceNumber = SEQ, subSequenceNumber = 0, extra = {}) {
  return {
    data: Buffer.from(text).toString('base64'),
    partitionKey: 'pk',
    sequenceNumber,
    approximateArrivalTimestamp: 1700000000123,
    subSequenceNumber,
    action: 'record',
    ...extra,
  };
}

const INITIALIZE = { action: 'initialize', shardId: 'shardId-000000000001', sequenceNumber: 'TRIM_HORIZON', subSequenceNumber: 0 };
const batch = (...records) => ({ action: 'processRecords', records, millisBehindLatest: 0 });
const reply = (sequenceNumber, subSequenceNumber, error = null) =>
  ({ action: 'checkpoint', sequenceNumber, subSequenceNumber, error });
const status = (responseFor) => ({ action: 'status', responseFor });

/** Run `processor` against the daemon lines (objects or raw strings); return what it wrote. */
async function converse(processor, daemonLines, { chunkSize } = {}) {
  const stdin = new PassThrough();
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let out = '';
  let err = '';
  stdout.on('data', (d) => { out += d; });
  stderr.on('data', (d) => { err += d; });
  const done = run(processor, { stdin, stdout, stderr, exit: false });
  const text = daemonLines.map((l) => (typeof l === 'string' ? l : JSON.stringify(l)) + '\n').join('');
  const bytes = Buffer.from(text);
  const step = chunkSize || bytes.length || 1;
  for (let i = 0; i < bytes.length; i += step) stdin.write(bytes.subarray(i, i + step));
  stdin.end();
  await done;
  return { messages: out.split('\n').filter((l) => l !== '').map((l) => JSON.parse(l)), out, stderr: err };
}

test('every message is wrapped in newlines and a status answers each action', async () => {
  const { messages, out } = await converse(
    { processRecords() {} },
    [INITIALIZE, batch(), { action: 'leaseLost' }],
  );
  assert.deepEqual(messages, [status('initialize'), status('processRecords'), status('leaseLost')]);
  assert.equal(out, messages.map((m) => `\n${JSON.stringify(m)}\n`).join(''));
});

test('handlers get decoded records and the documented inputs', async () => {
  const seen = {};
  await converse({
    initialize(input) { seen.initialize = input; },
    processRecords(input) { seen.processRecords = input; },
    leaseLost(input) { seen.leaseLost = input; },
  }, [
    INITIALIZE,
    { action: 'processRecords', millisBehindLatest: 42, records: [
      record('hi', '7', 3, { partitionKey: 'été-☃' }),
      { ...record('', '8'), data: '', approximateArrivalTimestamp: 0 },
    ] },
    { action: 'leaseLost' },
  ], { chunkSize: 1 }); // byte by byte: multi-byte characters arrive split
  assert.deepEqual(seen.initialize, {
    shardId: 'shardId-000000000001',
    sequenceNumber: 'TRIM_HORIZON',
    subSequenceNumber: 0,
    streamName: null,
    streamIdentifier: null,
  });
  const { records, millisBehindLatest, checkpointer } = seen.processRecords;
  assert.equal(millisBehindLatest, 42);
  assert.equal(typeof checkpointer.checkpoint, 'function');
  assert.deepEqual(records[0], {
    data: Buffer.from('hi'),
    partitionKey: 'été-☃',
    sequenceNumber: '7',
    subSequenceNumber: 3,
    approximateArrivalTimestamp: new Date(1700000000123),
    approximateArrivalTimestampMillis: 1700000000123,
  });
  assert.ok(Buffer.isBuffer(records[1].data) && records[1].data.length === 0);
  assert.equal(records[1].approximateArrivalTimestampMillis, 0);
  assert.deepEqual(seen.leaseLost, {}); // no checkpointer: checkpointing is impossible here
});

test('checkpoint argument forms', async () => {
  const { messages } = await converse({
    async processRecords({ records, checkpointer }) {
      await checkpointer.checkpoint();
      await checkpointer.checkpoint(records[0]);
      await checkpointer.checkpoint('123');
      await checkpointer.checkpoint('123', 4);
      await checkpointer.checkpoint(456n, 0);
      await checkpointer.checkpoint(null);
    },
  }, [
    batch(record('x', SEQ, 2)),
    reply(null, null), reply(SEQ, 2), reply('123', null), reply('123', 4), reply('456', 0), reply(null, null),
  ]);
  assert.deepEqual(messages, [
    { action: 'checkpoint', sequenceNumber: null, subSequenceNumber: null },
    { action: 'checkpoint', sequenceNumber: SEQ, subSequenceNumber: 2 },
    { action: 'checkpoint', sequenceNumber: '123', subSequenceNumber: null },
    { action: 'checkpoint', sequenceNumber: '123', subSequenceNumber: 4 },
    { action: 'checkpoint', sequenceNumber: '456', subSequenceNumber: 0 },
    { action: 'checkpoint', sequenceNumber: null, subSequenceNumber: null },
    status('processRecords'),
  ]);
});

test('bad checkpoint arguments reject with a TypeError and send nothing', async () => {
  const errors = [];
  const { messages } = await converse({
    async processRecords({ checkpointer }) {
      for (const args of [[{}], ['1', -1], ['1', 1.5], [null, 3], [true], ['1', '2'], [1e56]]) {
        await checkpointer.checkpoint(...args).catch((e) => errors.push(e));
      }
    },
  }, [batch()]);
  assert.equal(errors.length, 7);
  for (const e of errors) assert.ok(e instanceof TypeError, String(e));
  assert.deepEqual(messages, [status('processRecords')]);
});

test('a refused checkpoint rejects with a CheckpointError named after the Java exception', async () => {
  const errors = [];
  const { messages } = await converse({
    async processRecords({ checkpointer }) {
      for (let i = 0; i < 4; i++) await checkpointer.checkpoint('1').catch((e) => errors.push(e));
      await checkpointer.checkpoint('1'); // then a success
    },
  }, [
    batch(),
    reply('1', null, 'ThrottlingException'),
    reply('1', null, 'KinesisClientLibDependencyException'),
    reply('1', null, 'ShutdownException'),
    reply('1', null, 'IllegalArgumentException'),
    reply('1', null),
  ]);
  assert.deepEqual(errors.map((e) => [e.name, e.code, e.retriable]), [
    ['ThrottlingException', 'ThrottlingException', true],
    ['KinesisClientLibDependencyException', 'KinesisClientLibDependencyException', true],
    ['ShutdownException', 'ShutdownException', false],
    ['IllegalArgumentException', 'IllegalArgumentException', false],
  ]);
  for (const e of errors) {
    assert.ok(e instanceof CheckpointError && e instanceof Error);
    assert.equal(e.sequenceNumber, '1');
  }
  assert.equal(messages.length, 6);
  assert.deepEqual(messages.at(-1), status('processRecords'));
});

test('a throwing handler is logged and still answered with a status', async () => {
  const { messages, stderr } = await converse({
    initialize() { throw new Error('sync boom'); },
    async processRecords() { throw new Error('async boom'); },
    async shutdownRequested({ checkpointer }) {
      await checkpointer.checkpoint(); // a rejected checkpoint that is not caught
    },
  }, [INITIALIZE, batch(), { action: 'shutdownRequested' }, reply(null, null, 'ShutdownException'), { action: 'leaseLost' }]);
  assert.deepEqual(messages, [
    status('initialize'),
    status('processRecords'),
    { action: 'checkpoint', sequenceNumber: null, subSequenceNumber: null },
    status('shutdownRequested'),
    status('leaseLost'),
  ]);
  assert.match(stderr, /initialize handler failed.*sync boom/s);
  assert.match(stderr, /processRecords handler failed.*async boom/s);
  assert.match(stderr, /shutdownRequested handler failed.*ShutdownException/s);
});

test('one action at a time: the next action waits for the slow handler and its status', async () => {
  const events = [];
  const { messages } = await converse({
    async processRecords() {
      events.push('processRecords start');
      await new Promise((resolve) => setTimeout(resolve, 30));
      events.push('processRecords end');
    },
    leaseLost() { events.push('leaseLost'); },
  }, [batch(), { action: 'leaseLost' }]);
  assert.deepEqual(events, ['processRecords start', 'processRecords end', 'leaseLost']);
  assert.deepEqual(messages, [status('processRecords'), status('leaseLost')]);
});

test('concurrent checkpoints are queued: one request, its reply, then the next', async () => {
  const { messages } = await converse({
    async processRecords({ checkpointer }) {
      await Promise.all([checkpointer.checkpoint('1'), checkpointer.checkpoint('2')]);
    },
  }, [batch(), reply('1', null), reply('2', null)]);
  assert.deepEqual(messages.map((m) => m.sequenceNumber ?? m.responseFor), ['1', '2', 'processRecords']);
});

test('a checkpoint the handler forgot to await finishes before the status', async () => {
  const { messages, stderr } = await converse({
    processRecords({ checkpointer }) {
      checkpointer.checkpoint('1').catch(() => {});
    },
  }, [batch(), reply('1', null)]);
  assert.deepEqual(messages, [{ action: 'checkpoint', sequenceNumber: '1', subSequenceNumber: null }, status('processRecords')]);
  assert.match(stderr, /returned before its checkpoint finished/);
});

test('a checkpointer used after its action finished rejects without writing', async () => {
  let saved;
  let error;
  const { messages } = await converse({
    processRecords({ checkpointer }) { saved = checkpointer; },
    async leaseLost() { error = await saved.checkpoint().catch((e) => e); },
  }, [batch(), { action: 'leaseLost' }]);
  assert.ok(error instanceof CheckpointError);
  assert.equal(error.code, 'InvalidStateException');
  assert.deepEqual(messages, [status('processRecords'), status('leaseLost')]);
});

test('shardEnded without a handler checkpoints at the end of the shard', async () => {
  const { messages } = await converse({ processRecords() {} }, [{ action: 'shardEnded' }, reply(null, null)]);
  assert.deepEqual(messages, [{ action: 'checkpoint', sequenceNumber: null, subSequenceNumber: null }, status('shardEnded')]);
});

test('blank lines, noise, unknown actions and stray replies are skipped, not fatal', async () => {
  const { messages, stderr } = await converse({ processRecords() {} }, [
    '', '   ', 'not json', '[1,2]', '{"noAction":true}', { action: 'bogus' }, reply('1', null),
    batch(), '\r', `${JSON.stringify({ action: 'leaseLost' })}\r`,
  ]);
  assert.deepEqual(messages, [status('processRecords'), status('leaseLost')]);
  assert.match(stderr, /not a protocol message: not json/);
  assert.match(stderr, /unknown action "bogus"/);
  assert.match(stderr, /checkpoint reply that nothing asked for/);
});

test('noise between a checkpoint request and its reply is skipped', async () => {
  const { messages } = await converse({
    async processRecords({ checkpointer }) { await checkpointer.checkpoint(); },
  }, [batch(), '', 'garbage', reply(null, null)]);
  assert.deepEqual(messages.at(-1), status('processRecords'));
});

test('an action instead of the checkpoint reply fails the checkpoint and is handled next', async () => {
  let error;
  const { messages } = await converse({
    async processRecords({ checkpointer }) { error = await checkpointer.checkpoint().catch((e) => e); },
  }, [batch(), { action: 'leaseLost' }]);
  assert.equal(error.code, 'InvalidStateException');
  assert.deepEqual(messages.slice(1), [status('processRecords'), status('leaseLost')]);
});

test('end of input while waiting for a checkpoint reply rejects it; run() still ends', async () => {
  let error;
  const { messages } = await converse({
    async shutdownRequested({ checkpointer }) { error = await checkpointer.checkpoint().catch((e) => e); },
    processRecords() {},
  }, [{ action: 'shutdownRequested' }]);
  assert.equal(error.code, 'InvalidStateException');
  assert.deepEqual(messages.at(-1), status('shutdownRequested'));
});

test('legacy KCL 1.x shutdown maps onto shardEnded / leaseLost', async () => {
  const calls = [];
  const { messages } = await converse({
    processRecords() {},
    leaseLost() { calls.push('leaseLost'); },
    async shardEnded({ checkpointer }) { calls.push('shardEnded'); await checkpointer.checkpoint(); },
  }, [{ action: 'shutdown', reason: 'ZOMBIE' }, { action: 'shutdown', reason: 'TERMINATE' }, reply(null, null)]);
  assert.deepEqual(calls, ['leaseLost', 'shardEnded']);
  assert.deepEqual(messages.map((m) => m.responseFor ?? m.action), ['shutdown', 'checkpoint', 'shutdown']);
});

test('a processRecords line over 10 MB, fed in odd-sized chunks', async () => {
  const payload = Buffer.alloc(100 * 1024, 0xab).toString('base64');
  const records = Array.from({ length: 110 }, (_, i) => ({ ...record('', String(1000 + i)), data: payload, partitionKey: `☃-${i}` }));
  records.push(record('checkpoint', '2000'));
  const line = JSON.stringify(batch(...records));
  assert.ok(line.length > 10 * 1024 * 1024);
  let got;
  const { messages } = await converse({
    async processRecords(input) {
      got = input.records;
      await input.checkpointer.checkpoint(input.records.at(-1));
    },
  }, [line, reply('2000', 0)], { chunkSize: 65537 });
  assert.equal(got.length, 111);
  assert.equal(got[0].data.length, 100 * 1024);
  assert.equal(got[109].partitionKey, '☃-109');
  assert.deepEqual(messages, [{ action: 'checkpoint', sequenceNumber: '2000', subSequenceNumber: 0 }, status('processRecords')]);
});

test('run() needs a processRecords function', () => {
  assert.throws(() => run({}), TypeError);
  assert.throws(() => run(null), TypeError);
});

test('initialize names the stream when the daemon reads several', async () => {
  const seen = {};
  await converse({
    initialize(input) { seen.initialize = input; },
    processRecords() {},
  }, [{ ...INITIALIZE, streamName: 'orders', streamIdentifier: '123456789012:orders:1700000000' }]);
  assert.equal(seen.initialize.streamName, 'orders');
  assert.equal(seen.initialize.streamIdentifier, '123456789012:orders:1700000000');
});

test('deadLetter hands a record to the daemon when offered, and says when it is not', async () => {
  const answers = [];
  const processor = {
    async processRecords({ records, deadLetter }) {
      answers.push(await deadLetter(records[0], 'not JSON'));
    },
  };
  const offered = { ...INITIALIZE, channel: ['log', 'metric', 'deadLetter'] };
  const { messages } = await converse(processor, [offered, batch(record('x', SEQ, 3))]);
  assert.deepEqual(messages, [
    status('initialize'),
    { action: 'deadLetter', sequenceNumber: SEQ, subSequenceNumber: 3, reason: 'not JSON' },
    status('processRecords'),
  ]);
  const plain = await converse(processor, [INITIALIZE, batch(record('x'))]);
  assert.deepEqual(plain.messages, [status('initialize'), status('processRecords')]);
  assert.deepEqual(answers, [true, false]);
});
