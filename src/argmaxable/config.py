"""Compose and validate the project's Hydra configuration.

The Snakefile, the CLI, notebooks and tests all call :func:`load_config`, so every consumer sees the same
composed tree. Validation happens here, once, before any job runs: the composed tree is merged into the
typed schema (:class:`RootConfig`), which rejects unknown keys, wrong types and missing required values with
one message naming the key.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import MISSING, DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from argmaxable.core.settings import ASSIGNMENT_BOUND, BOUND
from argmaxable.detect.schema import RULES as DETECT_RULES
from argmaxable.detect.schema import DetectConfig, ModelConfig
from argmaxable.lm.schema import CHECKS as LM_CHECKS
from argmaxable.lm.schema import RULES as LM_RULES
from argmaxable.lm.schema import LMConfig
from argmaxable.multilabel.datasets.schema import DatasetConfig
from argmaxable.multilabel.schema import CHECKS as MULTILABEL_CHECKS
from argmaxable.multilabel.schema import RULES as MULTILABEL_RULES
from argmaxable.multilabel.schema import MultilabelConfig
from argmaxable.rules import DIRECTORY, NAME, POSITIVE, ConfigError, broken, first_failed, one_line
from argmaxable.theory.schema import RULES as THEORY_RULES
from argmaxable.theory.schema import TheoryConfig
from argmaxable.topm.schema import CHECKS as TOPM_CHECKS
from argmaxable.topm.schema import RULES as TOPM_RULES
from argmaxable.topm.schema import TopmConfig

CONFIG_DIR = Path(__file__).resolve().parents[2] / "config"


# Every value rule of the tree (the schemas declare theirs beside their dataclasses).
# The LM family's first: its models' settings interpolate lm's (lm.activation), so a broken one is named at its source.
RULES = {"results_dir": DIRECTORY, "data_dir": DIRECTORY, "box.*": POSITIVE, **LM_RULES, **DETECT_RULES, **THEORY_RULES,
         **MULTILABEL_RULES, **TOPM_RULES}
# Every check across keys, run once the value rules hold.
CHECKS = (*LM_CHECKS, *TOPM_CHECKS, *MULTILABEL_CHECKS)
# Overrides that switch off the families whose checks name other groups' keys (the LM runs' models, the top-m
# models, the multi-label runs' data sets): for composing one model or one data set alone, not a run.
ALONE = ("lm.enabled=false", "topm.fraction.models=[]", "topm.natural.model=null", "multilabel.enabled=false")
# Keys that become directory names (data/models/<key>, data/<dataset>, results/.../<key>).
KEY_RULES = {"model": NAME, "datasets": NAME}
# Config groups renamed to match their packages: an override that names the old one gets the new name back.
RENAMED_GROUPS = {"dataset": "datasets"}


@dataclass
class BoxConfig:
    """The box of each question (config/config.yaml's ``box``): every family's ``bound`` refers to one."""

    categories: float = BOUND  # softmax categories, top-m sets, prescribed probabilities (ACL 2022 §4)
    assignments: float = ASSIGNMENT_BOUND  # sigmoid label assignments, regions, the DFT layer's rankings (A.3)


@dataclass
class RootConfig:
    """Typed schema of the whole configuration tree (config/config.yaml composes into this)."""

    experiment: str = MISSING  # name of the experiment file that was applied (offline, paper, ...)
    seed: int = 0
    results_dir: str = "results"
    box: BoxConfig = field(default_factory=BoxConfig)
    data_dir: str = "data"  # downloaded inputs: data/models/<key>/ (models), and the datasets placed by hand
    # URL prefix -> replacement for the models' URL downloads (an institutional mirror; the rehearsal's local one)
    mirrors: dict[str, str] = field(default_factory=dict)
    detect: DetectConfig = field(default_factory=DetectConfig)
    model: dict[str, ModelConfig] = field(default_factory=dict)
    theory: TheoryConfig = field(default_factory=TheoryConfig)
    multilabel: MultilabelConfig = field(default_factory=MultilabelConfig)
    lm: LMConfig = field(default_factory=LMConfig)
    datasets: dict[str, DatasetConfig] = field(default_factory=dict)  # group config/datasets/
    topm: TopmConfig = field(default_factory=TopmConfig)


def _renamed_group(override: str) -> str | None:
    """A one-line hint when ``override`` names a renamed group (``dataset=...``, ``++dataset.x.y=...``)."""
    key = re.match(r"[+~]*([\w-]+)", override)
    new = RENAMED_GROUPS.get(key.group(1)) if key else None
    if new is None:
        return None
    return f"the config group '{key.group(1)}' is now '{new}': write {override.replace(key.group(1), new, 1)!r}"


def validate(cfg: DictConfig) -> DictConfig:
    """Merge ``cfg`` into :class:`RootConfig`, check every value rule (:data:`RULES`), then every check across keys
    (:data:`CHECKS`); raise :class:`ConfigError` naming the bad key and what is allowed. The Snakefile, ``argmaxable
    config show`` and every other caller of :func:`load_config` run the same validation."""
    try:
        merged = OmegaConf.merge(OmegaConf.structured(RootConfig), cfg)
        plain = OmegaConf.to_container(merged, resolve=True, throw_on_missing=True)
    except OmegaConfBaseException as err:
        key = getattr(err, "full_key", None) or "?"
        msg = getattr(err, "msg", None) or one_line(err)
        raise ConfigError(f"invalid config key '{key}': {msg.splitlines()[0]}") from None
    problem = broken(plain, RULES, KEY_RULES) or first_failed(plain, CHECKS)
    if problem:
        raise ConfigError(problem)
    OmegaConf.set_readonly(merged, True)
    return merged


def load_config(overrides: list[str] | tuple[str, ...] = (), config_dir: Path | str | None = None) -> DictConfig:
    """Compose ``config/config.yaml`` with Hydra overrides and validate it.

    Parameters
    ----------
    overrides : list of str
        Hydra override strings, e.g. ``["experiment=paper", "detect.bound=50"]``.
    config_dir : path, optional
        Directory holding ``config.yaml``; defaults to the repository's ``config/``.

    Raises
    ------
    ConfigError
        One line naming the unknown group option, key or wrong value.

    Examples
    --------
    >>> cfg = load_config(["seed=1"])
    >>> cfg.seed
    1
    """
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException

    hint = next(filter(None, map(_renamed_group, overrides)), None)
    if hint:
        raise ConfigError(hint)
    config_dir = Path(config_dir or CONFIG_DIR).resolve()
    if not (config_dir / "config.yaml").is_file():
        raise ConfigError(f"no config.yaml in {config_dir}; run from the repository root or pass config_dir")
    try:
        with initialize_config_dir(config_dir=str(config_dir), version_base="1.3"):
            cfg = compose("config", overrides=list(overrides))
    except (HydraException, OmegaConfBaseException) as err:
        raise ConfigError(f"bad override or config: {one_line(err)}") from None
    return validate(cfg)


# Where a Snakemake run leaves its composed tree for its jobs (:func:`share_composed`, :func:`from_snakemake`).
COMPOSED_ENV = "ARGMAXABLE_COMPOSED_CONFIG"


def _composed_key(overrides, config_dir: str | Path) -> dict[str, Any]:
    """What a composed tree is made from: the overrides as given and the resolved config directory."""
    return {"overrides": [overrides] if isinstance(overrides, str) else list(overrides),
            "config_dir": str(Path(config_dir).resolve())}


def share_composed(cfg: DictConfig, overrides, config_dir: str | Path, folder: str | Path) -> Path:
    """Write a run's composed tree once, for its jobs' provenance records, under ``folder`` (named by its content),
    and name it in the environment the run's jobs inherit. Each job composing it again cost 6-10 s at
    ``experiment=paper`` (153 models, Hydra's merge and the schema's), a check and a study per model."""
    import hashlib
    import json
    import os

    from argmaxable.provenance import atomic_path

    text = json.dumps({"key": _composed_key(overrides, config_dir), "config": to_plain(cfg)})
    path = Path(folder) / f"composed-{hashlib.sha256(text.encode()).hexdigest()[:16]}.json"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(path) as tmp:
            tmp.write_text(text)
    os.environ[COMPOSED_ENV] = str(path.resolve())
    return path


def from_snakemake(smk) -> dict[str, Any]:
    """The whole composed config of a Snakemake run, for provenance records inside a job's script.

    Rules pass only the settings a job uses as ``params`` (so editing unrelated settings reruns nothing);
    scripts call this to record the full tree the run was composed from: the one the run wrote
    (:func:`share_composed`) where it was made from this job's overrides and config directory, else composed here.
    """
    import json
    import os

    overrides = smk.config.get("overrides", [])
    config_dir = Path(smk.scriptdir).resolve().parents[1] / "config"  # the workflow's tree, whatever is installed
    key = _composed_key(overrides, config_dir)
    shared = os.environ.get(COMPOSED_ENV)
    if shared and Path(shared).is_file():
        try:
            record = json.loads(Path(shared).read_text())
        except (OSError, ValueError):
            record = {}
        if record.get("key") == key:
            return record["config"]
    return to_plain(load_config(key["overrides"], config_dir))


def to_plain(cfg: DictConfig) -> dict[str, Any]:
    """The resolved config as plain Python containers (for provenance records)."""
    return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]


def results_root() -> Path:
    """Where notebooks read results: ``$ARGMAXABLE_RESULTS``, else the default run's ``results_dir``."""
    import os

    if "ARGMAXABLE_RESULTS" in os.environ:
        return Path(os.environ["ARGMAXABLE_RESULTS"])
    return (CONFIG_DIR.parent / load_config().results_dir).resolve()
