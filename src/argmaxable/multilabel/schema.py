"""Config schema of the multi-label family (heads, training sweep, verification)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class MultilabelConfig:
    enabled: bool = True
