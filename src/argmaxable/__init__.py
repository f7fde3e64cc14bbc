"""argmaxable: detect and prevent unargmaxable outputs of bottlenecked softmax and sigmoid classifiers."""

__version__ = "0.1.0"

from argmaxable import core
from argmaxable.core import (
    CheckResult,
    SolverError,
    check_assignments,
    check_categories,
    verify_certificate,
)

__all__ = ["CheckResult", "SolverError", "check_assignments", "check_categories", "core", "verify_certificate"]
