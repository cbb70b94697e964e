"""A deterministic, seeded, discrete-time fleet simulator that drives the real pure deciders.

:mod:`.model` holds the plain data, :mod:`.policies` the deciders it can drive (the 2.x taker, Java's
variance-based decider, this project's assignor), :mod:`.scenarios` the fleets and their events,
:mod:`.engine` the time loop and meters, :mod:`.report` the comparison table, JSON and timeline picture.

May import: ``core`` only (it drives the real pure deciders); its command (cli.py) also
``command_line`` and ``config``.
"""
