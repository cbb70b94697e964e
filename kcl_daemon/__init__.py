"""kcl-daemon: a pure-Python MultiLangDaemon for Amazon Kinesis (one child process per shard).

The packages and the layers they form (each imports only from the layers below it) are drawn in
docs/architecture.md; import-linter checks them in scripts/lint.sh.
"""
