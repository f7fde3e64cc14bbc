"""Verify a trained run's label assignments with the Chebyshev LP (thesis §4.1.2, §5.1.3).

Every dev and test gold assignment, and every assignment the model predicts, is checked in up to two spaces:

- ``head``: the classifier W alone, x free in the box |x_j| <= 1e4 (what the thesis verifies);
- ``encoder``: the composite map e -> W (P e + b), i.e. W P with offsets W b, e in the encoder's feature box
  (beyond the thesis: a head box can overstate what the encoder can reach).

Identical assignments are solved once per space, :data:`CHUNK` distinct ones per call of the core: the core
holds each call's assignments as an (m, n) sign matrix, so the label sets stream through it in chunks (BioASQ's
dev and test sets, gold and predicted, would be 30k x 20k at once). The result has one row per (split, source,
space, example). For the heads named in ``verify.regions`` (the DFT: thesis §5.1.3's regions thinner than eps),
the head-space assignments not shown eps-argmaxable also get their region settled exactly (``region``: yes / no,
rational evidence from the core's exact stage; "" where its budget ran out first); ``exact`` says what the exact
stage decided for each row ("radius", "region" or "").

A run resumes where it stopped: each chunk's answers are kept in ``<out>.parts/`` under a key made of everything
they depend on (the package's sources, the weights, the box, the settings and the chunk's label sets), so that a job
stopped after some chunks (BioASQ's 30k sets are about 30 of them) redoes only the others, and a part made by other
code, weights or settings is never read; the folder goes once the table is written.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import shutil
import time
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from argmaxable.core import check_assignments
from argmaxable.multilabel.datasets import load_built
from argmaxable.multilabel.schema import VerifyConfig
from argmaxable.multilabel.witnesses import dft_proposals, is_dft_head
from argmaxable.provenance import atomic_path, source_digest, write_table
from argmaxable.rules import typed
from argmaxable.verify import verify_certificate

log = logging.getLogger(__name__)
CHUNK = 1024  # distinct assignments per call of the core: at BioASQ's n = 20000 its peak is about 0.8 GB
# What a chunk's part holds (``answer:<threshold>`` beside these): the check's arrays, one entry per label set.
PART_ARRAYS = ("status", "radius", "exact", "region")
COLUMNS = ["split", "source", "space", "example", "n_active", "within_k", "status", "radius",
           "eps_argmaxable", "one_argmaxable", "one_undecided", "exact", "region"]


def check_distinct(W: np.ndarray, b: np.ndarray | None, bound: float, assignments: list[tuple[int, ...]],
                   cfg: VerifyConfig, regions: bool = False, k: int | None = None, parts: Path | None = None):
    """Status, radius (certified lower bound or NaN), the per-threshold answers ("eps", "1": yes / no /
    undecided) and what the exact stage settled (``{"exact": ..., "region": ...}``, "" where it did not run) of
    each assignment, solving each distinct assignment once; ``regions``: settle the region of every assignment
    not shown eps-argmaxable; ``k``: where W (without offsets) is a DFT head of k frequencies, each set gets a proposed
    witness from the alternation construction (:mod:`argmaxable.multilabel.witnesses`), which the core checks
    against every row, and the rows its LP starts with where the witness does not close it. The exact stage's
    evidence is re-checked by the independent verifier (a failure stops the run).

    Numerical trouble the exact stage cannot settle comes back as ``undecided`` from the core (never folded into
    either verdict); a :class:`SolverError` (e.g. Gurobi's licence limit) is a failure of the run and propagates.
    ``parts``: a folder where each chunk's answers are kept and, on a later call with the same key
    (:func:`part_keys`), read instead of solved again.
    """
    index: dict[tuple[int, ...], int] = {}
    inverse = np.array([index.setdefault(a, len(index)) for a in assignments], dtype=np.int64)
    distinct = [list(a) for a in index]
    propose = k is not None and b is None and is_dft_head(W, k)
    chunks = [distinct[start : start + CHUNK] for start in range(0, len(distinct), CHUNK)]
    keys = part_keys(W, b, bound, chunks, cfg, regions, k) if parts is not None else [None] * len(chunks)
    solved = []
    for number, (chunk, key) in enumerate(zip(chunks, keys, strict=True), 1):
        t0 = time.perf_counter()
        path = parts / f"{key}.npz" if parts is not None else None
        arrays = _read_part(path, len(chunk)) if path is not None else None
        kept = arrays is not None
        if not kept:
            arrays = _solve_chunk(W, b, bound, chunk, cfg, regions, k if propose else None)
            if path is not None:
                path.parent.mkdir(parents=True, exist_ok=True)
                with atomic_path(path) as tmp, open(tmp, "wb") as fh:
                    np.savez(fh, **arrays)
        solved.append(arrays)
        log.info("chunk %d/%d: %d label sets %s in %.1f s", number, len(chunks), len(chunk),
                 "read from its part" if kept else "checked", time.perf_counter() - t0)
    joined = {name: np.concatenate([a[name] for a in solved])[inverse] for name in solved[0]}
    answers = {name.removeprefix("answer:"): v for name, v in joined.items() if name.startswith("answer:")}
    return (joined["status"].astype(object), joined["radius"], answers,
            {name: joined[name] for name in ("exact", "region")})


def _solve_chunk(W, b, bound: float, chunk: list[list[int]], cfg: VerifyConfig, regions: bool,
                 k: int | None) -> dict[str, np.ndarray]:
    """One chunk's check (with the DFT construction's proposals where ``k`` is given) as plain arrays: status,
    radius, ``answer:<threshold>``, and what the exact stage decided (``exact``, ``region``), its evidence
    re-checked by the independent verifier."""
    proposals, rows = dft_proposals(W, k, chunk) if k is not None else (None, None)
    res = check_assignments(W, chunk, b, bound=bound, eps=cfg.eps, solver=cfg.solver, workers=cfg.workers,
                            regions=regions, proposals=proposals, proposal_rows=rows)
    if res.exact and not verify_certificate(res, W, b, items=chunk, bound=bound, eps=cfg.eps)[list(res.exact)].all():
        raise RuntimeError("the exact stage's rational evidence fails the independent verifier")
    decided, region = np.full(len(res), "", dtype=object), np.full(len(res), "", dtype=object)
    for pos, rec in res.exact.items():
        decided[pos], region[pos] = rec.decided, rec.region
    return {"status": np.asarray(res.status).astype(str), "radius": np.asarray(res.radius, dtype=np.float64),
            **{f"answer:{key}": np.asarray(value).astype(str) for key, value in res.answers.items()},
            "exact": decided.astype(str), "region": region.astype(str)}


def part_keys(W: np.ndarray, b: np.ndarray | None, bound: float, chunks: list[list[list[int]]], cfg: VerifyConfig,
              regions: bool, k: int | None) -> list[str]:
    """Each chunk's key: SHA-256 of everything its answers depend on, the package's sources, W and b (dtype,
    shape, bytes), the box, the verification settings, ``regions`` and k (hashed once), then the chunk's label
    sets in order."""
    common = hashlib.sha256(source_digest().encode())
    for array in (W, b):
        if array is not None:
            common.update(repr((array.dtype.str, array.shape)).encode())
            common.update(np.ascontiguousarray(array).tobytes())
        else:
            common.update(b"none")
    common.update(repr((float(bound).hex(), dataclasses.asdict(cfg), regions, k)).encode())
    keys = []
    for chunk in chunks:
        digest = common.copy()
        digest.update(repr(chunk).encode())
        keys.append(digest.hexdigest())
    return keys


def _read_part(path: Path, size: int) -> dict[str, np.ndarray] | None:
    """A chunk's kept answers, or None where there is no part or it is not one of :func:`_solve_chunk`'s (another
    shape, a missing array, a file cut short): that chunk is checked again."""
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {name: npz[name] for name in npz.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile):
        return None
    answers = [name for name in arrays if name.startswith("answer:")]
    if set(arrays) != {*PART_ARRAYS, *answers} or not answers or any(v.shape != (size,) for v in arrays.values()):
        return None
    return arrays


def verify_arrays(npz: dict[str, np.ndarray], gold: dict[str, list], cfg: VerifyConfig,
                  regions: bool = False, parts: Path | None = None) -> pd.DataFrame:
    """Verify gold and predicted assignments of each split against a run's stored head.

    Parameters
    ----------
    npz : mapping
        The run's ``head.npz``: ``W``, ``WP``, ``Wb``, ``feature_bound``, ``k`` and ragged ``pred_<split>``.
    gold : dict
        Split name -> list of gold label index lists (the splits in ``cfg.splits``).
    cfg : VerifyConfig
    regions : bool
        Settle, exactly, the region of the head-space assignments not shown eps-argmaxable.
    parts : path, optional
        Where each chunk's answers are kept and reused (:func:`check_distinct`).

    Returns
    -------
    pandas.DataFrame
        Columns ``split, source, space, example, n_active, within_k, status, radius, eps_argmaxable,
        one_argmaxable, one_undecided, exact, region``; ``within_k`` marks assignments with at most k active
        labels (the DFT guarantee); an item whose eps answer is undecided has status "undecided".
    """
    items = []  # (split, source, example, assignment)
    for split in cfg.splits:
        flat, offsets = npz[f"pred_{split}"], npz[f"pred_{split}_offsets"]
        pred = [tuple(flat[offsets[i] : offsets[i + 1]].tolist()) for i in range(len(offsets) - 1)]
        items += [(split, "gold", i, tuple(sorted(y))) for i, y in enumerate(gold[split])]
        items += [(split, "pred", i, a) for i, a in enumerate(pred)]
    spaces = {"head": (npz["W"], None, cfg.bound, cfg.splits),
              "encoder": (npz["WP"], npz["Wb"], float(npz["feature_bound"]), cfg.encoder_splits)}
    frames = []
    for space, (W, b, bound, splits) in spaces.items():
        chosen = [it for it in items if it[0] in splits]
        if not chosen:
            continue
        status, radius, answers, exact = check_distinct(W, b, bound, [it[3] for it in chosen], cfg,
                                                        regions=regions and space == "head",
                                                        k=int(npz["k"]) if space == "head" else None, parts=parts)
        frames.append(pd.DataFrame({
            "split": [it[0] for it in chosen], "source": [it[1] for it in chosen], "space": space,
            "example": [it[2] for it in chosen], "n_active": [len(it[3]) for it in chosen],
            "status": status.astype(str), "radius": radius,
            # eps-argmaxable: proved radius > eps; 1-argmaxable: proved radius > 1 (thesis §4.1.2); each answer
            # is yes / no / undecided from certified bounds, and an undecided one is counted as such.
            "eps_argmaxable": answers["eps"] == "yes", "one_argmaxable": answers["1"] == "yes",
            "one_undecided": answers["1"] == "undecided", **exact,
        }))
    out = pd.concat(frames, ignore_index=True)
    out["within_k"] = out["n_active"] <= int(npz["k"])
    return out[COLUMNS]


def verify_run(dataset_dir: str | Path, run_dir: str | Path, out_path: str | Path, *,
               verify: dict | VerifyConfig, head: str = "", config: Any = None) -> pd.DataFrame:
    """Verify one run (``run_dir/head.npz``, a ``head`` head) on the dataset's splits; write the table to
    ``out_path``. Chunks checked by an earlier call that stopped are read from ``<out_path>.parts/``
    (:func:`check_distinct`), which is removed once the table is written."""
    cfg = typed(VerifyConfig, verify)
    dsd, _ = load_built(dataset_dir)
    npz_path = Path(run_dir) / "head.npz"
    parts = Path(f"{out_path}.parts")
    with np.load(npz_path, allow_pickle=False) as npz:
        table = verify_arrays(dict(npz), {s: dsd[s]["labels"] for s in cfg.splits}, cfg,
                              regions=head in cfg.regions, parts=parts)
    write_table(table, out_path, config=config, inputs=[dataset_dir, npz_path])
    shutil.rmtree(parts, ignore_errors=True)
    return table
