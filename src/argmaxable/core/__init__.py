"""The detection core: one halfspace-feasibility engine (Chebyshev LP by constraint generation) and the
adapters that turn the papers' questions into it."""

from argmaxable.core.box import activation_bounds
from argmaxable.core.chebyshev import LPOutcome, WarmStart, chebyshev
from argmaxable.core.check import check_assignments, check_categories, check_top_m
from argmaxable.core.result import CheckResult
from argmaxable.core.settings import LPSettings, Settings
from argmaxable.core.solvers import SolverError

__all__ = [
    "CheckResult",
    "LPOutcome",
    "LPSettings",
    "Settings",
    "SolverError",
    "WarmStart",
    "activation_bounds",
    "chebyshev",
    "check_assignments",
    "check_categories",
    "check_top_m",
]
