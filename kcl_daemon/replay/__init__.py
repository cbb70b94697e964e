"""``kcl-daemon replay``: run the configured record processor over records from a file, without AWS.

May import: ``lifecycle``, ``retrieval.source``, ``stopping``, ``config``, ``core``, ``kcl_protocol`` and
the root utilities.
"""
