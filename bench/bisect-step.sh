#!/bin/sh
# The oracle of `make bisect`, run by `git bisect run` in the private checkout:
# exit 0 good, 1 bad, 125 skip, 128 abort (see analysis/qrwbench/run/bisect.py).
top=$(cd "$(dirname "$0")/.." && pwd)
PYTHONPATH=$top/analysis exec "${PY:-/usr/bin/python3}" -m qrwbench bisect step "$1"
