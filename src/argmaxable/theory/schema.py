"""Config schema of the theory family (region counts, Cover, DFT geometry, random layers, top-m bounds).

Each experiment has its own block; ``config/theory/default.yaml`` sizes them for the offline default (the
whole family in well under 15 minutes on 2 cores) and ``config/theory/paper.yaml`` restores the papers' sizes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from argmaxable.core.settings import ASSIGNMENT_BOUND, BOUND
from argmaxable.rules import AT_LEAST_ONE, NON_NEGATIVE, POSITIVE


@dataclass
class RegionsConfig:
    """Feasible rankings, thesis Tables A.1/A.2."""

    max_n: int = 10  # the tables run over n = 2..10
    max_d: int = 10  # and d = 1..10
    enumerate_max_n: int = 5  # enumerate all n! rankings with the core up to this n
    bound: float = ASSIGNMENT_BOUND  # box for the enumeration LPs (regions with a bias are bounded cells)
    eps: float = 1.0e-8  # radius that counts as a region (thesis §4.2)


@dataclass
class CoverConfig:
    """Cover's count, thesis Thm 5.1 and Fig. 5.2."""

    n: int = 1000  # thesis Fig. 5.2: n = 1000 labels
    d_values: list[int] = field(
        default_factory=lambda: [1, 10, 100, 200, 300, 400, 450, 500, 550, 600, 800, 999])
    enumerate_max_n: int = 8  # enumerate all 2^n assignments with the core up to this n
    bound: float = ASSIGNMENT_BOUND  # thesis A.3: box for label-assignment LPs
    eps: float = 1.0e-8


@dataclass
class DftConfig:
    """Truncated DFT layer geometry, thesis Figs 5.4 and 5.5, and the alternation theorem (Thm 5.3)."""

    geometry_n: list[int] = field(default_factory=lambda: [3, 4, 5])  # thesis Fig. 5.4 (d = 3, i.e. k = 1)
    n_values: list[int] = field(default_factory=lambda: [16, 32, 64, 128, 256, 512, 1024])  # Fig. 5.5 x-axis
    # (paper.yaml: to 2048)
    k_values: list[int] = field(default_factory=lambda: [1, 2, 3, 4])  # Fig. 5.5 curves
    slack: int = 16  # Fig. 5.5 right: 16 random slack columns
    samples: int = 200  # random k-active assignments per (n, k)
    quantile: float = 0.01  # Fig. 5.5 plots the 1% quantile of the radius
    alternation_max_n: int = 9  # Thm 5.3 check: all 2^n assignments of W^DFT up to this n
    bound: float = ASSIGNMENT_BOUND
    eps: float = 1.0e-8


@dataclass
class RandomLayersConfig:
    """Random softmax layers, ACL 2022 Fig. 10 / thesis Fig. A.6, and the approximate stage vs exact answers."""

    n: int = 10000  # ACL 2022 Fig. 10: 10000 categories
    d_values: list[int] = field(default_factory=lambda: [2, 5, 10, 20, 30, 50])
    low: float = -1.0  # W, b ~ U(-1, 1) (ACL 2022 Fig. 10)
    high: float = 1.0
    bias: bool = True
    patience: int = 50  # ACL 2022 §4 uses 2500 (paper.yaml); unproven categories run it all, so small offline
    bound: float = BOUND  # ACL 2022 §4: |x_j| <= 100
    eps: float = 1.0e-8
    workers: int = 1  # LPs at once inside one job (Snakemake runs the d values in parallel)
    # Qhull cross-check of the approximate stage (the reference code's stolen-probability idea): no bias,
    # small d, where Qhull is fast and its floating-point answers are reliable.
    qhull_n: int = 2000
    qhull_d_values: list[int] = field(default_factory=lambda: [2, 3, 4, 5, 6])


@dataclass
class BasriJacobsConfig:
    """Random-matrix top-m bound, Basri & Jacobs Table 1, Fig. 2 and appendix B."""

    probability: float = 0.99  # Table 1: largest m whose bound stays >= 0.99
    mc_N: int = 50257  # appendix B: a GPT-2-sized random matrix
    mc_d: int = 768
    mc_m_max: int = 40  # simulate m = 1..mc_m_max (0.99 is crossed near m = 28)
    mc_trials: int = 200  # random token sets per m
    mc_matrices: int = 1  # independent random matrices the trials are spread over


# Allowed values, checked before any job (argmaxable.rules).
RULES = {
    "theory.*.bound": POSITIVE,
    "theory.*.eps": NON_NEGATIVE,
    "theory.*.workers": AT_LEAST_ONE,
    "theory.*.patience": NON_NEGATIVE,
}


@dataclass
class IllustrationsConfig:
    """ACL 2022 Figs 3-5, 7-9 and thesis Figs 4.1, 4.2, 4.4, drawn from toy layers (see theory/illustrations.py)."""

    bound: float = BOUND  # ACL 2022 §4: |x_j| <= 100 for the ranking and category checks
    eps: float = 1.0e-8
    patience: int = 50  # braid-reflect steps before the exact LP on the toy (its hard class needs 6)
    overcrowding_lines: list[int] = field(default_factory=lambda: [4, 8, 16, 32])  # thesis Fig. 4.2 panels


@dataclass
class TheoryConfig:
    """Settings of every theory experiment; ``enabled: false`` drops the family from ``rule all``."""

    enabled: bool = True
    regions: RegionsConfig = field(default_factory=RegionsConfig)
    cover: CoverConfig = field(default_factory=CoverConfig)
    dft: DftConfig = field(default_factory=DftConfig)
    random_layers: RandomLayersConfig = field(default_factory=RandomLayersConfig)
    basri_jacobs: BasriJacobsConfig = field(default_factory=BasriJacobsConfig)
    illustrations: IllustrationsConfig = field(default_factory=IllustrationsConfig)
