"""Dead letters: the records a processor could not handle, written where ``deadLetterDestination`` says
(``docs/failures.md``), and read back by ``kcl-daemon dead-letters``.

May import: ``aws``, ``core``, ``kcl_protocol`` and the root utilities.
"""
