"""Results: a guest's console turned into stored records. It takes a run
directory (console.log, status.json, provenance.json), parses the console
strictly into records (``records``, docs/records.md), scans it for kernel
faults (``faults``) and gives the SQLite store of runs and samples
(``store``), which every later stage reads. It knows nothing of how the run
was booted."""
