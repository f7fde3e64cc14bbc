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
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from argmaxable.core import check_assignments
from argmaxable.multilabel.datasets import load_built
from argmaxable.multilabel.schema import VerifyConfig
from argmaxable.multilabel.witnesses import dft_proposals, is_dft_head
from argmaxable.provenance import write_table
from argmaxable.rules import typed
from argmaxable.verify import verify_certificate

CHUNK = 1024  # distinct assignments per call of the core: at BioASQ's n = 20000 its peak is about 0.8 GB
COLUMNS = ["split", "source", "space", "example", "n_active", "within_k", "status", "radius",
           "eps_argmaxable", "one_argmaxable", "one_undecided", "exact", "region"]


def check_distinct(W: np.ndarray, b: np.ndarray | None, bound: float, assignments: list[tuple[int, ...]],
                   cfg: VerifyConfig, regions: bool = False, k: int | None = None):
    """Status, radius (certified lower bound or NaN), the per-threshold answers ("eps", "1": yes / no /
    undecided) and what the exact stage settled (``{"exact": ..., "region": ...}``, "" where it did not run) of
    each assignment, solving each distinct assignment once; ``regions``: settle the region of every assignment
    not shown eps-argmaxable; ``k``: where W (without offsets) is a DFT head of k frequencies, each set gets a proposed
    witness from the alternation construction (:mod:`argmaxable.multilabel.witnesses`), which the core checks
    against every row, and the rows its LP starts with where the witness does not close it. The exact stage's
    evidence is re-checked by the independent verifier (a failure stops the run).

    Numerical trouble the exact stage cannot settle comes back as ``undecided`` from the core (never folded into
    either verdict); a :class:`SolverError` (e.g. Gurobi's licence limit) is a failure of the run and propagates.
    """
    index: dict[tuple[int, ...], int] = {}
    inverse = np.array([index.setdefault(a, len(index)) for a in assignments], dtype=np.int64)
    distinct = [list(a) for a in index]
    status, radius, answers, exact = [], [], {}, {"exact": [], "region": []}
    propose = k is not None and b is None and is_dft_head(W, k)
    for start in range(0, len(distinct), CHUNK):
        chunk = distinct[start : start + CHUNK]
        proposals, rows = dft_proposals(W, k, chunk) if propose else (None, None)
        res = check_assignments(W, chunk, b, bound=bound, eps=cfg.eps, solver=cfg.solver, workers=cfg.workers,
                                regions=regions, proposals=proposals, proposal_rows=rows)
        if res.exact and not verify_certificate(res, W, b, items=chunk, bound=bound,
                                                eps=cfg.eps)[list(res.exact)].all():
            raise RuntimeError("the exact stage's rational evidence fails the independent verifier")
        status.append(np.asarray(res.status, dtype=object))
        radius.append(np.asarray(res.radius, dtype=np.float64))
        for key, value in res.answers.items():
            answers.setdefault(key, []).append(np.asarray(value))
        decided, region = np.full(len(res), "", dtype=object), np.full(len(res), "", dtype=object)
        for pos, rec in res.exact.items():
            decided[pos], region[pos] = rec.decided, rec.region
        exact["exact"].append(decided)
        exact["region"].append(region)
    status_all, radius_all = np.concatenate(status), np.concatenate(radius)
    return (status_all[inverse], radius_all[inverse], {k: np.concatenate(v)[inverse] for k, v in answers.items()},
            {k: np.concatenate(v)[inverse].astype(str) for k, v in exact.items()})


def verify_arrays(npz: dict[str, np.ndarray], gold: dict[str, list], cfg: VerifyConfig,
                  regions: bool = False) -> pd.DataFrame:
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
                                                        k=int(npz["k"]) if space == "head" else None)
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
    ``out_path``."""
    cfg = typed(VerifyConfig, verify)
    dsd, _ = load_built(dataset_dir)
    npz_path = Path(run_dir) / "head.npz"
    with np.load(npz_path, allow_pickle=False) as npz:
        table = verify_arrays(dict(npz), {s: dsd[s]["labels"] for s in cfg.splits}, cfg,
                              regions=head in cfg.regions)
    write_table(table, out_path, config=config, inputs=[dataset_dir, npz_path])
    return table
