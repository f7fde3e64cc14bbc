"""Tables and figure of the small language models: which tokens each d cannot predict, and the head's inputs.

Reads each run's ``train.json`` and activation percentiles (:mod:`argmaxable.lm.train`) and the detection
family's per-category table of the same model (``results/detect/<model>/categories.parquet``), and writes

- ``lm_models``: one row per d and box: perplexity, unargmaxable tokens (count, share, the most frequent named);
- ``lm_unargmaxable_tokens``: every unargmaxable token of every d and box, its frequency rank and training count;
- ``lm_activations``: percentiles of the head's inputs over held-out text, per coordinate and overall;
- ``lm_table9``: ACL 2022 Table 9 / thesis Table A.3 (ranges of the per-position min and max input), the
  paper's two OPUS rows beside ours (a substitute: our small LM, not the paper's models), column ``origin``
  saying which rows are the paper's (the report's values and claims read ours only);
- figure ``lm_unargmaxable_by_rank``: share of unargmaxable tokens per frequency-rank bucket, one line per d
  (the small-d effect: frequent tokens crowd out rare ones); its points are the table ``lm_rank_buckets``.

A detection table with a ``box`` column (the paper's box |x_j| <= 100 and the box the head's activation leaves)
gives one row per box; without it every row is the paper's box.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from argmaxable.provenance import save_figure, write_table

TABLES = ("lm_models", "lm_unargmaxable_tokens", "lm_activations", "lm_table9", "lm_rank_buckets")
FIGURES = ("lm_unargmaxable_by_rank",)
NAMED = 12  # unargmaxable tokens named in lm_models (the most frequent ones; all are in lm_unargmaxable_tokens)
BUCKET = 250  # frequency ranks per bucket of the figure (16 buckets for 4000 tokens)
# ACL 2022 Table 9 as printed: OPUS bg-en and en-ru over 10M sentence pairs; ranges are 1-99 percentile ranges of
# each position's minimum and maximum input, min and max the extremes over everything.
PAPER_TABLE9 = [
    {"model": "bg-en (OPUS-MT)", "min range": "[-37.5, -9.4]", "max range": "[12.1, 40.3]", "min": -57.47,
     "max": 58.87},
    {"model": "en-ru (OPUS-MT)", "min range": "[-41.6, -9.9]", "max range": "[10.9, 36.4]", "min": -95.4,
     "max": 94.4},
]
PAPER_SOURCE = "002 Table 9: paper, 10M OPUS sentence pairs"
OUR_SOURCE = "substitute: our debtags LM (not the paper's models), held-out {split} split, {n} positions"


def unargmaxable_tokens(categories: pd.DataFrame, vocab: pd.DataFrame) -> pd.DataFrame:
    """The unargmaxable rows of a detection table with their token, frequency rank and training count.

    Examples
    --------
    >>> vocab = pd.DataFrame({"token": ["<eos>", "<unk>", "a"], "count": [5, 1, 9], "rank": [2, 3, 1]})
    >>> cats = pd.DataFrame({"category": [0, 1, 2], "status": ["argmaxable", "unargmaxable", "argmaxable"]})
    >>> unargmaxable_tokens(cats, vocab).values.tolist()
    [[1, '<unk>', 3, 1]]
    """
    if len(categories) != len(vocab):
        raise ValueError(f"detection table has {len(categories)} categories but the vocabulary {len(vocab)} "
                         "tokens: they come from different models; rerun check_model")
    rows = categories.loc[categories["status"] == "unargmaxable", "category"].to_numpy()  # one box's rows
    out = vocab.iloc[rows][["token", "rank", "count"]].reset_index(drop=True)
    out.insert(0, "category", rows)
    return out.sort_values("rank", kind="stable").reset_index(drop=True)


def share_by_rank(categories: pd.DataFrame, vocab: pd.DataFrame, bucket: int = BUCKET) -> pd.Series:
    """Share of unargmaxable tokens in each bucket of ``bucket`` frequency ranks (index: first rank)."""
    unarg = (categories["status"] == "unargmaxable").to_numpy()
    first = (vocab["rank"].to_numpy() - 1) // bucket * bucket + 1
    return pd.Series(unarg, index=first).groupby(level=0).mean()


def table9(activations: pd.DataFrame, train: dict[str, Any]) -> dict[str, Any]:
    """Our row of ACL 2022 Table 9 from a run's activation percentiles (needs p1, p99, min and max)."""
    q = activations.set_index("quantity")
    lo, hi = q.loc["min over coordinates"], q.loc["max over coordinates"]
    overall = q.loc["all coordinates"]
    return {"model": train["model"], "origin": "ours",
            "source": OUR_SOURCE.format(split=train["heldout_split"], n=int(lo["values"])),
            "min range": f"[{lo['p1']:.2f}, {lo['p99']:.2f}]", "max range": f"[{hi['p1']:.2f}, {hi['p99']:.2f}]",
            "min": float(overall["min"]), "max": float(overall["max"])}


def by_box(categories: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """A detection table's rows per box (``paper`` first), each in category order."""
    if "box" not in categories:
        return {"paper": categories}
    return {box: rows.sort_values("category").reset_index(drop=True)
            for box, rows in categories.groupby("box", sort=False)}


def _figure(shares: dict[tuple[int, str], pd.Series], n: int):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    colours = {d: f"C{i}" for i, d in enumerate(sorted({d for d, _ in shares}))}
    for (d, box), share in shares.items():
        label = f"d = {d}" + ("" if box == "paper" else f", {box} box")
        ax.plot(share.index + BUCKET / 2, 100 * share.to_numpy(), marker="o", markersize=3, color=colours[d],
                linestyle="-" if box == "paper" else "--", label=label)
    ax.set_xlabel(f"frequency rank of the token (buckets of {BUCKET}; 1 = most frequent)")
    ax.set_ylabel("unargmaxable tokens (%)")
    ax.set_xlim(0, n)
    ax.set_ylim(-2, 102)
    ax.set_title(f"Small debtags LM, {n} word tokens: unargmaxable share by frequency")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    return fig


def _model_row(model: str, box: str, train: dict[str, Any], cats: pd.DataFrame,
               unarg: pd.DataFrame) -> dict[str, Any]:
    """The ``lm_models`` row of one model and box: its run, and its unargmaxable tokens (the most frequent named)."""
    named = ", ".join(f"{t} ({r})" for t, r in zip(unarg["token"][:NAMED], unarg["rank"][:NAMED], strict=True))
    return {"model": model, "d": train["d"], "box": box, "n": train["n"], "activation": train["activation"],
            "parameters": train["parameters"], "train tokens": train["train_tokens"],
            "held-out perplexity": round(train["heldout_perplexity"], 1),
            "# unargmaxable": len(unarg), "% unargmaxable": round(100 * len(unarg) / train["n"], 2),
            "# undecided": int((cats["status"] == "undecided").sum()),
            "median rank of unargmaxable": float(unarg["rank"].median()) if len(unarg) else np.nan,
            "most frequent unargmaxable tokens (rank)": named}


def make_report(models: Sequence[str], vocab_path: str | os.PathLike, model_dirs: Sequence[str | os.PathLike],
                activation_paths: Sequence[str | os.PathLike], category_paths: Sequence[str | os.PathLike],
                table_paths: Sequence[str | os.PathLike], figure_paths: Sequence[str | os.PathLike],
                *, config: Any = None) -> dict[str, pd.DataFrame]:
    """Write the LM tables (each as every path of ``table_paths`` with its stem) and figure.

    Parameters
    ----------
    models : sequence of str
        Model keys, in the order of the three path lists.
    vocab_path : path
        The vocabulary table (token, count, rank) shared by the models.
    model_dirs, activation_paths, category_paths : sequences of paths
        Per model: the run's directory (``train.json``), its activation percentiles, its detection table.
    table_paths, figure_paths : sequences of paths
        Outputs; a table's stem is one of :data:`TABLES`, a figure's one of :data:`FIGURES`.

    Returns
    -------
    dict of pandas.DataFrame
        The tables by stem.
    """
    vocab = pd.read_parquet(vocab_path)
    rows, listed, stats, shares = [], [], [], {}
    t9 = [dict(r, origin="paper", source=PAPER_SOURCE) for r in PAPER_TABLE9]
    for model, run_dir, act_path, cat_path in zip(models, model_dirs, activation_paths, category_paths, strict=True):
        train = json.loads((Path(run_dir) / "train.json").read_text())
        for box, cats in by_box(pd.read_parquet(cat_path)).items():
            unarg = unargmaxable_tokens(cats, vocab)
            rows.append(_model_row(model, box, train, cats, unarg))
            listed.append(unarg.assign(model=model, d=train["d"], box=box))
            shares[train["d"], box] = share_by_rank(cats, vocab)
        act = pd.read_parquet(act_path)
        stats.append(act)
        t9.append(table9(act, train))
    columns = ["model", "d", "box", "category", "token", "rank", "count"]
    tables = {
        "lm_models": pd.DataFrame(rows),
        "lm_unargmaxable_tokens": pd.concat(listed)[columns] if listed else pd.DataFrame(columns=columns),
        "lm_activations": pd.concat(stats, ignore_index=True),
        "lm_table9": pd.DataFrame(t9, columns=["model", "origin", "source", "min range", "max range", "min", "max"]),
        "lm_rank_buckets": pd.DataFrame([{"d": d, "box": box, "bucket": int(first), "share_unargmaxable": float(v)}
                                         for (d, box), share in sorted(shares.items())
                                         for first, v in share.items()]),  # the figure's points
    }
    inputs = [vocab_path, *activation_paths, *category_paths]
    for path in table_paths:
        stem = Path(path).stem
        frame = tables[stem].round(4) if str(path).endswith(".md") else tables[stem]
        write_table(frame, path, config=config, inputs=inputs)
    fig = _figure(dict(sorted(shares.items())), len(vocab))
    for path in figure_paths:
        save_figure(fig, path, config=config, inputs=inputs)
    return tables
