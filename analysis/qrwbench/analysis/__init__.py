"""Statistics over the stored samples. It takes samples from the store and
gives judged comparisons: effects with their intervals from paired blocks
(``effects``), per-cell comparisons, the A/A control and noise figures
(``stats``), the harness's own cost (``harness``), metric histories and
change points across commits (``history``), which variants compile to
identical code, read from the audit's output (``codeid``), and the
stopping rule that asks for more boots where an interval is still too wide
(``planner``). Numbers only: nothing here boots, writes a report or imports
the run stage."""
