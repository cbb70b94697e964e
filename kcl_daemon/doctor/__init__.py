"""``kcl-daemon doctor``: an application's setup and state checked in order, each finding with what to do.

``checks`` (pure functions over ``facts``, rendered through ``findings``) decide; ``reads`` is the shell
that reads AWS and runs them; ``cli`` declares the command. May import: ``inspection``, ``command_line``,
``metrics`` (the CloudWatch decision), ``aws``, ``config``, ``core`` and the root utilities.
"""
