"""Random softmax layers: ACL 2022 Fig. 10 / thesis Fig. A.6, and the approximate stage against exact answers.

- Sweep: W (n x d) and b (n) ~ U(-1, 1); for each d, the steps the braid-reflect stage needs per category and
  which categories are unargmaxable. ACL 2022 §5: "we do not expect unargmaxable tokens to exist after d = 30".
- Qhull cross-check (the reference code's stolen-probability idea, the ACL submission §2: an approximate
  detector scored by precision and recall against Qhull): without a bias, category t is argmaxable iff w_t is a
  vertex of the convex hull of the rows (ACL 2022 §2.2, after Demeter et al.). The core's verdicts must equal
  Qhull's; the approximate stage's "potentially unargmaxable" flags (not proven within the patience) are scored
  by precision and recall.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from argmaxable.constructions import random_layer
from argmaxable.core import check_categories
from argmaxable.outputs import ReproductionError, write_figure, write_tables
from argmaxable.provenance import panel_grid, write_table
from argmaxable.rules import typed
from argmaxable.theory.schema import RandomLayersConfig

# ACL 2022 §5 / thesis §4.2.4: with n = 10000 and U(-1, 1) weights no unargmaxable token is expected from d = 30.
ZERO_FROM_D = 30


def check_random_layer(settings: RandomLayersConfig, d: int, *, seed: int) -> pd.DataFrame:
    """Check every category of one random layer; one row per category (status, steps, radius)."""
    W, b = random_layer(settings.n, d, low=settings.low, high=settings.high, bias=settings.bias,
                        seed=seed)
    res = check_categories(W, b=b, bound=settings.bound, patience=settings.patience,
                           eps=settings.eps, workers=settings.workers)
    df = res.to_frame()[["item", "status", "steps", "radius"]]
    df.insert(0, "d", d)
    return df


def summarize(frames: list[pd.DataFrame], patience: int) -> pd.DataFrame:
    """Per d: counts per status, categories the approximate stage could not prove, and its steps."""
    rows = []
    for df in frames:
        proven = df["steps"] >= 0
        rows.append({"d": int(df["d"].iloc[0]), "n": len(df),
                     "argmaxable": int((df["status"] == "argmaxable").sum()),
                     "unargmaxable": int((df["status"] == "unargmaxable").sum()),
                     "undecided": int((df["status"] == "undecided").sum()),
                     "approx_unproven": int((~proven).sum()), "patience": patience,
                     "mean_steps": float(df.loc[proven, "steps"].mean()) if proven.any() else np.nan,
                     "max_steps": int(df.loc[proven, "steps"].max()) if proven.any() else -1})
    return pd.DataFrame(rows).sort_values("d").reset_index(drop=True)


def plot_sweep(frames: list[pd.DataFrame], patience: int):
    """ACL 2022 Fig. 10: steps per category index, red at the top for unargmaxable, orange for LP-proven."""
    frames = sorted(frames, key=lambda f: int(f["d"].iloc[0]))
    fig, axes = panel_grid(len(frames), 4, 2.8, sharey=True)
    top = patience * 1.2 + 1
    for ax, df in zip(axes.ravel(), frames, strict=False):
        proven = df["steps"] >= 0
        lp_proven = ~proven & (df["status"] == "argmaxable")
        unarg = df["status"] == "unargmaxable"
        ax.scatter(df.loc[proven, "item"], df.loc[proven, "steps"], s=1, color="tab:blue", label="steps")
        ax.scatter(df.loc[lp_proven, "item"], np.full(lp_proven.sum(), patience), s=2, color="tab:orange",
                   label="argmaxable (exact LP)")
        ax.scatter(df.loc[unarg, "item"], np.full(unarg.sum(), top), s=2, color="tab:red",
                   label="unargmaxable")
        ax.set_ylim(0, top * 1.05)  # linear: step counts start at 1 and the red marks sit at the top
        ax.set_title(f"d = {int(df['d'].iloc[0])}: {int(unarg.sum())} unargmaxable", fontsize=9)
        ax.set_xlabel("category")
    for ax in axes[:, 0]:
        ax.set_ylabel("braid-reflect steps")
    axes[0, 0].legend(fontsize=7, markerscale=4)
    n = len(frames[0])
    fig.suptitle(f"ACL 2022 Fig. 10 / thesis Fig. A.6: random softmax layers, {n} classes, W, b ~ U(-1, 1), "
                 f"patience {patience}", fontsize=9)
    fig.tight_layout()
    return fig


def qhull_table(settings: RandomLayersConfig, *, seed: int) -> pd.DataFrame:
    """Per d: the core's verdicts against Qhull's hull vertices; the approximate stage's precision/recall."""
    from scipy.spatial import ConvexHull

    rows = []
    for d in settings.qhull_d_values:
        W, _ = random_layer(settings.qhull_n, d, low=settings.low, high=settings.high, bias=False,
                            seed=seed)
        vertex = np.zeros(len(W), dtype=bool)
        vertex[ConvexHull(W).vertices] = True  # exact oracle: argmaxable iff a hull vertex
        res = check_categories(W, bound=settings.bound, patience=settings.patience,
                               eps=settings.eps, workers=settings.workers)
        flagged = res.steps < 0  # the approximate stage alone calls these "potentially unargmaxable"
        truth = ~vertex
        tp = int((flagged & truth).sum())
        rows.append({"d": d, "n": len(W), "qhull_unargmaxable": int(truth.sum()),
                     "core_unargmaxable": int((res.status == "unargmaxable").sum()),
                     "core_disagrees": int(((res.status == "argmaxable") != vertex).sum()),
                     "approx_flagged": int(flagged.sum()),
                     "approx_precision": tp / flagged.sum() if flagged.any() else 1.0,
                     "approx_recall": tp / truth.sum() if truth.any() else 1.0})
    return pd.DataFrame(rows)


def run_random_layer(settings: RandomLayersConfig | Mapping, d: int, out: str, *, seed: int, config=None) -> None:
    """Rule ``check_random_layer``: one d of the sweep, one row per category, to ``out`` (.parquet)."""
    settings = typed(RandomLayersConfig, settings)
    write_table(check_random_layer(settings, d, seed=seed), out, config=config)


def run_random_summary(settings: RandomLayersConfig | Mapping, inputs: list[str], out: dict, *, seed: int,
                       config=None) -> None:
    """Rule ``summarize_random_layers``: sweep table and figure, and the Qhull cross-check (fails loudly).

    Parameters
    ----------
    settings : RandomLayersConfig or mapping
        ``theory.random_layers``.
    inputs : list of str
        Per-d tables written by :func:`run_random_layer`.
    out : dict
        Paths: ``summary``, ``qhull`` (.parquet, .md beside), ``figure`` (.png, .pdf beside).
    """
    settings = typed(RandomLayersConfig, settings)
    frames = [pd.read_parquet(p) for p in inputs]
    summary = summarize(frames, settings.patience)
    late = summary[(summary["d"] >= ZERO_FROM_D) & (summary["unargmaxable"] > 0)]
    if len(late):
        raise ReproductionError(f"002 §5 expects no unargmaxable category from d = {ZERO_FROM_D}; "
                                f"found:\n{late}")
    qhull = qhull_table(settings, seed=seed)
    bad = qhull[(qhull["core_disagrees"] > 0) | (qhull["approx_recall"] < 1.0)]
    if len(bad):
        raise ReproductionError(f"the core (or the one-sided approximate stage) disagrees with Qhull:\n{bad}")
    write_tables({"summary": summary, "qhull": qhull}, out, config, inputs=inputs)
    write_figure(plot_sweep(frames, settings.patience), out["figure"], config)
