"""``kcl-daemon leases``: reading a lease table for people, as a report (text, JSON), a live view and a
picture over time.

May import: ``shards``, ``command_line``, ``aws``, ``config``, ``core`` and the root utilities (never the
worker).
"""
