"""`python -m constrained_spec ...` runs the CLI (see constrained_spec/cli.py)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
