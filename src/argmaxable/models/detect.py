"""Detection over models (002 §4): check every category of a model's softmax layer, then tabulate.

One job per model writes a per-category table and a summary; :func:`make_detect_table` gathers the
summaries into the papers' table (002 appendix E, Tables 4-8): potentially unargmaxable (categories the
approximate algorithm could not prove, so the exact LP ran), unargmaxable (proven by the LP), mean steps.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from argmaxable.models.loaders import load_model
from argmaxable.provenance import write_json, write_table

SHOWN = 100  # unargmaxable category indices listed in a summary (the full list is in the table)


def summarise(name: str, layer, res, seconds: float, paper: Mapping | None = None) -> dict[str, Any]:
    """The per-model record of a check: shape, counts per status, the papers' two numbers, mean steps."""
    proven = res.steps >= 0
    unarg = res.unargmaxable
    return {
        "model": name,
        "origin": layer.origin,
        "n": int(layer.W.shape[0]),
        "d": int(layer.W.shape[1]),
        "bias": layer.b is not None,
        "counts": res.counts(),
        "potentially_unargmaxable": int((~proven).sum()),
        "unargmaxable": int(unarg.size),
        "undecided": res.counts()["undecided"],
        "mean_steps": float(res.steps[proven].mean()) if proven.any() else float("nan"),
        "max_steps": int(res.steps.max()) if len(res) else 0,
        "unargmaxable_categories": unarg[:SHOWN].tolist(),
        "seconds": round(seconds, 3),
        "settings": res.settings,
        "paper": dict(paper or {}),
    }


def check_model(model: Mapping, detect: Mapping, table_path: str | os.PathLike, summary_path: str | os.PathLike,
                *, config: Any = None, progress: bool = False) -> dict[str, Any]:
    """Load one model's output layer, check all its categories, write the table and the summary.

    Parameters
    ----------
    model : mapping
        A model config (name, source, params, paper; see :class:`argmaxable.models.schema.ModelConfig`).
    detect : mapping
        Detection settings: bound, patience, eps, solver, workers.
    table_path : path
        Per-category table (.parquet/.csv): category, status, radius, steps, lp_rounds, witness_norm, message.
    summary_path : path
        JSON summary (see :func:`summarise`).
    config : any
        The composed config, stored in the provenance records.

    Returns
    -------
    dict
        The summary.
    """
    import argmaxable as am

    layer = load_model(model)
    start = time.perf_counter()
    res = am.check_categories(layer.W, b=layer.b, bound=detect["bound"], patience=detect["patience"],
                              eps=detect["eps"], solver=detect["solver"], workers=detect["workers"],
                              progress=progress)
    seconds = time.perf_counter() - start
    frame = res.to_frame().rename(columns={"item": "category"})
    write_table(frame, table_path, config=config, inputs=layer.files, model=model["name"], origin=layer.origin,
                check=res.settings)  # box, eps, tolerances, numeric path and BLAS of this check
    summary = summarise(model["name"], layer, res, seconds, model.get("paper"))
    write_json(summary, summary_path)
    return summary


COLUMNS = {  # summary key -> column of the detection table (002 Tables 4-8 plus our extra evidence)
    "model": "model",
    "n": "n",
    "d": "d",
    "bias": "bias",
    "potentially_unargmaxable": "# potentially unargmaxable",
    "unargmaxable": "# unargmaxable",
    "undecided": "# undecided",
    "mean_steps": "mean steps",
    "seconds": "seconds",
}


def detect_table(summaries: Iterable[Mapping]):
    """The 002-style table of many models' summaries, with the papers' numbers beside ours."""
    import pandas as pd

    rows = []
    for s in summaries:
        row = {col: s[key] for key, col in COLUMNS.items()}
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

