"""Config schema of the detection family: solver settings and the released models to check."""

from __future__ import annotations

from dataclasses import dataclass, field

from omegaconf import MISSING


@dataclass
class DetectConfig:
    """Settings shared by every detection job (002 §4: box 100, patience 2500; eps from thesis §4.2)."""

    bound: float = 100.0  # |x_j| <= 100, 002 §4
    patience: int = 2500  # braid-reflect steps before the exact LP, 002 §4
    eps: float = 1e-8  # Chebyshev radius that counts as a region, thesis §4.2
    solver: str = "highs"
    workers: int = 2


@dataclass
class ModelConfig:
    """One softmax output layer to check (a released model or a synthetic layer)."""

    name: str = MISSING
    source: str = MISSING  # how to obtain the layer: see argmaxable.models.loaders
    params: dict[str, str] = field(default_factory=dict)
