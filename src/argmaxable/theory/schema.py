"""Config schema of the theory family (region counts, Cover, DFT geometry, random layers, top-m)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class TheoryConfig:
    enabled: bool = True
