"""Transition only, for run/bench.py: it calls ``stats.compare_cells`` and
``stats.aa_control``, and its restructuring (issue 27) is another change's.
The statistics live one job a module (see the package docstring): import
them from :mod:`compare` and :mod:`calibration`, and delete this module
once bench.py does."""
from .calibration import aa_control
from .compare import compare_cells

__all__ = ["aa_control", "compare_cells"]
