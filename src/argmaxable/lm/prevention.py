"""Prevention on real text: the small LM trained with heads that cannot lose tokens, checked, beside the plain head.

Rule ``train_lm_head`` trains the window LM with a head of :mod:`argmaxable.layers` (:data:`~argmaxable.lm.schema.HEADS`
``spherical``, rows on a sphere without bias, thesis §5.2.1; ``dft``, the DFT head with k = d/2, Prop. 5.3;
``dft_slack``, k = d/4 and d/2 slack columns);
rule ``check_lm_head`` (:func:`check_head`) checks every token of the trained head with the core and, for a DFT
head, a sample of top-k rankings, and re-verifies every certificate; rule ``make_lm_prevention`` (:func:`make_table`)
sets them beside the plain runs of the same widths (their ``train.json`` and the detection family's check) in

- table ``lm_prevention``: per head and d, held-out perplexity and the unargmaxable tokens (the paper's box
  |x_j| <= 100, the box of the plain heads' counts) and sampled rankings;
- figure ``lm_prevention``: held-out perplexity vs d, one line per head, each point annotated with its
  unargmaxable tokens.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from argmaxable.core import check_categories, check_rankings, verify_rankings
from argmaxable.provenance import save_figure, write_table
from argmaxable.verify import verify_certificate

TABLE = "lm_prevention"
FIGURE = "lm_prevention"
LABELS = {"linear": "plain nn.Linear", "spherical": "spherical, no bias (§5.2.1)", "dft": "DFT, k = d/2 (Prop. 5.3)",
          "dft_slack": "DFT, k = d/4, d/2 slack"}


def _load_head(run_dir: Path) -> tuple[np.ndarray, np.ndarray | None]:
    from safetensors.numpy import load_file

    tensors = load_file(str(run_dir / "head.safetensors"))
    return tensors["weight"].astype(np.float64), tensors.get("bias")


def _counts(res) -> dict[str, int]:
    return {status: int(v) for status, v in res.counts().items()}


def check_head(run_dir: str | os.PathLike, out_path: str | os.PathLike, *, rankings: int, seed: int,
               check: Mapping, config: Any = None) -> pd.DataFrame:
    """Check every token of a trained head (and, for a DFT head, ``rankings`` random top-k rankings).

    Parameters
    ----------
    run_dir : path
        A run of :func:`argmaxable.lm.train.train_lm` (``head.safetensors``, ``train.json``).
    out_path : path
        One-row table (.parquet/.csv): counts per status, whether every certificate held, seconds.
    rankings : int
        Top-k rankings sampled (distinct tokens, uniformly) for a DFT head (k: its ``train.json``); 0 for none.
    seed : int
        Seed of the sample.
    check : mapping
        Keywords of the core's checks (bound, eps, patience, solver, workers).

    Returns
    -------
    pandas.DataFrame
    """
    run_dir = Path(run_dir)
    train = json.loads((run_dir / "train.json").read_text())
    W, b = _load_head(run_dir)
    start = time.perf_counter()
    res = check_categories(W, b=b, **check)
    box = {key: check[key] for key in ("bound", "eps") if key in check}  # verified where it was checked
    row = {"model": train["model"], "head": train["head"], "d": train["d"], "n": W.shape[0],
           **{f"tokens {s}": c for s, c in _counts(res).items()},
           "token certificates verified": bool(verify_certificate(res, W, b, **box).all())}
    if train["k"] and rankings:
        k = train["k"]
        rng = np.random.default_rng(seed)
        sample = [rng.choice(W.shape[0], size=k, replace=False).tolist() for _ in range(rankings)]
        ranked = check_rankings(W, sample, b, **check)
        row |= {"ranking k": k, "rankings sampled": rankings,
                **{f"rankings {s}": c for s, c in _counts(ranked).items()},
                "ranking certificates verified": bool(verify_rankings(ranked, W, sample, b, **box).all())}
    row["check seconds"] = round(time.perf_counter() - start, 1)
    table = pd.DataFrame([row])
    write_table(table, out_path, config=config, inputs=[run_dir / "head.safetensors"], check=dict(check))
    return table


def _plain_row(run_dir: Path, categories_path: Path) -> dict[str, Any]:
    """A plain run as a row of the table: its ``train.json`` and the detection family's check in the paper's box."""
    train = json.loads((run_dir / "train.json").read_text())
    cats = pd.read_parquet(categories_path)
    if "box" in cats:
        cats = cats[cats["box"] == "paper"]
    status = cats["status"].value_counts()
    return {"model": train["model"], "head": "linear", "d": train["d"], "n": train["n"],
            **{f"tokens {s}": int(status.get(s, 0)) for s in ("argmaxable", "unargmaxable", "undecided")}}


def _point_label(row: pd.Series) -> str:
    """A point's note in the figure: tokens lost and, for a head whose rankings were sampled, those proven."""
    label = f"{int(row['tokens unargmaxable'])} lost"
    if pd.notna(row.get("rankings sampled")):
        label += f", rankings {int(row.get('rankings argmaxable', 0) or 0)}/{int(row['rankings sampled'])}"
    return label


def _figure(table: pd.DataFrame):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.4, 4.6))
    for i, (head, rows) in enumerate(table.groupby("head", sort=False)):
        rows = rows.sort_values("d")
        ax.plot(rows["d"], rows["held-out perplexity"], marker="o", color=f"C{i}", label=LABELS.get(head, head))
        for _, row in rows.iterrows():
            below = -12 if head == "linear" else 5  # the plain head is the lowest line
            ax.annotate(_point_label(row), (row["d"], row["held-out perplexity"]), textcoords="offset points",
                        xytext=(5, below), fontsize=7, color=f"C{i}")
    ax.set_xscale("log", base=2)
    ax.margins(x=0.15)
    if table["held-out perplexity"].max() > 4 * table["held-out perplexity"].min():
        ax.set_yscale("log")
    ds = sorted(table["d"].unique())
    ax.set_xticks(ds, [str(d) for d in ds])
    ax.set_xlabel("d (width of the softmax head's input)")
    ax.set_ylabel("held-out perplexity")
    n = int(table["n"].iloc[0])
    ax.set_title(f"Small debtags LM, {n} tokens: held-out perplexity per head and d\n(lost: tokens that can never "
                 "be the argmax, inputs |x_j| <= 100; a DFT head's sampled top-k rankings: proven argmaxable /\n"
                 "sampled, the rest too thin for the LP's eps, argmaxable by Prop. 5.3)", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def make_table(plain_dirs: Sequence[str | os.PathLike], plain_categories: Sequence[str | os.PathLike],
               head_dirs: Sequence[str | os.PathLike], head_checks: Sequence[str | os.PathLike],
               table_paths: Sequence[str | os.PathLike], figure_paths: Sequence[str | os.PathLike],
               *, config: Any = None) -> pd.DataFrame:
    """Write table and figure ``lm_prevention``: the plain runs beside the runs with guaranteed heads.

    Parameters
    ----------
    plain_dirs, plain_categories : sequences of paths
        Per plain run (rule ``train_lm``): its directory and the detection family's ``categories.parquet``.
    head_dirs, head_checks : sequences of paths
        Per run of rule ``train_lm_head``: its directory and its :func:`check_head` table.
    table_paths, figure_paths : sequences of paths
        Outputs (table .parquet/.csv/.md; figure .png/.pdf).
    """
    rows = [_plain_row(Path(r), Path(c)) for r, c in zip(plain_dirs, plain_categories, strict=True)]
    rows += [pd.read_parquet(c).iloc[0].to_dict() for c in head_checks]
    for row, run_dir in zip(rows, [*plain_dirs, *head_dirs], strict=True):
        train = json.loads((Path(run_dir) / "train.json").read_text())
        row |= {"held-out perplexity": round(train["heldout_perplexity"], 1),
                "head parameters": train["head_parameters"],
                "train cpu seconds": train["cpu_seconds"]}
    order = {h: i for i, h in enumerate(LABELS)}
    table = pd.DataFrame(rows)
    table = table.sort_values(["head", "d"], key=lambda s: s.map(order) if s.name == "head" else s, kind="stable")
    first = ["head", "d", "n", "held-out perplexity", "tokens unargmaxable", "tokens undecided", "tokens argmaxable"]
    table = table[first + [c for c in table.columns if c not in first]].reset_index(drop=True)
    inputs = [*plain_categories, *head_checks]
    for path in table_paths:
        write_table(table, path, config=config, inputs=inputs)
    fig = _figure(table)
    for path in figure_paths:
        save_figure(fig, path, config=config, inputs=inputs)
    return table
