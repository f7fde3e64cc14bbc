"""Config schema of the detection family: solver settings and the released models to check."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omegaconf import MISSING

from argmaxable.core.solvers import SOLVERS
from argmaxable.rules import AT_LEAST_ONE, NON_NEGATIVE, POSITIVE, one_of


@dataclass
class DetectConfig:
    """Settings shared by every detection job (002 §4: box 100, patience 2500; eps from thesis §4.2)."""

    bound: float = 100.0  # |x_j| <= 100, 002 §4
    patience: int = 2500  # braid-reflect steps before the exact LP, 002 §4
    eps: float = 1e-8  # Chebyshev radius that counts as a region, thesis §4.2
    solver: str = "highs"
    workers: int = 2


# Allowed values, checked before any job (argmaxable.rules).
RULES = {
    "detect.bound": POSITIVE,
    "detect.eps": NON_NEGATIVE,
    "detect.patience": NON_NEGATIVE,
    "detect.solver": one_of(SOLVERS),
    "detect.workers": AT_LEAST_ONE,
}


@dataclass
class PaperResult:
    """What the papers report for a model, printed beside our numbers in the detection table."""

    table: str = ""  # where it is reported, e.g. "002 Table 4"
    potentially_unargmaxable: str = ""  # as printed: "109", or "≤ 2" for the grouped rows of 002 Table 8
    unargmaxable: int | None = None


@dataclass
class ModelConfig:
    """One softmax output layer to check (a released model or a synthetic layer).

    ``source`` picks the loader in :mod:`argmaxable.models.loaders` and ``params`` are its keyword
    arguments (``random``: n, d, dist, bias, seed; ``huggingface``: repo, revision, local_files_only;
    ``npz``/``file``: path (local or http(s) URL), member, weight_key, bias_key, no_bias, sha256).
    """

    name: str = MISSING
    source: str = MISSING  # random | huggingface | npz | file: see argmaxable.models.loaders
    params: dict[str, Any] = field(default_factory=dict)
    description: str = ""
    paper: PaperResult = field(default_factory=PaperResult)
