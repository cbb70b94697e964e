"""``kcl-daemon dead-letters list|show|replay``: look at the records ``poisonRecordPolicy = DEAD_LETTER``
set aside, and send them back (docs/failures.md). cli.py only declares the commands."""
