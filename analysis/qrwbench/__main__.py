"""``python3 -m qrwbench <import|report|compare|regress> ...`` (see qrwbench.cli)."""

import sys

from .cli import main

sys.exit(main())
