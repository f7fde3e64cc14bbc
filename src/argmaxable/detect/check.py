"""Detection over models (ACL 2022 §4): check every category of a model's softmax layer, then tabulate.

One job per model (or one per class range, merged after) writes a per-category table and a summary;
:func:`make_detect_table` gathers the summaries into the papers' table (ACL 2022 appendix E, Tables 4-8):
potentially unargmaxable (categories the approximate algorithm could not prove, so the exact LP ran),
unargmaxable (proven by the LP), mean steps. For translation models the paper counts only the target
script's tokens (ACL 2022 §4.2, :mod:`argmaxable.detect.vocab`); the table gives those counts and the whole
vocabulary's side by side.

Boxes: every model is checked in the paper's box |x_j| <= bound (ACL 2022 §4). A model whose config names the
``activation`` feeding its head (or whose ONNX graph shows it) is checked a second time in the box that
activation leaves (:func:`argmaxable.core.activation_bounds`, e.g. SiLU: x_j >= -0.2785): its table has
one row per category and box (column ``box``: ``"paper"`` or the activation's name), its summary the paper
box's counts at the top and the activation box's under ``activation_box``, and the detection table one row
per model and box.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from argmaxable.core import CheckResult, activation_bounds, check_categories
from argmaxable.core.box import activation_dtype
from argmaxable.detect.download import read_manifest
from argmaxable.detect.loaders import load_model
from argmaxable.detect.vocab import in_script
from argmaxable.detect.weights import WeightsError
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
        One row per box (:func:`boxes`) and category of the range: box, category, token (when the model has
        a vocabulary; readable for byte-level BPE), raw_token (the stored name, where ``token`` differs),
        token_type (GGUF: normal, control, user_defined, unused, byte, ...), counted
        (whether the paper counts it: the target-script filter of :mod:`argmaxable.detect.vocab` when the
        model names a ``script``, else every category), then the check's columns (status, radius, steps, ...).
    facts : dict
        model, group, origin, n, d, bias, script, activation, seconds, settings (per box, scalar bounds),
        files (paths read), checks (the core's settings per box, recorded in the table's sidecar), head (what
        the file says about the head: GGUF's tied, stored_type, output_norm; ONNX: where its tokens came from).
    results : dict
        Per box, the :class:`~argmaxable.core.CheckResult` with its evidence.
    layer : Layer
        The head as loaded.
    """
    if root is not None:
        read_manifest(root)  # the download is complete and unchanged
    layer = load_model(model, root=root)
    n = layer.W.shape[0]
    classes = np.asarray(shard_range(n, shard, shards), dtype=np.int64)
    script = model.get("script") or ""
    if script and layer.tokens is None:
        raise WeightsError(f"model {model['name']!r} names script {script!r} but no vocabulary file was found: "
                           "set params.vocab")
    frames, seconds, settings, checks, results = [], 0.0, {}, {}, {}
    for box, lower, upper in boxes(layer.activation, detect["bound"], activation_dtype(layer.precision)):
        start = time.perf_counter()
        res = check_categories(layer.W, None if shards == 1 else classes, b=layer.b, bound=detect["bound"],
                               lower=lower, upper=upper, patience=detect["patience"], eps=detect["eps"],
                               solver=detect["solver"], workers=detect["workers"], progress=progress)
        seconds += time.perf_counter() - start
        checks[box] = res.settings  # the core's own record (per-coordinate box), for the table's sidecar
        results[box] = res
        settings[box] = {**res.settings, "lower": lower, "upper": upper}  # scalars, not one per coordinate
        frame = res.to_frame().rename(columns={"item": "category"})
        frame.insert(0, "box", box)
        frames.append(frame)
    frame = pd.concat(frames, ignore_index=True)
    rows = frame["category"].to_numpy()
    stored = layer.raw_tokens or layer.tokens  # the script filter reads the names as the vocabulary stores them
    counted = [in_script(stored[i], script) for i in rows] if script else np.ones(len(frame), bool)
    named = [("token", layer.tokens), ("raw_token", layer.raw_tokens), ("token_type", layer.token_types)]
    at = 2
    for column, values in named:
        if values is not None:
            frame.insert(at, column, [values[i] for i in rows])
            at += 1
    frame.insert(at, "counted", counted)
    facts = {"model": model["name"], "group": model.get("group") or "", "origin": layer.origin, "n": int(n),
             "d": int(layer.W.shape[1]),
             "bias": layer.b is not None, "script": script, "activation": layer.activation,
             "seconds": round(seconds, 3), "settings": settings, "files": [str(f) for f in layer.files],
             "checks": checks, "head": layer.info}
    return frame, facts, results, layer


def boxes(activation: str | None, bound: float, dtype: str = "float32") -> list[tuple[str, float | None, float | None]]:
    """The boxes a model is checked in: (name, lower, upper); the paper's, then its activation's if any, as the
    model computes it in ``dtype`` (:func:`argmaxable.core.activation_bounds`).

    Examples
    --------
    >>> boxes("relu", 100.0)
    [('paper', None, None), ('relu', 0.0, 100.0)]
    >>> boxes(None, 100.0)
    [('paper', None, None)]
    """
    out = [("paper", None, None)]
    if activation not in (None, "", "none", "identity"):
        out.append((str(activation), *activation_bounds(activation, bound, dtype)))
    return out


def _counts(frame) -> dict[str, Any]:
    """The papers' numbers over the rows of ``frame``: potentially unargmaxable, unargmaxable, undecided."""
    proven = frame["steps"].to_numpy() >= 0
    status = frame["status"].to_numpy()
    return {"potentially_unargmaxable": int((~proven).sum()), "unargmaxable": int((status == "unargmaxable").sum()),
            "undecided": int((status == "undecided").sum())}


def _box_record(frame) -> dict[str, Any]:
    """The counts of one box's rows: over the counted categories as the paper reports them (the target
    script's tokens, or all), the same over the whole vocabulary, mean steps, the unargmaxable listed."""
    counted = frame[frame["counted"].to_numpy(dtype=bool)]
    steps = counted["steps"].to_numpy()
    unarg = counted[counted["status"] == "unargmaxable"]
    status = counted["status"].to_numpy()
    return {
        "counts": {s: int((status == s).sum()) for s in ("argmaxable", "unargmaxable", "undecided")},
        "counted": len(counted),
        **_counts(counted),
        "whole_vocabulary": _counts(frame),
        "mean_steps": float(steps[steps >= 0].mean()) if (steps >= 0).any() else float("nan"),
        "max_steps": int(frame["steps"].max()) if len(frame) else 0,
        "unargmaxable_categories": unarg["category"].head(SHOWN).tolist(),
        "unargmaxable_tokens": unarg["token"].head(SHOWN).tolist() if "token" in unarg else [],
    }


def summarise(frame, facts: Mapping, paper: Mapping | None = None) -> dict[str, Any]:
    """The per-model record of a check (whole range): the paper box's counts (:func:`_box_record`) at the
    top level, the activation box's under ``activation_box`` (with its name, lower and upper), or None."""
    if "box" not in frame:  # a table written before boxes existed: the paper box only
        frame = frame.assign(box="paper")
    paper_rows = frame[frame["box"] == "paper"]
    other = frame[frame["box"] != "paper"]
    activation_box = None
    if len(other):
        name = str(other["box"].iloc[0])
        settings = facts["settings"][name]
        activation_box = {"box": name, "lower": settings["lower"], "upper": settings["upper"],
                          **_box_record(other)}
    return {
        **{k: facts.get(k) for k in ("model", "group", "origin", "n", "d", "bias", "script", "activation", "seconds",
                                     "settings")},
        "head": facts.get("head") or {},  # what the file says about the head (GGUF: tied, stored_type, output_norm)
        **_box_record(paper_rows),
        "activation_box": activation_box,
        "paper": dict(paper or {}),
    }


def check_model(model: Mapping, detect: Mapping, table_path: str | os.PathLike, summary_path: str | os.PathLike,
                *, root: str | os.PathLike | None = None, config: Any = None, progress: bool = False,
                evidence_path: str | os.PathLike | None = None) -> dict[str, Any]:
    """Load one model's output layer from local files, check all its categories, write table and summary.

    Parameters
    ----------
    model : mapping
        A model config (name, source, params, script, paper; see :class:`argmaxable.detect.schema.ModelConfig`).
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
    evidence_path : path, optional
        Where to keep the paper box's whole result with its evidence (compact: start-point witnesses are made again
        from the layer, :meth:`~argmaxable.core.CheckResult.load`); renamed into place with the table.

    Returns
    -------
    dict
        The summary.
    """
    frame, facts, results, layer = check_shard(model, detect, root=root, progress=progress)
    evidence = [(evidence_path, lambda tmp: results["paper"].write_npz(tmp, W=layer.W))] if evidence_path else []
    return _write_model(frame, facts, model, table_path, summary_path, facts["files"], config, evidence)


def _write_model(frame, facts, model, table_path, summary_path, inputs, config, companions=()) -> dict[str, Any]:
    write_table(frame, table_path, config=config, inputs=inputs, model=model["name"], origin=facts["origin"],
                check=facts["checks"]["paper"],  # box, eps, tolerances, numeric path and BLAS of each check
                companions=companions,
                **{f"check_{box}": c for box, c in facts["checks"].items() if box != "paper"})
    summary = summarise(frame, facts, model.get("paper"))
    write_json(summary, summary_path)
    return summary


def check_model_shard(model: Mapping, detect: Mapping, shard: int, shards: int, table_path: str | os.PathLike,
                      facts_path: str | os.PathLike, *, root: str | os.PathLike | None = None,
                      config: Any = None, progress: bool = False,
                      evidence_path: str | os.PathLike | None = None) -> None:
    """One class-range job of a sharded check: its rows of the table, the layer's facts (JSON) and, with
    ``evidence_path``, the paper box's result of its range (every witness stored: the merge needs no layer)."""
    frame, facts, results, _ = check_shard(model, detect, root=root, shard=shard, shards=shards, progress=progress)
    evidence = [(evidence_path, results["paper"].write_npz)] if evidence_path else []
    write_table(frame, table_path, config=config, inputs=facts["files"], model=model["name"], shard=shard,
                companions=evidence)
    write_json(facts, facts_path)


def merge_model_shards(model: Mapping, table_paths: Iterable[str | os.PathLike],
                       facts_paths: Iterable[str | os.PathLike], table_path: str | os.PathLike,
                       summary_path: str | os.PathLike, *, config: Any = None,
                       evidence_paths: Iterable[str | os.PathLike] = (),
                       evidence_path: str | os.PathLike | None = None) -> dict[str, Any]:
    """Join the shards of a sharded check into the table and summary a single :func:`check_model` writes (and, from
    the shards' ``evidence_paths``, the whole result at ``evidence_path``, every witness stored)."""
    table_paths, facts_paths = list(table_paths), list(facts_paths)
    frame = pd.concat([pd.read_parquet(p) for p in table_paths], ignore_index=True)
    frame = frame.sort_values(["box", "category"], key=lambda c: c.ne("paper") if c.name == "box" else c,
                              ignore_index=True, kind="stable")
    all_facts = [json.loads(Path(p).read_text()) for p in facts_paths]
    facts = {**all_facts[0], "seconds": round(sum(f["seconds"] for f in all_facts), 3)}
    for box, rows in frame.groupby("box", sort=False):
        if rows["category"].tolist() != list(range(facts["n"])):
            raise ValueError(f"shards of {model['name']!r} do not cover categories 0..{facts['n'] - 1} once each "
                             f"in box {box!r}")
    evidence = []
    if evidence_path:
        whole = concat_results([CheckResult.load(p) for p in evidence_paths])
        evidence = [(evidence_path, whole.write_npz)]
    return _write_model(frame, facts, model, table_path, summary_path, table_paths, config, evidence)


def concat_results(parts: list) -> CheckResult:
    """The results of consecutive class ranges as one result (the first part's kind and settings)."""
    first = parts[0]
    join = {name: np.concatenate([getattr(p, name) for p in parts])
            for name in ("items", "status", "radius", "radius_exact", "steps", "lp_rounds", "witness", "message",
                         "radius_upper")}
    answers = {k: np.concatenate([np.asarray(p.answers[k]) for p in parts]) for k in first.answers}
    certificates = [c for p in parts for c in p.certificates]
    return CheckResult(first.kind, join["items"], join["status"], join["radius"], join["radius_exact"],
                       join["steps"], join["lp_rounds"], join["witness"], join["message"], certificates,
                       first.settings, radius_upper=join["radius_upper"], answers=answers)


COLUMNS = {  # summary key -> column of the detection table (ACL 2022 Tables 4-8 plus our extra evidence)
    "model": "model",
    "box": "box",
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
PAPER_COLUMNS = ["paper table", "paper # potentially unargmaxable", "paper # unargmaxable"]


def _get(record: Mapping, key: str):
    """``record[key]`` where a dotted key reads into nested records."""
    for part in key.split("."):
        record = record[part]
    return record


def box_label(summary: Mapping, box: Mapping | None = None) -> str:
    """How a table names a box: ``paper: -100 <= x_j <= 100``, or the activation's (no ``|``: markdown)."""
    bound = summary["settings"]["paper"]["bound"] if "paper" in summary["settings"] else summary["settings"]["bound"]
    if box is None:
        return f"paper: {-bound:g} <= x_j <= {bound:g}"
    return f"{box['box']}: {box['lower']:.4g} <= x_j <= {box['upper']:.4g}"


def detect_table(summaries: Iterable[Mapping]):
    """The ACL 2022-style table of many models' summaries, one row per model and box, with the papers' numbers
    beside ours (on the paper box's row: the papers used that box only)."""
    rows = []
    for s in summaries:
        paper = s.get("paper") or {}
        un = paper.get("unargmaxable")
        extra = [s["activation_box"]] if s.get("activation_box") else []
        for box in [None, *extra]:
            record = {**s, **(box or {}), "box": box_label(s, box)}
            row = {col: _get(record, key) for key, col in COLUMNS.items()}
            shown = box is None
            row["paper table"] = paper.get("table", "") if shown else ""
            row["paper # potentially unargmaxable"] = paper.get("potentially_unargmaxable", "") if shown else ""
            row["paper # unargmaxable"] = "" if un is None or not shown else str(un)
            rows.append(row)
    return pd.DataFrame(rows, columns=[*COLUMNS.values(), *PAPER_COLUMNS])


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

