"""argmaxable: detect and prevent unargmaxable outputs of bottlenecked softmax and sigmoid classifiers."""

from argmaxable import core
from argmaxable._version import __version__ as __version__  # re-exported: argmaxable.__version__
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
    "layers",
    "verify_certificate",
]


def __getattr__(name: str):
    """``argmaxable.layers`` (the PyTorch heads) is imported on first use: the checks need no torch."""
    if name == "layers":
        import importlib

        return importlib.import_module("argmaxable.layers")
    raise AttributeError(f"module 'argmaxable' has no attribute {name!r}")
