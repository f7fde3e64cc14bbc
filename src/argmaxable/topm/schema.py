"""Config schema of the top-m family (Basri & Jacobs Figs 1, 3, 7; thesis Prop. 5.3).

``config/topm/default.yaml`` sizes every experiment for the offline default (reduced sizes and trial counts,
stated on each figure); ``config/topm/paper.yaml`` restores the paper's sizes and its trained matrices.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from argmaxable.core.settings import ASSIGNMENT_BOUND, BOUND
from argmaxable.rules import AT_LEAST_ONE, NON_NEGATIVE, POSITIVE, Rule

OPEN_UNIT: Rule = ("a number in (0, 1)", lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)
                   and 0 < v < 1)

# Value rules (argmaxable.config.validate applies them before any job runs).
def _fraction_models_are_configured(tree: dict) -> str | None:
    unknown = [key for key in tree["topm"]["fraction"]["models"] if key not in tree["model"]]
    if not unknown:
        return None
    return (f"topm.fraction.models names {unknown}, which the composed 'model' group lacks; add them to the "
            "experiment's model list")


def _natural_model_is_configured(tree: dict) -> str | None:
    model = tree["topm"]["natural"]["model"]
    if model is None or model in tree["model"]:
        return None
    return f"topm.natural.model is {model!r}, which the composed 'model' group lacks"


CHECKS = (_fraction_models_are_configured, _natural_model_is_configured)

RULES = {
    "topm.probability": OPEN_UNIT,
    "topm.check.bound": POSITIVE,
    "topm.check.eps": NON_NEGATIVE,
    "topm.check.patience": NON_NEGATIVE,
    "topm.check.workers": AT_LEAST_ONE,
    "topm.prescribed.eps_ratio": OPEN_UNIT,
    "topm.prescribed.delta": OPEN_UNIT,
    "topm.prescribed.low": POSITIVE,  # targets must be positive probabilities
    "topm.prescribed.high": POSITIVE,
    "topm.fraction.m_values.*": AT_LEAST_ONE,
    "topm.*.trials": AT_LEAST_ONE,
    "topm.scaling.d_values.*": AT_LEAST_ONE,
    "topm.scaling.N_values.*": AT_LEAST_ONE,
    "topm.ranking.bound": POSITIVE,
    "topm.ranking.samples": AT_LEAST_ONE,
    "topm.ranking.matrices": AT_LEAST_ONE,
    "topm.natural.top": AT_LEAST_ONE,
    "topm.natural.max_tokens": AT_LEAST_ONE,
}


@dataclass
class CheckSettings:
    """Core keywords of every top-m check (argmaxable.check_top_m / check_assignments)."""

    bound: float = BOUND  # |x_j| <= 100 as for softmax (ACL 2022 §4); top-m regions are cones, so any box works
    eps: float = 1.0e-8  # radius that counts as a region (thesis §4.2)
    patience: int = 0  # reflection rarely proves a top-m set; measured: straight to the LP is faster
    solver: str = "highs"
    workers: int = 1  # LPs at once inside one job (Snakemake runs the matrices in parallel)
    exact_radius: bool = True  # skips the dual stage, which rarely proves a top-m set: measured 1.2-1.7x faster
    # on a Gaussian 6625 x 120 (LPs run to their optimum instead)


@dataclass
class PrescribedSettings:
    """Prescribed probabilities, Basri & Jacobs §6."""

    eps_ratio: float = 0.05  # each ratio p_i / p_r within 5%
    delta: float = 0.1  # mass outside the set below 0.1
    low: float = 0.1  # targets drawn from U(0.1, 1.1), then normalised: ratios at most 11
    high: float = 1.1


@dataclass
class FractionConfig:
    """Basri & Jacobs Fig. 1: share of random m-sets that can be the top-m / get prescribed probabilities."""

    # keys of model.<key>: trained matrices (and Gaussians of their shapes); each is read from data/models/<key>
    models: list[str] = field(default_factory=lambda: ["ppocrv4_rec", "debtags_lm_d64"])
    m_values: list[int] = field(default_factory=lambda: [2, 4, 6, 8, 10, 12, 16, 24])  # paper.yaml: 10 to 1400
    trials: int = 20  # random sets per m (Basri & Jacobs: not stated; paper.yaml uses 100)


@dataclass
class ScalingConfig:
    """Basri & Jacobs Fig. 3: m reaching the probability on random matrices, against d and against N."""

    # reduced sizes; paper.yaml has the paper's (N = 32000, 100 <= d <= 2050; d = 1000, 2000 <= N <= 32000)
    N: int = 2000  # left panel: m against d at this N
    d_values: list[int] = field(default_factory=lambda: [20, 40, 60, 80, 100, 150])
    d: int = 40  # right panel: m against N at this d
    N_values: list[int] = field(default_factory=lambda: [250, 500, 1000, 2000, 4000])
    trials: int = 30  # random sets per m; 0.99 then allows no failure (paper.yaml: 100, one failure)


@dataclass
class RowsConfig:
    """Basri & Jacobs Fig. 7: row norms and cosine similarities, trained vs Gaussian."""

    pairs: int = 20000  # random row pairs for the cosine histogram


@dataclass
class RankingConfig:
    """Thesis Prop. 5.3 on the DFT layer without its DC column, against Basri & Jacobs Cor. 3."""

    exhaustive_n: list[int] = field(default_factory=lambda: [6, 7, 8, 9])  # all top-k rankings, 2k < n - 1
    sampled_n: list[int] = field(default_factory=lambda: [16, 64, 256])
    k_values: list[int] = field(default_factory=lambda: [1, 2, 3, 4])
    samples: int = 50  # random rankings per (n, k) (paper.yaml: 1000)
    by_d_n: int = 8  # Gaussian layers: all top-k rankings of n tokens for d = k..n-1
    by_d_k: list[int] = field(default_factory=lambda: [1, 2])
    matrices: int = 5  # Gaussian draws per d
    bound: float = ASSIGNMENT_BOUND  # box for the ranking LPs, as for the DFT layer in thesis §5.1 (A.3); the
    # regions are cones, so a larger box only scales their radii up, and the DFT's shrink fast with n (thesis Fig. 5.5)


@dataclass
class NaturalConfig:
    """Basri & Jacobs Figs 4 and 6: a causal language model's own next-token probabilities."""

    # key of model.<key> holding a causal LM (Hugging Face directory, or the lm family's window LM); none: skipped
    model: str | None = "debtags_lm_d64"
    texts: list[str] = field(default_factory=lambda: [  # Python help topics (pydoc_data) in place of the
        "assert", "assignment", "calls", "class", "exceptions",  # paper's ten New York Times stories
        "for", "function", "if", "import", "while"])
    top: int = 2000  # probabilities kept per position (Fig. 4's x-axis reaches 1000)
    max_tokens: int = 512  # tokens read per text
    cumulative_m: list[int] = field(default_factory=lambda: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000])


@dataclass
class TopmConfig:
    """Settings of the top-m family; ``enabled: false`` drops it from ``rule all``."""

    enabled: bool = True
    probability: float = 0.99  # Basri & Jacobs: "probability close to one" is read at 0.99 (Table 1, Fig. 3)
    check: CheckSettings = field(default_factory=CheckSettings)
    prescribed: PrescribedSettings = field(default_factory=PrescribedSettings)
    fraction: FractionConfig = field(default_factory=FractionConfig)
    scaling: ScalingConfig = field(default_factory=ScalingConfig)
    rows: RowsConfig = field(default_factory=RowsConfig)
    ranking: RankingConfig = field(default_factory=RankingConfig)
    natural: NaturalConfig = field(default_factory=NaturalConfig)
