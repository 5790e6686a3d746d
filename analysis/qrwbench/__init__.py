"""qrwbench host side. Its packages follow the data flow::

    matrix (cells) -> build (builds looked at) -> run (boots) -> results (records, store)
                   -> analysis (statistics) -> report (report, regress)

Top level: the command line (``cli``), the vocabulary read from the module's
tables and kernel/configs (``vocab``), the run matrix (``matrix``), and what
every stage shares (``errors``, ``defaults``, ``outputs``, ``gitutil``).
``results``, ``analysis`` and ``report`` never import ``run``
(tests/top/test_layout_flow.py).

Run with Debian's interpreter, /usr/bin/python3 (it sees Debian's numpy, scipy,
matplotlib and statsmodels; the python3 first on PATH may not).
"""
