"""Config schema of the small language model family (``config/lm/``)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class PreventionConfig:
    """Runs of the LM with heads of :mod:`argmaxable.layers` (issue 24), beside the plain run of each d."""

    heads: list[str] = field(default_factory=lambda: ["spherical", "dft", "dft_slack"])  # lm.model.HEADS but linear
    d: list[int] = field(default_factory=lambda: [4, 8, 16])  # a subset of LMConfig.d
    rankings: int = 50  # top-k rankings of a DFT head checked per run


@dataclass
class LMConfig:
    """A word-level window language model on the debtags descriptions, one run per bottleneck width d.

    The run of width d is the model ``debtags_lm_d{d}`` of the ``model`` group (see
    :data:`argmaxable.lm.train.MODEL_KEY`), checked by the detection family like any released model.
    """

    enabled: bool = True
    vocab_size: int = 4000  # output tokens, <eos> and <unk> included (rarest kept word: 38 training uses)
    context: int = 4  # previous tokens the model reads (a Bengio et al. 2003 window model)
    embed_dim: int = 64
    hidden: int = 256
    d: list[int] = field(default_factory=lambda: [4, 8, 16, 32, 64])  # bottleneck widths, one model each
    activation: str = "gelu"  # applied to the d-dim bottleneck that feeds the head: gelu | silu | relu | tanh
    train_tokens: int = 1_000_000  # training budget in predicted tokens (about half an epoch)
    batch_size: int = 1024
    lr: float = 0.003  # Adam
    seed: int = 0
    threads: int = 1  # torch intra-op threads per training job
    heldout_split: str = "test"  # snapshot split for the held-out loss and the activation ranges
    percentiles: list[float] = field(default_factory=lambda: [0.0, 1.0, 5.0, 50.0, 95.0, 99.0, 100.0])
    prevention: PreventionConfig = field(default_factory=PreventionConfig)
