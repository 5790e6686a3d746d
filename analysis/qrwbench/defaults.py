"""The statistical defaults the command line names (``--alpha``,
``--correction``), in a module of their own: :mod:`qrwbench.cli` builds its
parser without numpy or scipy, because ``bench --plan`` and the ``--check``
steps of make perf, bench-series and bisect run before `make deps` installed
them. :mod:`qrwbench.analysis` uses the same values."""

ALPHA = 0.05
CORRECTIONS = {"holm": "holm", "bh": "fdr_bh"}     # --correction: statsmodels' method
