"""What the user reads. It takes the store and the statistics and gives the
report (``report``: build/report/index.html, report.md, plots; from the
``selection`` of a rig commit, its ``analyse`` step, the per-topic
``sections`` and the files ``page`` writes), its tables and plots
(``tables``, ``plots``), the regression check between two commits
(``regress``, exit status 1 on a regression), the noise figures (``noise``)
and the weak-memory canary verdicts (``litmus``). It never imports the run
stage: everything it shows was measured and stored before."""
