"""The lean request path: the calls that scale with shards (GetRecords, GetShardIterator) without
botocore's per-call machinery.

At 256 shards most of the daemon's CPU went to botocore building, signing, sending and parsing idle
GetRecords calls (docs/cost.md). ``bench/lean_path.py`` measured the candidates (botocore, urllib3,
``http.client``, awscrt, aiohttp with and without uvloop) and this package is the leanest of them: the
standard library's ``http.client`` over a small pool of keep-alive connections (headers and body go out in
one send, which urllib3 2 does not do), the body written and read by orjson, and SigV4 with the signing
key kept per day (:mod:`.sigv4`, checked against botocore's signer by a unit test).

botocore keeps everything else: the endpoint, region, timeouts, CA bundle and credentials come from the
boto3 client the lean path is built from (credentials are frozen per call, so refreshing providers keep
working), error replies are parsed by botocore's own parser and mapped by :mod:`kcl_daemon.aws.errors`
exactly as before, and every rare call stays on the client. :func:`.client.lean_client_for` says when a
client's settings are beyond the lean path (a proxy, client certificates, unsigned requests, ...): the
caller then keeps botocore, and the reason is logged once at INFO.
"""
