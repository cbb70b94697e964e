#!/usr/bin/env node
// HTTP/2 prior-knowledge (h2c) on 127.0.0.1 -> HTTP/1.1 to an emulator, for the Java KCL in bench/vs_java.py:
// the Java SDK's Kinesis client speaks only HTTP/2, which kinesalite does not.
// Usage: node h2c_proxy.js LISTEN_PORT http://127.0.0.1:TARGET_PORT
'use strict';
const http2 = require('http2');
const http = require('http');

const [listenPort, target] = process.argv.slice(2);
const url = new URL(target);
const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
const HOP = new Set(['connection', 'transfer-encoding', 'keep-alive', 'upgrade', 'proxy-connection']);

const server = http2.createServer();
server.on('stream', (stream, headers) => {
  const forward = {};
  for (const [key, value] of Object.entries(headers)) {
    if (!key.startsWith(':')) forward[key] = value;
  }
  forward.host = headers[':authority'] || url.host;
  const request = http.request(
    { host: url.hostname, port: url.port, method: headers[':method'], path: headers[':path'], headers: forward, agent },
    (response) => {
      const back = { ':status': response.statusCode };
      for (const [key, value] of Object.entries(response.headers)) {
        if (!HOP.has(key)) back[key] = value;
      }
      stream.respond(back);
      response.pipe(stream);
    },
  );
  request.on('error', (err) => {
    if (!stream.headersSent) stream.respond({ ':status': 502 });
    stream.end(String(err));
  });
  stream.on('error', () => request.destroy());
  stream.pipe(request);
});
server.listen(Number(listenPort), '127.0.0.1', () => console.log(`h2c proxy on 127.0.0.1:${listenPort} -> ${target}`));
process.on('SIGTERM', () => process.exit(0));
