"""Config schema of the small language model family (``config/lm/``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from argmaxable.rules import AT_LEAST_ONE, NON_NEGATIVE, PERCENTILE, POSITIVE, Rule, one_of

MODEL_KEY = "debtags_lm_d{d}"  # the model config (config/model/<key>.yaml) of the run of width d
HEAD_KEY = "{head}_d{d}"  # a run with a head of argmaxable.layers (rule train_lm_head), under lm/prevention/
HEADS = ("linear", "spherical", "dft", "dft_slack")  # the softmax heads (argmaxable.lm.model.softmax_head)
ACTIVATIONS = ("gelu", "silu", "relu", "tanh")

RULES: dict[str, Rule] = {
    "lm.vocab_size": AT_LEAST_ONE,
    "lm.context": AT_LEAST_ONE,
    "lm.embed_dim": AT_LEAST_ONE,
    "lm.hidden": AT_LEAST_ONE,
    "lm.d.*": AT_LEAST_ONE,
    "lm.activation": one_of(ACTIVATIONS),
    "lm.train_tokens": AT_LEAST_ONE,
    "lm.batch_size": AT_LEAST_ONE,
    "lm.lr": POSITIVE,
    "lm.threads": AT_LEAST_ONE,
    "lm.percentiles.*": PERCENTILE,
    "lm.prevention.heads.*": one_of(HEADS[1:]),
    "lm.prevention.d.*": AT_LEAST_ONE,
    "lm.prevention.rankings": NON_NEGATIVE,
}


def _runs_are_models(tree: dict) -> str | None:
    """Each width's run is a model of the composed list, read from train_lm's output directory."""
    lm = tree["lm"]
    for d in lm["d"] if lm["enabled"] else ():
        key = MODEL_KEY.format(d=d)
        if key not in tree["model"]:
            return (f"lm.d asks for model '{key}', which is not in the model list; add it to the model defaults "
                    "of config/config.yaml or set lm.enabled=false")
        path, wanted = tree["model"][key]["download"]["path"], f"{tree['results_dir']}/lm/{key}"
        if path != wanted:
            return f"model.{key}.download.path must be train_lm's output {wanted}; got {path!r}"
    return None


def _prevention_widths_have_baselines(tree: dict) -> str | None:
    lm = tree["lm"]
    missing = next((d for d in lm["prevention"]["d"] if d not in lm["d"]), None)
    if missing is None:
        return None
    return (f"lm.prevention.d has {missing}, which lm.d lacks (its plain run is the baseline); use widths of "
            f"{list(lm['d'])}")


CHECKS = (_runs_are_models, _prevention_widths_have_baselines)


@dataclass
class PreventionConfig:
    """Runs of the LM with heads of :mod:`argmaxable.layers` (prevention), beside the plain run of each d."""

    heads: list[str] = field(default_factory=lambda: list(HEADS[1:]))  # every head but linear
    d: list[int] = field(default_factory=lambda: [4, 8, 16])  # a subset of LMConfig.d
    rankings: int = 50  # top-k rankings of a DFT head checked per run


@dataclass
class LMConfig:
    """A word-level window language model on the debtags descriptions, one run per bottleneck width d.

    The run of width d is the model ``debtags_lm_d{d}`` of the ``model`` group (see
    :data:`MODEL_KEY`), checked by the detection family like any released model.
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
