"""``kcl-daemon dead-letters list|show|replay``: look at the records ``poisonRecordPolicy = DEAD_LETTER``
set aside, and send them back (docs/failures.md). ``dead_letter_tool.cli`` declares the commands.

May import: ``command_line``, ``replay`` (letters go back through the processor), ``dead_letters``,
``aws``, ``config``, ``core``, ``kcl_protocol`` and the root utilities.
"""
