"""`python -m ctxwarden.bench`: the side-by-side benchmark on recorded sessions."""

from ctxwarden.bench.run import main

raise SystemExit(main())
