"""`python -m rootstep` runs the command line."""

from rootstep.cli import run_cli

run_cli()
