"""argmaxable: detect and prevent unargmaxable outputs of bottlenecked softmax and sigmoid classifiers."""

__version__ = "0.1.0"

from argmaxable import core
from argmaxable.core import (
    CheckResult,
    SolverError,
    activation_bounds,
    check_assignments,
    check_categories,
    check_top_m,
)
from argmaxable.verify import verify_certificate

__all__ = [
    "CheckResult",
    "SolverError",
    "activation_bounds",
    "check_assignments",
    "check_categories",
    "check_top_m",
    "core",
    "verify_certificate",
]
