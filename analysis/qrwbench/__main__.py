"""``python3 -m qrwbench <subcommand> ...``: the one command line (qrwbench.cli)."""

import sys

from .cli import main

sys.exit(main())
