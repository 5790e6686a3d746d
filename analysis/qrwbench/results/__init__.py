"""Results: a guest's console turned into stored records. It takes a run
directory (console.log, status.json, provenance.json), reads and judges it
(``rundir``: the one check of a run directory, and the import rules), parses
the console strictly into records (``records``, docs/records.md), scans it
for kernel faults (``faults``), turns a judged run into table rows
(``rows``) and gives the SQLite store of runs and samples (``store``), which
every later stage reads. It knows nothing of how the run was booted."""
