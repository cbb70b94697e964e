// h2c (HTTP/2 with prior knowledge, cleartext) -> HTTP/1.1 forwarder for the Kinesis emulators.
// The Java KCL forces its Kinesis client onto HTTP/2; kinesalite and moto_server speak HTTP/1.1 only.
// Usage: node h2c_proxy.js <listen-port> <upstream-url>. Binds 127.0.0.1; prints "ready <port>".
'use strict';
const http2 = require('http2');
const http = require('http');

const [port, upstream] = process.argv.slice(2);
const target = new URL(upstream);
const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
const HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'host']);

const server = http2.createServer();
server.on('stream', (stream, headers) => {
  const out = {};
  for (const [name, value] of Object.entries(headers)) {
    if (!name.startsWith(':') && !HOP.has(name)) out[name] = value;
  }
  out.host = target.host;
  const chunks = [];
  stream.on('data', (c) => chunks.push(c));
  stream.on('end', () => {
    const body = Buffer.concat(chunks);
    out['content-length'] = String(body.length);
    const req = http.request({
      host: target.hostname, port: target.port, method: headers[':method'], path: headers[':path'],
      headers: out, agent,
    }, (res) => {
      const back = { ':status': res.statusCode };
      for (const [name, value] of Object.entries(res.headers)) if (!HOP.has(name)) back[name] = value;
      const parts = [];
      res.on('data', (c) => parts.push(c));
      res.on('end', () => {
        if (process.env.H2C_LOG) console.error(`${headers['x-amz-target'] || headers[':path']} ${res.statusCode}`);
        if (stream.destroyed) return;
        stream.respond(back);
        stream.end(Buffer.concat(parts));
      });
    });
    req.on('error', () => { if (!stream.destroyed) { stream.respond({ ':status': 502 }); stream.end(); } });
    req.end(body);
  });
  stream.on('error', () => {});
});
server.listen(Number(port), '127.0.0.1', () => console.log(`ready ${server.address().port}`));
