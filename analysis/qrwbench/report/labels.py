"""What a comparison can show at all: its label, from the audits.

* ``identical code``: the ordering audit says both variants compile to the
  same code (any difference is noise);
* ``emulator-blind``: the guest code differs but QEMU's TCG runs the same ops
  for both (the emulator audit), so no TCG measurement can tell them apart;
* ``distinguishable``: the code the backend runs differs: under TCG the
  emulator audit saw different TCG ops, under KVM the ordering audit does not
  list the pair as identical (the guest's code runs on the host CPU);
* ``""`` (unknown): no audit says (no ``make audit``; under TCG no emulator
  audit, or a pair it did not cover, e.g. kernel builds).

The report's summary, its filterable table and the CSV/JSON exports use
these words.
"""

from __future__ import annotations

IDENTICAL, BLIND, DISTINCT, UNKNOWN = "identical code", "emulator-blind", "distinguishable", ""
ALL = (IDENTICAL, BLIND, DISTINCT, UNKNOWN)


def label(c, audit) -> str:
    """The label of one :class:`qrwbench.analysis.compare.Comparison` (``audit``:
    the :class:`qrwbench.analysis.codeid.Audit` it was judged with, or None)."""
    if c.identical_code:
        return IDENTICAL
    if c.emulator_blind:
        return BLIND
    if audit is None:
        return UNKNOWN
    if c.cell.accel == "tcg":
        return DISTINCT if audit.is_distinct(c.cell, c.variant, c.baseline) else UNKNOWN
    return DISTINCT


def name(lab: str) -> str:
    """The label as a table shows it ("unknown" for no label)."""
    return lab or "unknown"
