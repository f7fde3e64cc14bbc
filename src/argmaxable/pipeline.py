"""What the Snakemake rules compute from the composed config: paths, inputs and the settings each job receives.

The rules files (``workflow/rules/*.smk``) hold rules only; their input and params functions are lambdas that
call these, so ruff and the tests reach the logic and ``snakemake --lint`` finds no functions beside rules.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from argmaxable.config import ConfigError, load_config

# What every job's process starts with: the Snakefile sets it before any job runs, and the benchmarks start their
# children with it, so that they time what the pipeline runs. NumPy asks the kernel for huge pages for its large
# arrays (madvise); where they are slow to back, as on this project's 2-core VMs, a fresh 62000 x 512 float64 array
# took 0.1-10 s with them and 0.2-0.4 s without, and every job allocates arrays the size of its head.
JOB_ENVIRONMENT = {"NUMPY_MADVISE_HUGEPAGE": "0"}


def compose(overrides: str | list[str], config_dir: str | Path) -> DictConfig:
    """The run's composed config (``--config overrides=[...]``); a bad config stops Snakemake before any job is
    scheduled with one line and no traceback."""
    try:
        return load_config([overrides] if isinstance(overrides, str) else list(overrides), config_dir)
    except ConfigError as err:
        print(f"argmaxable: {err}", file=sys.stderr)
        sys.exit(1)


def settings(node: DictConfig) -> Any:
    """A config subtree as plain, resolved containers: what a rule passes as a param (Snakemake compares params
    by their repr to decide reruns, so jobs must see values, never interpolations)."""
    return OmegaConf.to_container(node, resolve=True)


def model_dir(data_dir: str, key: str) -> str:
    """A model's downloaded files (rule download_model): <data_dir>/models/<key>."""
    return f"{data_dir}/models/{key}"


def model_input(data_dir: str, key: str) -> str:
    """What a job reading a model's files depends on: the manifest download_model writes last."""
    return f"{model_dir(data_dir, key)}/manifest.json"


def download_params(cfg: DictConfig, key: str) -> dict[str, Any]:
    """Only what a model's download reads: editing its paper numbers or description must not fetch GBs again."""
    model = settings(cfg.model[key])
    return {"name": model["name"], "download": model["download"]}


def trained_input(cfg: DictConfig, key: str) -> list[str]:
    """A model of kind ``trained`` depends on the file or directory the rule that trains it writes."""
    spec = cfg.model[key].download
    return [spec.path] if spec.kind == "trained" else []


def steps_models(cfg: DictConfig, figure: str) -> list[str]:
    """The models drawn in a steps-per-token figure: detect.<figure>_models that ran, or every model."""
    models = list(cfg.model)
    return [m for m in cfg.detect[f"{figure}_models"] if m in models] or models


def family_outputs(root: str, tables: dict[str, str] | None = None,
                   figures: dict[str, str] | None = None) -> dict[str, Any]:
    """Named outputs {key: path} of a rule writing tables ({key: stem} -> <root>/tables/<stem>.parquet) and
    figures (-> <root>/figures/<stem>.png), plus ``copies``: the .md beside each table and the .pdf beside each
    figure (the package writes both; Snakemake must know them to clean and rerun)."""
    named = {key: f"{root}/tables/{stem}.parquet" for key, stem in (tables or {}).items()}
    named |= {key: f"{root}/figures/{stem}.png" for key, stem in (figures or {}).items()}
    copies = [p.removesuffix(".parquet") + ".md" if p.endswith(".parquet")
              else p.removesuffix(".png") + ".pdf" for p in named.values()]
    return {**named, "copies": copies}


def dataset_download(cfg: DictConfig, name: str) -> list[str]:
    """The manifest of a dataset's download when its config lists one; hand-placed inputs need none."""
    return [f"{cfg.data_dir}/{name}/manifest.json"] if cfg.datasets[name].download else []


def dataset_resources(cfg: DictConfig, name: str) -> dict[str, Any]:
    """The SLURM requests of a dataset's train_head and verify_head jobs: ``multilabel.resources.<name>``, or the
    schema's defaults when the config has no entry for it."""
    from argmaxable.multilabel.schema import DatasetResources

    given = cfg.multilabel.resources.get(name)
    return settings(given) if given is not None else OmegaConf.to_container(OmegaConf.structured(DatasetResources))


def snapshot_version(cfg: DictConfig, name: str) -> str:
    """The debtags snapshot's recorded sha256 (empty for other datasets): a param, not an input, which would make
    Snakemake schedule the snapshot's maintenance rule, so a rebuilt snapshot still rebuilds the dataset."""
    from argmaxable.multilabel.datasets.debtags import SNAPSHOT

    dataset = cfg.datasets[name]
    if dataset.name != "debtags" or dataset.source != "snapshot":
        return ""
    return json.loads(SNAPSHOT.with_suffix(".meta.json").read_text())["sha256"]
