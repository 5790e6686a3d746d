"""qrwbench host side: run matrix, QEMU supervision, results store, statistics, reports.

Run with Debian's interpreter, /usr/bin/python3 (it sees Debian's numpy, scipy,
matplotlib and statsmodels; the python3 first on PATH may not).
"""
