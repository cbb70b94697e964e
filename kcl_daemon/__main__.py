"""`python -m kcl_daemon` runs the CLI."""

from kcl_daemon.cli import main

main()
