"""Config schema of the multi-label family (heads, training sweep, verification).

``multilabel.runs`` maps a dataset name (a key of the ``dataset`` group) to the settings of its sweep
(thesis Table A.4 for the paper experiment). Snakemake turns ``d x heads x seeds`` into wildcards.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import MISSING

from argmaxable.core.settings import ASSIGNMENT_BOUND, EPS
from argmaxable.core.solvers import SOLVERS
from argmaxable.rules import AT_LEAST_ONE, NON_NEGATIVE, POSITIVE, Rule, one_of

ENCODERS = ("cnn", "hf", "timm")  # the feature encoders of argmaxable.multilabel.encoders
HEADS = ("bsl", "dft")  # the output heads of argmaxable.multilabel.heads


@dataclass
class EncoderConfig:
    """Feature encoder before the projection (thesis eq. 4.6: x = P e + b)."""

    kind: str = "cnn"  # cnn (CAML, Mullenbach et al. 2018) | hf (Hugging Face text) | timm (images)
    # CAML CNN (thesis §4.1.2; Mullenbach et al. 2018: embedding 100, 500 filters of width 4, dropout 0.2).
    embed_dim: int = 100
    filters: int = 500
    width: int = 4
    dropout: float = 0.2
    vocab_min_count: int = 3  # words seen fewer times in the training split map to <unk>
    vocab_max_size: int = 50000
    max_tokens: int = 2500  # CAML truncates MIMIC-III notes to 2500 tokens
    # Hugging Face text encoder / timm image encoder: hub name or local directory.
    pretrained: str = ""
    # timm: local weights file replacing the hub's (paper: ASL's OpenImages TResNet-L); "" = the hub's ImageNet
    # weights, a deliberate choice; a named file that is missing stops the job.
    checkpoint: str = ""
    image_size: int = 448  # OpenImages images resized to 448x448 (thesis A.6.1, Baruch et al. 2020)
    # A member of the pretrained model's family at another size, where it is not the named model's own: for timm,
    # keyword arguments of the model's constructor (the rehearsal's shrunk TResNet); for hf, fields of the model's
    # config.json, checked against the model loaded (the rehearsal's shrunk PubMedBERT replica). The tables name
    # the encoder "shrunk" with these values. Empty: the named model as it is.
    arch: dict[str, Any] = field(default_factory=dict)
    # Half-width of the box over encoder features used by the encoder-space verification. The CNN's features
    # are max-pooled tanh activations, so they lie in [-1, 1]; other encoders have no finite range (use 1e4).
    feature_bound: float = 1.0


def encoder_label(encoder: dict[str, Any]) -> str:
    """What tables call an encoder (its config as a dict): CAML's CNN, or the pretrained model's name (a hub name as
    it is, a local directory by its last part), "shrunk" with its :attr:`EncoderConfig.arch` where that is set."""
    if encoder["kind"] == "cnn":
        return "CNN (CAML)"
    name = encoder["pretrained"] or encoder["kind"]
    name = Path(name).name if Path(name).is_absolute() or name.count("/") > 1 else name  # a path, not org/name
    arch = encoder.get("arch") or {}
    return f"{name}, shrunk ({', '.join(f'{k} {v}' for k, v in arch.items())})" if arch else name


@dataclass
class RunConfig:
    """Training sweep and verification settings of one dataset (thesis Table A.4)."""

    encoder: EncoderConfig = field(default_factory=EncoderConfig)
    d: list[int] = MISSING  # trainable bottleneck widths (BSL: d; DFT: d slack columns, thesis §5.1.3)
    heads: list[str] = field(default_factory=lambda: ["bsl", "dft"])
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])  # thesis A.6.3
    # DFT guarantee order: every assignment with at most k active labels is argmaxable (thesis Thm 5.4).
    # null = the maximum number of active labels of a training example (the dataset's stats.json k).
    k_active: int | None = None
    metric_k: int = 10  # P@k, R@k, F1@k: k=8 for MIMIC-III, 10 otherwise (thesis Fig. 5.6(b))
    lr_encoder: float = 0.001
    lr_classifier: float = 0.001
    batch_size: int = 16
    patience: int = 10  # early stopping patience in evaluations (thesis A.6.3)
    eval_every: int = 0  # evaluate every this many optimiser steps; 0 = once per epoch
    criterion: str = "loss"  # "p@k" (MIMIC-III, higher is better) or "loss" (dev BCE, lower is better)
    max_epochs: int = 100
    max_steps: int | None = None  # stop after this many optimiser steps, evaluating there (the rehearsal); null = none
    max_train: int | None = None  # cap on training examples (CPU budget); null = all
    max_eval: int | None = None  # cap on dev examples used for early stopping; null = all
    threads: int = 1  # torch intra-op threads per training job
    device: str = "auto"  # torch device; auto = cuda when available, else cpu


@dataclass
class JobResources:
    """What a SLURM allocation of one job asks for (Snakemake ``resources:``); never passed to the job itself, so
    editing it reruns nothing."""

    mem_mb: int = 4000  # MiB (sbatch --mem): a measured peak RSS with a margin, the measurement beside it
    runtime: int = 60  # minutes (sbatch --time)
    gpu: int = 0  # GPUs (the SLURM executor's --gpus)


@dataclass
class DatasetResources:
    """Resources of one dataset's training and verification jobs."""

    train: JobResources = field(default_factory=JobResources)
    verify: JobResources = field(default_factory=JobResources)


@dataclass
class VerifyConfig:
    """LP verification of label assignments (thesis §4.1.2)."""

    bound: float = ASSIGNMENT_BOUND  # box |x_j| <= 1e4 for label assignments (thesis A.3)
    eps: float = EPS  # LP precision: radius > eps proves a region (thesis §4.1.2)
    solver: str = "highs"
    workers: int = 1
    splits: list[str] = field(default_factory=lambda: ["dev", "test"])  # gold and predicted assignments
    # Splits also verified over the encoder's features (the composite map e -> W (P e + b)); [] = none.
    encoder_splits: list[str] = field(default_factory=lambda: ["test"])  # paper.yaml: dev and test
    # Heads whose head-space assignments not shown eps-argmaxable get their region settled exactly (the core's
    # exact stage): the DFT's, which Thm 5.3 makes argmaxable however thin (thesis §5.1.3); [] = none.
    regions: list[str] = field(default_factory=lambda: ["dft"])


# Allowed values, checked before any job (argmaxable.rules).
DROPOUT: Rule = ("a probability in [0, 1)", lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)
                  and 0 <= v < 1)


def _runs_have_datasets(tree: dict) -> str | None:
    if not tree["multilabel"]["enabled"]:
        return None
    missing = next((name for name in tree["multilabel"]["runs"] if name not in tree["datasets"]), None)
    if missing is None:
        return None
    return (f"multilabel.runs.{missing} has no dataset config; add '{missing}' to the datasets group "
            f"(available: {', '.join(tree['datasets'])})")


CHECKS = (_runs_have_datasets,)

RULES = {
    "multilabel.runs.*.encoder.kind": one_of(ENCODERS),
    "multilabel.runs.*.encoder.feature_bound": POSITIVE,
    "multilabel.runs.*.encoder.dropout": DROPOUT,
    "multilabel.runs.*.d.*": AT_LEAST_ONE,
    "multilabel.runs.*.seeds.*": NON_NEGATIVE,
    "multilabel.runs.*.batch_size": AT_LEAST_ONE,
    "multilabel.runs.*.metric_k": AT_LEAST_ONE,
    "multilabel.runs.*.max_epochs": AT_LEAST_ONE,
    "multilabel.runs.*.max_steps": AT_LEAST_ONE,
    "multilabel.resources.*.*.mem_mb": AT_LEAST_ONE,
    "multilabel.resources.*.*.runtime": AT_LEAST_ONE,
    "multilabel.resources.*.*.gpu": NON_NEGATIVE,
    "multilabel.runs.*.threads": AT_LEAST_ONE,
    "multilabel.runs.*.lr_encoder": POSITIVE,
    "multilabel.runs.*.lr_classifier": POSITIVE,
    "multilabel.runs.*.heads.*": one_of(HEADS),
    "multilabel.verify.bound": POSITIVE,
    "multilabel.verify.eps": NON_NEGATIVE,
    "multilabel.verify.solver": one_of(SOLVERS),
    "multilabel.verify.workers": AT_LEAST_ONE,
    "multilabel.verify.regions.*": one_of(HEADS),
}


@dataclass
class MultilabelConfig:
    enabled: bool = True
    runs: dict[str, RunConfig] = field(default_factory=dict)
    verify: VerifyConfig = field(default_factory=VerifyConfig)
    # Per dataset (a key of runs): the SLURM request of its train_head and verify_head jobs; absent = defaults.
    resources: dict[str, DatasetResources] = field(default_factory=dict)
    loss_curve_d: int | None = None  # the d of thesis Fig. 5.7 (loss curves); null = the middle of the sweep
