'use strict';
// The client as a real child process on pipes, as the daemon runs it.

const test = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const path = require('node:path');

const CLIENT = path.resolve(__dirname, '..');

/** Run `source` (a script that uses the client) with `input` on stdin; resolve {code, stdout, stderr}. */
function runScript(source, input) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-e', source], { env: { ...process.env, KCL_CLIENT: CLIENT } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => { stdout += d; });
    child.stderr.on('data', (d) => { stderr += d; });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(input);
  });
}

const lines = (...messages) => messages.map((m) => JSON.stringify(m) + '\n').join('');

test('stdout carries only protocol lines: console.log goes to stderr', async () => {
  const source = `
    const { run, log } = require(process.env.KCL_CLIENT);
    run({
      initialize() { console.log('hello from console.log'); console.info({ action: 'status' }); },
      processRecords({ records }) { log('got %d records', records.length); },
    });`;
  const { code, stdout, stderr } = await runScript(source, lines(
    { action: 'initialize', shardId: 's', sequenceNumber: 'LATEST', subSequenceNumber: 0 },
    { action: 'processRecords', records: [], millisBehindLatest: 0 },
  ));
  assert.equal(code, 0, stderr);
  assert.equal(stdout, '\n{"action":"status","responseFor":"initialize"}\n\n{"action":"status","responseFor":"processRecords"}\n');
  assert.match(stderr, /hello from console\.log/);
  assert.match(stderr, /got 0 records/);
});

test('exits 0 at end of stdin, even with timers still pending', async () => {
  const source = `
    const { run } = require(process.env.KCL_CLIENT);
    setInterval(() => {}, 1000);
    run({ processRecords() {} });`;
  const { code } = await runScript(source, '');
  assert.equal(code, 0);
});

test('the conformance processor checkpoints and retries a throttle once', async () => {
  const seq = '49590338271490256608559692540925702759324208523137515618';
  const record = { data: Buffer.from('checkpoint').toString('base64'), partitionKey: 'pk', sequenceNumber: seq,
    approximateArrivalTimestamp: 1700000000123, subSequenceNumber: 0, action: 'record' };
  const child = spawn(process.execPath, [path.join(CLIENT, 'conformance.js')]);
  let stdout = '';
  child.stdout.on('data', (d) => { stdout += d; });
  child.stderr.resume();
  child.stdin.end(lines(
    { action: 'processRecords', records: [record], millisBehindLatest: 0 },
    { action: 'checkpoint', sequenceNumber: seq, subSequenceNumber: 0, error: 'ThrottlingException' },
    { action: 'checkpoint', sequenceNumber: seq, subSequenceNumber: 0, error: null },
  ));
  const code = await new Promise((resolve) => child.on('close', resolve));
  assert.equal(code, 0);
  const request = { action: 'checkpoint', sequenceNumber: seq, subSequenceNumber: 0 };
  assert.deepEqual(stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l)),
    [request, request, { action: 'status', responseFor: 'processRecords' }]);
});
