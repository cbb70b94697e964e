"""``kcl-daemon replay``: run the configured record processor over records from a file, without AWS.

May import: ``lifecycle``, ``retrieval.source``, ``command_line``, ``stopping``, ``aws`` (the clients'
settings), ``config``, ``core``, ``kcl_protocol`` and the root utilities.
"""
