"""kcl-daemon with its GetRecords and GetShardIterator calls on botocore (the lean request path off), for
``bench/scaling.py``'s before/after comparison in one run. Takes the CLI's arguments."""

from __future__ import annotations

from kcl_daemon.aws.lean import client
from kcl_daemon.cli import main

client._build = lambda _client: None

main()
