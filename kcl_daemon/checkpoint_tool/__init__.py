"""``kcl-daemon checkpoint``: show shards' checkpoints and set them safely (counter-fenced writes, a
hand-off from a live owner on request, an audit record on the lease).

``plan`` decides (pure); ``command`` and ``resolve`` are the shell; ``cli`` declares the commands.

May import: ``retrieval`` (KPL de-aggregation), ``command_line``, ``aws``, ``config``, ``core`` and the
root utilities.
"""
