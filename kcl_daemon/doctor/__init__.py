"""``kcl-daemon doctor``: an application's setup and state checked in order, each finding with what to do.

``checks`` (pure functions over ``facts``, rendered through ``findings``) decide; ``reads`` is the shell
that reads AWS and runs them. May import: ``inspection``, ``metrics`` (the CloudWatch decision), ``aws``,
``config``, ``core`` and the root utilities.
"""
