"""``python -m slurm_resolver``: the command line."""

from .cli import main

raise SystemExit(main())
