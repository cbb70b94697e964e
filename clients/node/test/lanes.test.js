'use strict';
// Lanes (kcl-daemon's shardsPerChild, protocol README section 11): a processor factory takes the offer
// and serves each lane with a processor of its own; an instance never takes it.

const test = require('node:test');
const assert = require('node:assert/strict');
const { PassThrough } = require('node:stream');

const { run } = require('..');

const initialize = (lane, shardId, offer = false) => ({
  ...(offer ? { lanes: 4 } : { lane }), // the daemon writes the offer (or the lane) as the first key
  action: 'initialize', shardId, sequenceNumber: 'TRIM_HORIZON', subSequenceNumber: 0,
});
const onLane = (lane, message) => ({ lane, ...message });
const record = (text, sequenceNumber) => ({
  data: Buffer.from(text).toString('base64'), partitionKey: 'pk', sequenceNumber, subSequenceNumber: 0,
  approximateArrivalTimestamp: 1700000000123, action: 'record',
});
const batch = (...records) => ({ action: 'processRecords', records, millisBehindLatest: 0 });
const ok = { action: 'checkpoint', sequenceNumber: null, subSequenceNumber: null, error: null };
const status = (responseFor) => ({ action: 'status', responseFor });
const checkpointNull = { action: 'checkpoint', sequenceNumber: null, subSequenceNumber: null };

/** One processor per shard, each noting its calls under its shard. */
function recorder() {
  const calls = {};
  let made = 0;
  class Recorder {
    constructor() {
      made += 1;
      this.shard = '?';
    }

    note(call) {
      (calls[this.shard] ||= []).push(call);
    }

    initialize({ shardId }) {
      this.shard = shardId;
      this.note('initialize');
    }

    async processRecords({ records, checkpointer }) {
      this.note(`processRecords:${records.length}`);
      await checkpointer.checkpoint();
    }

    leaseLost() {
      this.note('leaseLost');
    }

    async shardEnded({ checkpointer }) {
      this.note('shardEnded');
      await checkpointer.checkpoint();
    }
  }
  return { Recorder, calls, made: () => made };
}

/** Drive run() interactively: send a daemon line, await the processor's next protocol message. */
function daemon(processor) {
  const stdin = new PassThrough();
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let err = '';
  stderr.on('data', (d) => { err += d; });
  const received = [];
  let waiting = null;
  let buffered = '';
  stdout.on('data', (d) => {
    buffered += d;
    let newline;
    while ((newline = buffered.indexOf('\n')) !== -1) {
      const line = buffered.slice(0, newline);
      buffered = buffered.slice(newline + 1);
      if (line === '') continue;
      received.push(JSON.parse(line));
      if (waiting) waiting();
    }
  });
  const done = run(processor, { stdin, stdout, stderr, exit: false });
  return {
    done,
    stderr: () => err,
    send(...messages) {
      for (const m of messages) stdin.write(`${JSON.stringify(m)}\n`);
    },
    async expect(message) {
      while (!received.length) await new Promise((resolve) => { waiting = resolve; });
      waiting = null;
      assert.deepEqual(received.shift(), message);
    },
    end() {
      stdin.end();
      return done;
    },
    rest: () => received,
  };
}

/** The processor's output split by lane ('-': lines without one); each lane's order is kept. */
function byLane(messages) {
  const lanes = {};
  for (const m of messages) (lanes[m.lane ?? '-'] ||= []).push(m);
  return lanes;
}

test('a factory takes the offer: each lane has its own processor, replies carry the lane', async () => {
  const { Recorder, calls, made } = recorder();
  const d = daemon(Recorder);
  d.send(
    initialize(0, 'shardId-0', true),
    initialize(1, 'shardId-1'),
    onLane(0, batch(record('a', '1'), record('b', '2'))),
    onLane(1, batch()),
    onLane(0, ok),
    onLane(1, ok),
    onLane(1, { action: 'shardEnded' }),
    onLane(1, ok),
    { action: 'close', lane: 1 },
    onLane(0, { action: 'leaseLost' }),
  );
  await d.expect({ action: 'lanes' }); // before anything else
  await d.end();
  const lanes = byLane(d.rest());
  assert.deepEqual(lanes['0'], [
    onLane(0, status('initialize')), onLane(0, checkpointNull), onLane(0, status('processRecords')),
    onLane(0, status('leaseLost')),
  ]);
  assert.deepEqual(lanes['1'], [
    onLane(1, status('initialize')), onLane(1, checkpointNull), onLane(1, status('processRecords')),
    onLane(1, checkpointNull), onLane(1, status('shardEnded')),
  ]);
  assert.equal(lanes['-'], undefined);
  assert.equal(made(), 2);
  assert.deepEqual(calls, {
    'shardId-0': ['initialize', 'processRecords:2', 'leaseLost'],
    'shardId-1': ['initialize', 'processRecords:0', 'shardEnded'],
  });
});

test('a lane waiting for its checkpoint reply holds up no other lane; a close ends only its lane', async () => {
  const { Recorder, calls } = recorder();
  const d = daemon(() => new Recorder()); // a function that makes one: the same as the class
  d.send(initialize(0, 'shardId-0', true));
  await d.expect({ action: 'lanes' });
  await d.expect(onLane(0, status('initialize')));
  d.send(onLane(0, batch(record('a', '1'))));
  await d.expect(onLane(0, checkpointNull)); // lane 0 now waits for its reply...
  d.send(initialize(1, 'shardId-1'));
  await d.expect(onLane(1, status('initialize'))); // ...while lane 1 starts
  d.send(onLane(1, { action: 'leaseLost' }), { action: 'close', lane: 1 });
  await d.expect(onLane(1, status('leaseLost')));
  d.send(onLane(0, { ...ok, error: 'ThrottlingException' }));
  await d.expect(onLane(0, status('processRecords')));
  d.send(onLane(0, { action: 'leaseLost' }));
  await d.expect(onLane(0, status('leaseLost')));
  await d.end();
  assert.deepEqual(Object.keys(calls).sort(), ['shardId-0', 'shardId-1']);
});

test('the channel goes out on the lane that uses it', async () => {
  const d = daemon(() => ({
    async processRecords({ log, metric }) {
      await log('info', 'hello');
      await metric('m', 1, 'Count', {});
    },
  }));
  d.send({ ...initialize(0, 's', true), channel: ['log', 'metric'] }, onLane(0, batch()));
  await d.expect({ action: 'lanes' });
  await d.expect(onLane(0, status('initialize')));
  await d.expect(onLane(0, { action: 'log', level: 'info', message: 'hello' }));
  await d.expect(onLane(0, { action: 'metric', name: 'm', value: 1, unit: 'Count', dimensions: {} }));
  await d.expect(onLane(0, status('processRecords')));
  await d.end();
});

test('an instance, or a factory without an offer, serves one shard without lanes', async () => {
  const offered = initialize(0, 'shardId-0', true);
  const instance = daemon({ processRecords() {} });
  instance.send(offered, { action: 'leaseLost' });
  await instance.end();
  assert.deepEqual(instance.rest(), [status('initialize'), status('leaseLost')]);

  const { Recorder, made } = recorder();
  const plain = daemon(Recorder);
  const { lanes, ...plainInitialize } = offered;
  plain.send(plainInitialize, batch(), ok, { ...offered, lanes: 1 }); // an offer of one lane is no offer
  await plain.end();
  assert.deepEqual(plain.rest(), [status('initialize'), checkpointNull, status('processRecords'), status('initialize')]);
  assert.equal(made(), 1);
});

test('lines naming no lane are skipped and logged; a factory making no processor is an error', async () => {
  const d = daemon(() => ({ processRecords() {} }));
  d.send(initialize(0, 's', true), { action: 'leaseLost' }, { action: 'close', lane: 7 }, onLane(0, { action: 'leaseLost' }));
  await d.end();
  assert.deepEqual(d.rest(), [{ action: 'lanes' }, onLane(0, status('initialize')), onLane(0, status('leaseLost'))]);
  assert.match(d.stderr(), /names no lane/);

  const bad = daemon(() => ({}));
  bad.send(initialize(0, 's', true));
  bad.end();
  await assert.rejects(bad.done, /the factory made a processor without a processRecords function/);
});

test('a constructor function whose prototype has processRecords is constructed', async () => {
  function Legacy() { this.made = true; }
  Legacy.prototype.processRecords = function processRecords() { assert.equal(this.made, true); };
  const d = daemon(Legacy);
  d.send(initialize(0, 's', true), onLane(0, batch()));
  await d.end();
  assert.deepEqual(d.rest(), [{ action: 'lanes' }, onLane(0, status('initialize')), onLane(0, status('processRecords'))]);
});
