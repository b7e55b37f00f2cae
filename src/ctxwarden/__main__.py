"""`python -m ctxwarden`: the same command line as the `ctxwarden` script."""

from ctxwarden.cli import main

raise SystemExit(main())
