"""Detection over models (002 §4): check every category of a model's softmax layer, then tabulate.

One job per model (or one per class range, merged after) writes a per-category table and a summary;
:func:`make_detect_table` gathers the summaries into the papers' table (002 appendix E, Tables 4-8):
potentially unargmaxable (categories the approximate algorithm could not prove, so the exact LP ran),
unargmaxable (proven by the LP), mean steps. For translation models the paper counts only the target
script's tokens (002 §4.2, :mod:`argmaxable.models.vocab`); the table gives those counts and the whole
vocabulary's side by side.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from argmaxable.models.loaders import load_model
from argmaxable.models.vocab import in_script
from argmaxable.models.weights import WeightsError
from argmaxable.provenance import write_json, write_table

SHOWN = 100  # unargmaxable category indices listed in a summary (the full list is in the table)


def shard_range(n: int, shard: int, shards: int) -> range:
    """Categories of shard ``shard`` (0-based) of ``shards`` contiguous class ranges over ``n`` categories."""
    if not 0 <= shard < shards:
        raise ValueError(f"shard {shard} is outside 0..{shards - 1}")
    return range(shard * n // shards, (shard + 1) * n // shards)


def check_shard(model: Mapping, detect: Mapping, *, root: str | os.PathLike | None = None, shard: int = 0,
                shards: int = 1, progress: bool = False):
    """Check one class range of a model's output layer (all of it when ``shards == 1``).

    Returns
    -------
    frame : DataFrame
        One row per category of the range: category, token (when the model has a vocabulary), counted
        (whether the paper counts it: the target-script filter of :mod:`argmaxable.models.vocab` when the
        model names a ``script``, else every category), then the check's columns (status, radius, steps, ...).
    facts : dict
        model, origin, n, d, bias, script, seconds, settings, files (paths read, for provenance).
    """
    import argmaxable as am

    layer = load_model(model, root=root)
    n = layer.W.shape[0]
    classes = np.asarray(shard_range(n, shard, shards), dtype=np.int64)
    script = model.get("script") or ""
    if script and layer.tokens is None:
        raise WeightsError(f"model {model['name']!r} names script {script!r} but no vocabulary file was found: "
                           "set params.vocab")
    start = time.perf_counter()
    res = am.check_categories(layer.W, None if shards == 1 else classes, layer.b, bound=detect["bound"],
                              patience=detect["patience"], eps=detect["eps"], solver=detect["solver"],
                              workers=detect["workers"], progress=progress)
    seconds = time.perf_counter() - start
    frame = res.to_frame().rename(columns={"item": "category"})
    extra = {}
    if layer.tokens is not None:
        extra["token"] = [layer.tokens[i] for i in classes]
    extra["counted"] = [in_script(t, script) for t in extra["token"]] if script else np.ones(len(classes), bool)
    for pos, (col, values) in enumerate(extra.items(), start=1):
        frame.insert(pos, col, values)
    facts = {"model": model["name"], "origin": layer.origin, "n": int(n), "d": int(layer.W.shape[1]),
             "bias": layer.b is not None, "script": script, "seconds": round(seconds, 3),
             "settings": res.settings, "files": [str(f) for f in layer.files]}
    return frame, facts


def _counts(frame) -> dict[str, Any]:
    """The papers' numbers over the rows of ``frame``: potentially unargmaxable, unargmaxable, undecided."""
    proven = frame["steps"].to_numpy() >= 0
    status = frame["status"].to_numpy()
    return {"potentially_unargmaxable": int((~proven).sum()), "unargmaxable": int((status == "unargmaxable").sum()),
            "undecided": int((status == "undecided").sum())}


def summarise(frame, facts: Mapping, paper: Mapping | None = None) -> dict[str, Any]:
    """The per-model record of a check (whole range): counts over the counted categories as the paper
    reports them (the target script's tokens, or all), the same over the whole vocabulary, mean steps."""
    counted = frame[frame["counted"].to_numpy(dtype=bool)]
    steps = counted["steps"].to_numpy()
    unarg = counted[counted["status"] == "unargmaxable"]
    status = counted["status"].to_numpy()
    return {
        **{k: facts[k] for k in ("model", "origin", "n", "d", "bias", "script", "seconds", "settings")},
        "counts": {s: int((status == s).sum()) for s in ("argmaxable", "unargmaxable", "undecided")},
        "counted": len(counted),
        **_counts(counted),
        "whole_vocabulary": _counts(frame),
        "mean_steps": float(steps[steps >= 0].mean()) if (steps >= 0).any() else float("nan"),
        "max_steps": int(frame["steps"].max()) if len(frame) else 0,
        "unargmaxable_categories": unarg["category"].head(SHOWN).tolist(),
        "unargmaxable_tokens": unarg["token"].head(SHOWN).tolist() if "token" in unarg else [],
        "paper": dict(paper or {}),
    }


def check_model(model: Mapping, detect: Mapping, table_path: str | os.PathLike, summary_path: str | os.PathLike,
                *, root: str | os.PathLike | None = None, config: Any = None,
                progress: bool = False) -> dict[str, Any]:
    """Load one model's output layer from local files, check all its categories, write table and summary.

    Parameters
    ----------
    model : mapping
        A model config (name, source, params, script, paper; see :class:`argmaxable.models.schema.ModelConfig`).
    detect : mapping
        Detection settings: bound, patience, eps, solver, workers.
    table_path : path
        Per-category table (.parquet/.csv): category, token, counted, status, radius, steps, lp_rounds,
        witness_norm, message.
    summary_path : path
        JSON summary (see :func:`summarise`).
    root : path, optional
        The model's downloaded directory (relative params are read inside it).
    config : any
        The composed config, stored in the provenance records.

    Returns
    -------
    dict
        The summary.
    """
    frame, facts = check_shard(model, detect, root=root, progress=progress)
    return _write_model(frame, facts, model, table_path, summary_path, facts["files"], config)


def _write_model(frame, facts, model, table_path, summary_path, inputs, config) -> dict[str, Any]:
    write_table(frame, table_path, config=config, inputs=inputs, model=model["name"], origin=facts["origin"])
    summary = summarise(frame, facts, model.get("paper"))
    write_json(summary, summary_path)
    return summary


def check_model_shard(model: Mapping, detect: Mapping, shard: int, shards: int, table_path: str | os.PathLike,
                      facts_path: str | os.PathLike, *, root: str | os.PathLike | None = None,
                      config: Any = None, progress: bool = False) -> None:
    """One class-range job of a sharded check: its rows of the table and the layer's facts (JSON)."""
    frame, facts = check_shard(model, detect, root=root, shard=shard, shards=shards, progress=progress)
    write_table(frame, table_path, config=config, inputs=facts["files"], model=model["name"], shard=shard)
    write_json(facts, facts_path)


def merge_model_shards(model: Mapping, table_paths: Iterable[str | os.PathLike],
                       facts_paths: Iterable[str | os.PathLike], table_path: str | os.PathLike,
                       summary_path: str | os.PathLike, *, config: Any = None) -> dict[str, Any]:
    """Join the shards of a sharded check into the table and summary a single :func:`check_model` writes."""
    import pandas as pd

    table_paths, facts_paths = list(table_paths), list(facts_paths)
    frame = pd.concat([pd.read_parquet(p) for p in table_paths], ignore_index=True)
    frame = frame.sort_values("category", ignore_index=True)
    all_facts = [json.loads(Path(p).read_text()) for p in facts_paths]
    facts = {**all_facts[0], "seconds": round(sum(f["seconds"] for f in all_facts), 3)}
    if frame["category"].tolist() != list(range(facts["n"])):
        raise ValueError(f"shards of {model['name']!r} do not cover categories 0..{facts['n'] - 1} once each")
    return _write_model(frame, facts, model, table_path, summary_path, table_paths, config)


COLUMNS = {  # summary key -> column of the detection table (002 Tables 4-8 plus our extra evidence)
    "model": "model",
    "n": "n",
    "d": "d",
    "bias": "bias",
    "script": "script",
    "counted": "# counted",
    "potentially_unargmaxable": "# potentially unargmaxable",
    "unargmaxable": "# unargmaxable",
    "undecided": "# undecided",
    "whole_vocabulary.potentially_unargmaxable": "whole vocabulary # potentially unargmaxable",
    "whole_vocabulary.unargmaxable": "whole vocabulary # unargmaxable",
    "mean_steps": "mean steps",
    "seconds": "seconds",
}


def _get(record: Mapping, key: str):
    """``record[key]`` where a dotted key reads into nested records."""
    for part in key.split("."):
        record = record[part]
    return record


def detect_table(summaries: Iterable[Mapping]):
    """The 002-style table of many models' summaries, with the papers' numbers beside ours."""
    import pandas as pd

    rows = []
    for s in summaries:
        row = {col: _get(s, key) for key, col in COLUMNS.items()}
        paper = s.get("paper") or {}
        row["paper table"] = paper.get("table", "")
        row["paper # potentially unargmaxable"] = paper.get("potentially_unargmaxable", "")
        un = paper.get("unargmaxable")
        row["paper # unargmaxable"] = "" if un is None else str(un)
        rows.append(row)
    return pd.DataFrame(rows, columns=[*COLUMNS.values(), "paper table", "paper # potentially unargmaxable",
                                       "paper # unargmaxable"])


def make_detect_table(summary_paths: Iterable[str | os.PathLike], out_paths: Iterable[str | os.PathLike],
                      *, config: Any = None):
    """Read per-model summaries and write the detection table to each of ``out_paths`` (.parquet/.csv/.md)."""
    summary_paths = list(summary_paths)
    summaries = [json.loads(Path(p).read_text()) for p in summary_paths]
    table = detect_table(summaries)
    for path in out_paths:
        shown = table.round({"mean steps": 2, "seconds": 1}) if str(path).endswith(".md") else table
        write_table(shown, path, config=config, inputs=summary_paths)
    return table

