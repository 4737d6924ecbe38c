"""`python -m gateway` runs the command line."""

from gateway.cli import main

raise SystemExit(main())
