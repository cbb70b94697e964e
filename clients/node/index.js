'use strict';
/**
 * kcl-client: write a Kinesis record processor for the MultiLangDaemon protocol (kcl-daemon or the
 * Java KCL daemon) in Node.js. No dependencies.
 *
 *   const { run } = require('kcl-client');
 *   run({ async processRecords({ records, checkpointer }) { ... await checkpointer.checkpoint(); } });
 *
 * The daemon writes one JSON action per line on our stdin and waits for {"action":"status"} on our
 * stdout. Everything is strictly sequential: the next action is not even read before the current
 * handler has finished and its status is written, and the reply to a checkpoint request is the very
 * next line on stdin. stdout belongs to the protocol; log to stderr (see `log`).
 *
 * Given a processor factory (a class or a function that makes one), the client also takes kcl-daemon's
 * offer of lanes (shardsPerChild, protocol README section 11): one process then serves several shards,
 * each line carries its lane, and each lane is such a sequential conversation with its own processor.
 */

const { Console } = require('console');
const util = require('util');

/** Checkpoint errors the daemon reports that are worth retrying after a pause. */
const RETRIABLE = new Set(['ThrottlingException', 'KinesisClientLibDependencyException']);

/** A checkpoint the daemon refused. `name` and `code` are the Java exception name it sent. */
class CheckpointError extends Error {
  constructor(code, message, position = {}) {
    super(message || `checkpoint failed: ${code}`);
    this.name = code;
    this.code = code;
    this.retriable = RETRIABLE.has(code);
    this.sequenceNumber = position.sequenceNumber ?? null;
    this.subSequenceNumber = position.subSequenceNumber ?? null;
  }
}

/** Log like console.log, but to stderr (the daemon copies the child's stderr into its own log). */
function log(...args) {
  process.stderr.write(util.format(...args) + '\n');
}

/** Reads a stream line by line, one line per call, so nothing is consumed ahead of the protocol. */
class LineReader {
  constructor(stream) {
    this._chunks = stream[Symbol.asyncIterator]();
    this._head = null; // unread bytes of the current chunk
    this._parts = []; // pieces of a line that spans chunks (a processRecords line can be > 10 MB)
    this._eof = false;
  }

  /** The next line without its line terminator, or null at end of input. */
  async next() {
    for (;;) {
      if (this._head) {
        const newline = this._head.indexOf(10);
        if (newline !== -1) {
          this._parts.push(this._head.subarray(0, newline));
          this._head = newline + 1 < this._head.length ? this._head.subarray(newline + 1) : null;
          return this._takeLine();
        }
        this._parts.push(this._head);
        this._head = null;
      }
      if (this._eof) return this._parts.length ? this._takeLine() : null;
      const { value, done } = await this._chunks.next();
      if (done) this._eof = true;
      else this._head = typeof value === 'string' ? Buffer.from(value) : value;
    }
  }

  _takeLine() {
    const bytes = this._parts.length === 1 ? this._parts[0] : Buffer.concat(this._parts);
    this._parts = [];
    const line = bytes.toString('utf8'); // whole lines only, so multi-byte characters never split
    return line.endsWith('\r') ? line.slice(0, -1) : line;
  }
}

/** Parse a protocol line: an object with a string `action`, or null for anything else. */
function parseMessage(line) {
  let message;
  try {
    message = JSON.parse(line);
  } catch {
    return null;
  }
  const isAction = message && typeof message === 'object' && typeof message.action === 'string';
  return isAction ? message : null;
}

/** Protocol messages from a stream, one per call; blank and non-protocol lines are skipped (and logged). */
class MessageReader {
  constructor(stream, log) {
    this._lines = new LineReader(stream);
    this._log = log;
  }

  /** The next message, or null at end of input. */
  async next() {
    for (;;) {
      const line = await this._lines.next();
      if (line === null) return null;
      if (line.trim() === '') continue;
      const message = parseMessage(line);
      if (message !== null) return message;
      this._log(`kcl-client: skipping a line that is not a protocol message: ${line.slice(0, 200)}`);
    }
  }
}

/** A daemon record as handed to processRecords. */
function toRecord(raw) {
  const millis = raw.approximateArrivalTimestamp ?? null;
  return {
    data: Buffer.from(raw.data ?? '', 'base64'),
    partitionKey: raw.partitionKey,
    sequenceNumber: raw.sequenceNumber == null ? null : String(raw.sequenceNumber),
    // KCL 1.x sent null for records that were not KPL-aggregated; 0 means the same thing.
    subSequenceNumber: raw.subSequenceNumber ?? 0,
    approximateArrivalTimestamp: millis === null ? null : new Date(millis),
    approximateArrivalTimestampMillis: millis,
  };
}

/** checkpoint() / checkpoint(record) / checkpoint(sequenceNumber, subSequenceNumber?) → wire position. */
function toPosition(args) {
  const [first, second] = args;
  if (args.length === 0 || first == null) {
    if (second != null) throw new TypeError('checkpoint(): a subSequenceNumber needs a sequenceNumber');
    return { sequenceNumber: null, subSequenceNumber: null };
  }
  let sequenceNumber = first;
  let subSequenceNumber = second ?? null;
  if (typeof first === 'object') {
    if (first.sequenceNumber == null) {
      throw new TypeError('checkpoint(record): the record has no sequenceNumber');
    }
    sequenceNumber = first.sequenceNumber;
    subSequenceNumber = first.subSequenceNumber ?? null;
  }
  // Real sequence numbers do not fit in a JS number: take strings, bigints and small (emulator) integers.
  const isSafe = typeof sequenceNumber === 'string' || typeof sequenceNumber === 'bigint'
    || Number.isSafeInteger(sequenceNumber);
  if (!isSafe) {
    throw new TypeError(`checkpoint(): bad sequenceNumber ${util.inspect(sequenceNumber)}`);
  }
  if (subSequenceNumber !== null && !(Number.isInteger(subSequenceNumber) && subSequenceNumber >= 0)) {
    throw new TypeError(`checkpoint(): bad subSequenceNumber ${util.inspect(subSequenceNumber)}`);
  }
  return { sequenceNumber: String(sequenceNumber), subSequenceNumber };
}

/** Write one protocol message, wrapped in newlines so stray output never glues onto it. */
function writeMessage(stdout, message) {
  return new Promise((resolve) => {
    // Write errors (the daemon went away) are logged by the 'error' listener; we carry on until EOF.
    stdout.write(`\n${JSON.stringify(message)}\n`, () => resolve());
  });
}

/**
 * Talks to the daemon about one shard: one action at a time, checkpoints in between. `source.next()`
 * gives the shard's next message (null at its end), `send(message)` writes one: the whole of stdin and
 * stdout, or one lane of them (see serveLanes).
 */
class Session {
  constructor(processor, { source, send, log }) {
    this._processor = processor;
    this._source = source;
    this._sendMessage = send;
    this._log = log;
    this._pushedBack = null; // an action that arrived instead of a checkpoint reply
    this._checkpoints = Promise.resolve(); // chains checkpoint exchanges so they never overlap
    this._inFlight = new Set(); // checkpoint exchanges not yet answered
    this._liveCheckpointer = null; // the checkpointer of the action being handled, if it has one
    this._offered = []; // the actions of kcl-daemon's log/metric channel offered in initialize
  }

  _send(message) {
    return this._sendMessage(message);
  }

  _next() {
    if (this._pushedBack !== null) {
      const message = this._pushedBack;
      this._pushedBack = null;
      return Promise.resolve(message);
    }
    return this._source.next();
  }

  /** Handle actions until stdin ends. */
  async run() {
    for (;;) {
      const message = await this._next();
      if (message === null) return;
      await this._dispatch(message);
    }
  }

  async _dispatch(message) {
    const { action } = message;
    const p = this._processor;
    switch (action) {
      case 'initialize': {
        const { shardId, sequenceNumber, subSequenceNumber } = message;
        this._offered = Array.isArray(message.channel) ? message.channel : [];
        // streamName/streamIdentifier: kcl-daemon's several streams per application; null otherwise
        const streamName = typeof message.streamName === 'string' ? message.streamName : null;
        const streamIdentifier = typeof message.streamIdentifier === 'string' ? message.streamIdentifier : null;
        return this._handle(action, p.initialize, {
          shardId,
          sequenceNumber,
          subSequenceNumber,
          streamName,
          streamIdentifier,
        });
      }
      case 'processRecords': {
        const records = (message.records || []).map(toRecord);
        return this._handle(action, p.processRecords, {
          records,
          millisBehindLatest: message.millisBehindLatest ?? null,
        }, true);
      }
      case 'leaseLost':
        return this._handle(action, p.leaseLost, {});
      case 'shardEnded':
        // The KCL only starts the child shards once this shard is checkpointed at SHARD_END.
        return this._handle(action, p.shardEnded || defaultShardEnded, {}, true);
      case 'shutdownRequested':
        return this._handle(action, p.shutdownRequested, {}, true);
      case 'shutdown': // KCL 1.x: TERMINATE = shard ended, ZOMBIE = lease lost
        return message.reason === 'TERMINATE'
          ? this._handle(action, p.shardEnded || defaultShardEnded, {}, true)
          : this._handle(action, p.leaseLost, {});
      case 'checkpoint':
        this._log('kcl-client: ignoring a checkpoint reply that nothing asked for');
        return undefined;
      default:
        this._log(`kcl-client: ignoring unknown action ${JSON.stringify(action)}`);
        return undefined;
    }
  }

  /** Run one handler (if any) and always answer with a status, as amazon_kclpy does. */
  async _handle(action, handler, input, withCheckpointer = false) {
    // Not enumerable: the channel is a capability of the input, not part of the data it describes.
    Object.defineProperties(input, {
      log: { value: (level, text) => this.channelLog(level, text) },
      metric: { value: (name, value, unit, dimensions) => this.channelMetric(name, value, unit, dimensions) },
      deadLetter: { value: (record, reason) => this.channelDeadLetter(record, reason) },
    });
    let checkpointer = null;
    if (withCheckpointer) {
      checkpointer = this._checkpointer(action);
      this._liveCheckpointer = checkpointer;
      input.checkpointer = checkpointer;
    }
    try {
      if (handler) await handler.call(this._processor, input);
    } catch (err) {
      this._log(`kcl-client: the ${action} handler failed:`, err);
    }
    if (checkpointer) {
      this._liveCheckpointer = null;
      await this._settleForgottenCheckpoints(action);
    }
    await this._send({ action: 'status', responseFor: action });
  }

  /**
   * kcl-daemon's channel: the daemon logs `text` under the shard at `level` (debug, info, warning,
   * error, critical). Without the channel (the Java daemon) the line goes to stderr instead.
   */
  channelLog(level, text) {
    if (!this._offered.includes('log')) {
      this._log(`${String(level).toUpperCase()} ${text}`);
      return Promise.resolve();
    }
    return this._send({ action: 'log', level: String(level), message: String(text) });
  }

  /**
   * kcl-daemon's channel: one value of a metric exported with the daemon's metrics. `unit` is a
   * CloudWatch unit (Count, Milliseconds, Bytes, ...); `dimensions` an object of strings. Without the
   * channel it is dropped. The daemon rate-limits the channel and bounds the number of series.
   */
  channelMetric(name, value, unit = null, dimensions = {}) {
    if (!this._offered.includes('metric')) return Promise.resolve();
    return this._send({ action: 'metric', name, value, unit, dimensions });
  }

  /**
   * kcl-daemon's channel: hand `record` (of the batch being processed) to the daemon's dead-letter
   * destination and go on; it is written before any later checkpoint and never delivered again.
   * Resolves true when the daemon offered it (poisonRecordPolicy = DEAD_LETTER), false otherwise.
   */
  channelDeadLetter(record, reason = '') {
    if (!this._offered.includes('deadLetter')) return Promise.resolve(false);
    return this._send({
      action: 'deadLetter',
      sequenceNumber: String(record.sequenceNumber),
      subSequenceNumber: record.subSequenceNumber ?? 0,
      reason: String(reason),
    }).then(() => true);
  }

  /** A handler returned without awaiting a checkpoint: let it finish before the status goes out. */
  async _settleForgottenCheckpoints(action) {
    for (const settled of this._inFlight) {
      this._log(`kcl-client: the ${action} handler returned before its checkpoint finished; await it`);
      await settled;
    }
  }

  _checkpointer(action) {
    const session = this;
    const checkpointer = {
      /** checkpoint() | checkpoint(record) | checkpoint(sequenceNumber, subSequenceNumber?) */
      checkpoint(...args) {
        let position;
        try {
          position = toPosition(args);
        } catch (err) {
          return Promise.reject(err);
        }
        if (session._liveCheckpointer !== checkpointer) {
          const why = `this checkpointer belongs to a ${action} action that has already finished`;
          return Promise.reject(new CheckpointError('InvalidStateException', why, position));
        }
        // Exchanges queue up (Promise.all over checkpoints is fine) and never overlap on the wire.
        const exchange = session._checkpoints.then(() => session._checkpoint(position));
        const settled = exchange.then(() => {}, () => {});
        session._checkpoints = settled;
        session._inFlight.add(settled);
        settled.then(() => session._inFlight.delete(settled));
        // A fresh promise for the caller: `settled` marked `exchange` as handled, and a failed checkpoint
        // nobody awaits must still surface as an unhandled rejection.
        return exchange.then();
      },
    };
    return checkpointer;
  }

  /** One checkpoint round trip: the request, then the daemon's reply on the next protocol line. */
  async _checkpoint(position) {
    if (this._pushedBack !== null) {
      throw new CheckpointError('InvalidStateException', 'the daemon has already sent the next action', position);
    }
    await this._send({ action: 'checkpoint', ...position });
    const reply = await this._source.next();
    if (reply === null) {
      throw new CheckpointError('InvalidStateException', 'stdin closed before the checkpoint reply', position);
    }
    if (reply.action !== 'checkpoint') {
      // The daemon broke the protocol. Keep the action for the main loop rather than lose it.
      this._pushedBack = reply;
      throw new CheckpointError(
        'InvalidStateException',
        `expected the checkpoint reply, got a ${JSON.stringify(reply.action)} action`,
        position,
      );
    }
    if (reply.error != null) throw new CheckpointError(String(reply.error), undefined, position);
  }
}

async function defaultShardEnded({ checkpointer }) {
  await checkpointer.checkpoint();
}

/** Route console.log & co. to stderr, since stdout carries the protocol. */
function consoleToStderr() {
  Object.assign(console, new Console({ stdout: process.stderr, stderr: process.stderr }));
}

/** The lanes an initialize offers (kcl-daemon's shardsPerChild), 0 when none is offered. */
function lanesOffered(message) {
  const { lanes } = message;
  return Number.isInteger(lanes) && lanes > 1 ? lanes : 0;
}

/** A lane's messages, queued by the router until its session asks for them. */
class Inbox {
  constructor() {
    this._messages = [];
    this._waiting = null; // the resolve of a next() that found the queue empty
    this._ended = false;
  }

  push(message) {
    if (this._waiting) {
      const resolve = this._waiting;
      this._waiting = null;
      resolve(message);
    } else {
      this._messages.push(message);
    }
  }

  end() {
    this._ended = true;
    if (this._waiting) {
      const resolve = this._waiting;
      this._waiting = null;
      resolve(null);
    }
  }

  next() {
    if (this._messages.length) return Promise.resolve(this._messages.shift());
    if (this._ended) return Promise.resolve(null);
    return new Promise((resolve) => { this._waiting = resolve; });
  }
}

/**
 * Serve kcl-daemon's lanes (protocol README, section 11): take the offer, then read every line and hand
 * it to its lane; each lane is one shard's Session with a processor of its own. `first` is lane 0's
 * initialize, which carried the offer. Lanes only interleave at awaits: a handler that computes for a
 * long time without awaiting holds up every lane of the process, as it would any Node.js program.
 */
async function serveLanes(makeProcessor, reader, first, { stdout, log }) {
  await writeMessage(stdout, { action: 'lanes' });
  const lanes = new Map();
  const running = [];
  const open = (lane) => {
    const inbox = new Inbox();
    lanes.set(lane, inbox);
    const send = (message) => writeMessage(stdout, { lane, ...message });
    running.push(new Session(makeProcessor(), { source: inbox, send, log }).run());
    return inbox;
  };
  open(0).push(first);
  try {
    for (;;) {
      const message = await reader.next();
      if (message === null) break;
      const { lane } = message;
      if (!Number.isInteger(lane) || lane < 0) {
        log(`kcl-client: skipping a line that names no lane: ${JSON.stringify(message).slice(0, 200)}`);
        continue;
      }
      let inbox = lanes.get(lane);
      if (message.action === 'close') { // the lane's end of input: its processor is done
        if (inbox) {
          lanes.delete(lane);
          inbox.end();
        }
        continue;
      }
      if (!inbox) inbox = open(lane);
      inbox.push(message);
    }
  } finally {
    for (const inbox of lanes.values()) inbox.end();
  }
  await Promise.all(running);
}

/**
 * A processor from `factory`: a class (or a constructor function whose prototype has processRecords) is
 * constructed with `new`, any other function called.
 */
function processorMaker(factory) {
  const isClass = /^class[\s{]/.test(Function.prototype.toString.call(factory))
    || typeof factory.prototype?.processRecords === 'function';
  return () => {
    const processor = isClass ? new factory() : factory(); // eslint-disable-line new-cap
    if (!processor || typeof processor.processRecords !== 'function') {
      throw new TypeError('run(factory): the factory made a processor without a processRecords function');
    }
    return processor;
  };
}

async function serve(processor, { stdin, stdout, log }) {
  const reader = new MessageReader(stdin, log);
  const send = (message) => writeMessage(stdout, message);
  if (typeof processor !== 'function') {
    return new Session(processor, { source: reader, send, log }).run();
  }
  const makeProcessor = processorMaker(processor);
  const first = await reader.next();
  if (first === null) return undefined;
  if (first.action === 'initialize' && lanesOffered(first)) {
    return serveLanes(makeProcessor, reader, first, { stdout, log });
  }
  const session = new Session(makeProcessor(), { source: reader, send, log });
  session._pushedBack = first;
  return session.run();
}

/**
 * Run a record processor until the daemon closes stdin, then exit 0.
 *
 * `processor` has `processRecords` and optionally `initialize`, `leaseLost`, `shardEnded` (default:
 * checkpoint at the end of the shard) and `shutdownRequested`; each may be sync or async. Every
 * handler's input also has `log(level, text)` and `metric(name, value, unit?, dimensions?)`, kcl-daemon's
 * log/metric channel (each returns a promise).
 *
 * Pass a class or a function that makes a processor instead (`run(MyProcessor)`,
 * `run(() => new MyProcessor())`) to serve several shards in this one process when kcl-daemon offers
 * lanes (`shardsPerChild`): each shard then gets a processor of its own. Without the offer it makes one
 * processor, as with an instance.
 *
 * `options` (for tests): `stdin`, `stdout`, `stderr` streams and `exit` (default true when stdout is
 * process.stdout). With `exit: false` the returned promise resolves at end of input instead.
 */
function run(processor, options = {}) {
  const isFactory = typeof processor === 'function';
  if (!isFactory && (!processor || typeof processor.processRecords !== 'function')) {
    throw new TypeError('run(processor): processor.processRecords must be a function (or pass a factory)');
  }
  const stdin = options.stdin || process.stdin;
  const stdout = options.stdout || process.stdout;
  const stderr = options.stderr || process.stderr;
  const exit = options.exit ?? (stdout === process.stdout);
  if (stdout === process.stdout) consoleToStderr();
  const log = (...args) => stderr.write(util.format(...args) + '\n');
  stdout.on('error', (err) => log(`kcl-client: cannot write to the daemon: ${err.message}`));
  const done = serve(processor, { stdin, stdout, log });
  if (!exit) return done;
  return done.then(
    () => process.exit(0),
    (err) => {
      stderr.write(`kcl-client: ${util.inspect(err)}\n`);
      process.exit(1);
    },
  );
}

module.exports = { run, CheckpointError, log };
