"""The detection core: one halfspace-feasibility engine (Chebyshev LP by constraint generation) and the papers'
questions, one module each (:mod:`argmaxable.core.questions`), that turn into it."""

from argmaxable.core.box import activation_bounds
from argmaxable.core.chebyshev import LPOutcome, WarmStart, chebyshev
from argmaxable.core.questions import KINDS, QUESTIONS, Question
from argmaxable.core.questions.assignments import check_assignments
from argmaxable.core.questions.categories import check_categories
from argmaxable.core.questions.prescribed import check_prescribed, verify_prescribed
from argmaxable.core.questions.rankings import check_rankings, verify_rankings
from argmaxable.core.questions.top_m import check_top_m
from argmaxable.core.result import CheckResult
from argmaxable.core.settings import LPSettings, Settings
from argmaxable.core.solvers import SolverError

__all__ = [
    "KINDS",
    "QUESTIONS",
    "CheckResult",
    "LPOutcome",
    "LPSettings",
    "Question",
    "Settings",
    "SolverError",
    "WarmStart",
    "activation_bounds",
    "chebyshev",
    "check_assignments",
    "check_categories",
    "check_prescribed",
    "check_rankings",
    "check_top_m",
    "verify_prescribed",
    "verify_rankings",
]
