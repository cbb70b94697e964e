"""``kcl-daemon replay``: run the configured record processor over records from a file, without AWS.

May import: ``consumer``, ``retrieval.source``, ``stopping``, ``config``, ``core`` and the root utilities.
"""
