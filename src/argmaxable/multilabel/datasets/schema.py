"""Config schema of one multi-label dataset."""

from __future__ import annotations

from dataclasses import dataclass

from omegaconf import MISSING


@dataclass
class DatasetConfig:
    name: str = MISSING
