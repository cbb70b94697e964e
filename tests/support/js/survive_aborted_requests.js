// Preloaded into kinesalite and dynalite (`node --require <this file> ...`).
// Both rethrow a request's 'error' event (`req.on('error', function (err) { throw err })`), so a client
// that disappears in the middle of sending a request body (a SIGKILLed daemon) kills the whole emulator
// with "Error: aborted" (ECONNRESET) and every later test fails. The real services just drop such a
// request: this does the same and logs one line. Any other uncaught exception still ends the process
// with its stack and exit code 1, as Node does by default.
'use strict';
process.on('uncaughtException', function (err) {
  if (err && err.code === 'ECONNRESET' && err.message === 'aborted') {
    console.log('request aborted by the client; dropped');
    return;
  }
  console.error(err && err.stack ? err.stack : err);
  process.exit(1);
});
