"""`python -m repro.cli`: the same command line as the `repro` script."""

from repro.cli import main

main()
