"""Statistics over the stored samples. It takes samples from the store and
gives judged comparisons, one module a job: effects with their intervals
from paired blocks or per-boot values (``effects``), one value per boot and
its normalisation by the in-boot reference (``perboot``), the matrix's
per-cell comparisons (``compare``), the verdict vocabulary and the rules
that give verdicts (``verdicts``), window statistics: medians with bootstrap
CIs and the Mann-Whitney window test (``windows``), the A/A control and the
injected barrier (``calibration``), noise and LKP's stability rule
(``noise``), thread fairness (``fairness``), change points (``changepoints``),
the harness's own cost (``harness``), metric histories across commits
(``history``), which variants compile to identical code, read from the
audit's output (``codeid``), and the stopping rule that asks for more boots
where an interval is still too wide (``planner``). Numbers only: nothing
here boots, writes a report or imports the run stage."""
