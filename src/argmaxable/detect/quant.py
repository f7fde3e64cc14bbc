"""Quantisation study (beyond the papers): does storing a head in fewer bits create or remove unargmaxable tokens?

For each GGUF head and each type the ``gguf`` package can quantise in numpy (:data:`TYPES`: Q8_0 and the legacy
4- and 5-bit block types), the dequantised head is quantised again with ``gguf.quants.quantize``, dequantised
with ``gguf.quants.dequantize`` (both as llama.cpp defines the formats), checked in the paper's box, and each
token's status compared with the check of the file's own head (the ``check_model`` table). The source is itself
quantised (the released heads are Q8_0: 8 bits plus one fp16 scale per 32 values), so this measures going
further down from 8 bits, not from the trained float weights.

A requantised head equal to the source bit for bit has the source's statuses by definition: it is recorded as
identical and not checked again (Q8_0 of a Q8_0 head is: every block's scale and values come back unchanged).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from argmaxable.core import check_categories
from argmaxable.detect.loaders import Layer, load_model
from argmaxable.provenance import write_json, write_table

# Types gguf.quants quantises in numpy, with their bits per weight (block values plus per-block scale/min).
TYPES = {"Q8_0": 8.5, "Q5_1": 6.0, "Q5_0": 5.5, "Q4_1": 5.0, "Q4_0": 4.5}


def requantize(W: np.ndarray, qtype: str) -> np.ndarray:
    """``W`` (n, d) quantised to ``qtype`` and dequantised again, float32, as llama.cpp stores and reads it.

    Examples
    --------
    >>> W = np.linspace(-1, 1, 64, dtype=np.float32).reshape(2, 32)
    >>> bool(np.abs(requantize(W, "Q4_0") - W).max() <= 1 / 16)  # half a step (1/8) of a block whose max is 1
    True
    """
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize, quantize

    if qtype not in TYPES:
        raise ValueError(f"quantisation type must be one of {list(TYPES)}; got {qtype!r}")
    kind = GGMLQuantizationType[qtype]
    W = np.ascontiguousarray(W, dtype=np.float32)
    return np.ascontiguousarray(dequantize(quantize(W, kind), kind), dtype=np.float32)


def tied_rows(W: np.ndarray) -> int:
    """Rows of ``W`` that equal another row exactly (members of groups of equal rows)."""
    rows = np.ascontiguousarray(W).view(np.dtype((np.void, W.dtype.itemsize * W.shape[1]))).ravel()
    _, counts = np.unique(rows, return_counts=True)
    return int(counts[counts > 1].sum())


def quant_study(model: Mapping, detect: Mapping, source_table: str | os.PathLike, *, types: Sequence[str],
                root: str | os.PathLike | None = None) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """Requantise one model's head to each of ``types``, check it and compare with the source's statuses.

    Parameters
    ----------
    model, detect : mapping
        The model config and the detection settings (bound, patience, eps, solver, workers) of ``check_model``.
    source_table : path
        The model's per-category table from ``check_model`` (its ``paper`` box rows are the source's statuses).
    types : list of str
        Keys of :data:`TYPES`.
    root : path, optional
        The model's downloaded directory.

    Returns
    -------
    changed : DataFrame
        One row per token whose status differs from the source's: model, type, category, token, token_type,
        source_status, status, message.
    records : list of dict
        Per type: model, type, bits per weight, identical (bit for bit), max |dW|, relative error (Frobenius),
        tied rows, unargmaxable in the source and after, became unargmaxable, became argmaxable, undecided,
        seconds.
    """
    layer = load_model(model, root=root)
    source = pd.read_parquet(source_table)
    if "box" in source:
        source = source[source["box"] == "paper"]
    source = source.set_index("category").sort_index()
    if len(source) != layer.W.shape[0]:
        raise ValueError(f"{source_table}: {len(source)} categories for a head of {layer.W.shape[0]} rows")
    before = source["status"].to_numpy()
    norm = float(np.linalg.norm(layer.W))
    frames, records = [], []
    for qtype in types:
        changed, record = _study_type(model["name"], layer, norm, before, qtype, detect)
        frames.append(changed)
        records.append(record)
    return pd.concat(frames, ignore_index=True), records


# The quantisation table's columns in reading order (the records come back from JSON with their keys sorted).
COLUMNS = ("model", "type", "bits per weight", "identical", "max |dW|", "relative error", "tied rows",
           "source # unargmaxable", "# unargmaxable", "became unargmaxable", "became argmaxable", "# undecided",
           "seconds", "source type")


def _study_type(name: str, layer: Layer, norm: float, before: np.ndarray, qtype: str, detect: Mapping
                ) -> tuple[pd.DataFrame, dict[str, Any]]:
    """One type of :func:`quant_study`: the head (Frobenius norm ``norm``) requantised to ``qtype`` and checked
    unless it equals the source bit for bit; its tokens whose status differs from ``before`` (the source's) and
    its record."""
    start = time.perf_counter()
    Wq = requantize(layer.W, qtype)
    identical = bool(np.array_equal(Wq, layer.W))
    if identical:
        after, message = before, np.full(len(before), "", dtype=object)
    else:
        res = check_categories(Wq, b=layer.b, bound=detect["bound"], patience=detect["patience"],
                               eps=detect["eps"], solver=detect["solver"], workers=detect["workers"])
        after, message = res.status, np.asarray(res.message, dtype=object)
    changed = np.flatnonzero(after != before)
    frame = pd.DataFrame({
        "model": name, "type": qtype, "category": changed,
        "token": [layer.tokens[i] for i in changed] if layer.tokens is not None else "",
        "token_type": [layer.token_types[i] for i in changed] if layer.token_types is not None else "",
        "source_status": before[changed], "status": after[changed], "message": message[changed]})
    record = {
        "model": name, "type": qtype, "bits per weight": TYPES[qtype], "identical": identical,
        "max |dW|": float(np.abs(Wq - layer.W).max()),
        "relative error": float(np.linalg.norm(Wq - layer.W) / norm) if norm else 0.0,
        "tied rows": tied_rows(Wq),
        "source # unargmaxable": int((before == "unargmaxable").sum()),
        "# unargmaxable": int((after == "unargmaxable").sum()),
        "became unargmaxable": int(((after == "unargmaxable") & (before != "unargmaxable")).sum()),
        "became argmaxable": int(((after == "argmaxable") & (before != "argmaxable")).sum()),
        "# undecided": int((after == "undecided").sum()),
        "seconds": round(time.perf_counter() - start, 3),
        "source type": layer.info.get("stored_type", ""),
    }
    return frame, record


def run_quant_study(model: Mapping, detect: Mapping, source_table: str | os.PathLike, types: Sequence[str],
                    changes_path: str | os.PathLike, summary_path: str | os.PathLike, *,
                    root: str | os.PathLike | None = None, config: Any = None) -> list[dict[str, Any]]:
    """:func:`quant_study` for one model, writing the changed tokens (table) and the per-type records (JSON)."""
    changed, records = quant_study(model, detect, source_table, types=types, root=root)
    write_table(changed, changes_path, config=config, inputs=[source_table], model=model["name"])
    write_json(records, summary_path)
    return records


def make_quant_table(summary_paths: Iterable[str | os.PathLike], changes_paths: Iterable[str | os.PathLike],
                     out_paths: Iterable[str | os.PathLike], changes_out: Iterable[str | os.PathLike], *,
                     config: Any = None) -> pd.DataFrame:
    """Gather the models' records into one table (a row per model and type) and their changed tokens into
    another, each written to every path given (.parquet/.md)."""
    summary_paths, changes_paths = list(summary_paths), list(changes_paths)
    table = pd.DataFrame([r for p in summary_paths for r in json.loads(Path(p).read_text())])
    table = table[[c for c in COLUMNS if c in table] + [c for c in table if c not in COLUMNS]]  # JSON sorts keys
    changes = pd.concat([pd.read_parquet(p) for p in changes_paths], ignore_index=True)
    for path in out_paths:
        write_table(table, path, config=config, inputs=summary_paths)
    for path in changes_out:
        write_table(changes, path, config=config, inputs=changes_paths)
    return table
