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
    "load_head",
    "verify_certificate",
]


def __getattr__(name: str):
    """``argmaxable.layers`` (the PyTorch heads) and ``argmaxable.load_head`` (the model readers:
    :func:`argmaxable.detect.loaders.load_head`) are imported on first use: the checks need neither torch nor the
    formats' readers."""
    import importlib

    if name == "layers":
        return importlib.import_module("argmaxable.layers")
    if name == "load_head":
        return importlib.import_module("argmaxable.detect.loaders").load_head
    raise AttributeError(f"module 'argmaxable' has no attribute {name!r}")
