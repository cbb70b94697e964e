"""``kcl-daemon dead-letters list|show|replay``: look at the records ``poisonRecordPolicy = DEAD_LETTER``
set aside, and send them back (docs/failures.md). cli.py only declares the commands.

May import: ``replay`` (letters go back through the processor), ``dead_letters``, ``aws``, ``config``,
``core``, ``kcl_protocol`` and the root utilities.
"""
