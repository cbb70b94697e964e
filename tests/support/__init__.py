"""Helpers shared by the tests and the benchmarks (``bench/``): the one place they import from.

A test module is never imported by another module; whatever two of them (or a test and a benchmark)
use belongs here: fakes, clocks, the emulators, the daemon launcher, fleets of daemons, the fault proxy,
the chaos harness. Pytest fixtures stay in ``conftest.py`` files, which import from here.
"""
