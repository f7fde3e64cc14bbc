"""Thesis Prop. 5.3, verified: the truncated DFT layer without its constant column makes every top-k ranking
argmaxable with d = 2k features, which meets Basri & Jacobs' sign-rank lower bound (Cor. 3: 2m <= d* <= 2m+2).

The thesis leaves this to future work (§5.3). Here every top-k ranking of ``W = W^DFT_{n,2k+1}`` minus its DC
column is checked with the core for small n (all n!/(n-k)! of them), random rankings for large n, and a
Gaussian W of the same shape is checked on the same rankings: it lacks the property.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import asdict, replace

import numpy as np
import pandas as pd

from argmaxable.constructions import dft_ranking_layer
from argmaxable.core import check_rankings, verify_rankings
from argmaxable.outputs import ReproductionError, write_figure, write_tables
from argmaxable.rules import typed
from argmaxable.topm.schema import CheckSettings, TopmConfig


def _rankings(n: int, k: int, samples: int | None, rng: np.random.Generator) -> list[tuple[int, ...]]:
    """All top-k rankings of n tokens, or ``samples`` random ones."""
    if samples is None:
        return list(itertools.permutations(range(n), k))
    return [tuple(rng.choice(n, size=k, replace=False)) for _ in range(samples)]


def _count(W: np.ndarray, rankings, check: CheckSettings) -> dict:
    res = check_rankings(W, rankings, **asdict(check))
    if not verify_rankings(res, W, rankings, bound=check.bound, eps=check.eps).all():
        raise ReproductionError("a top-k ranking verdict failed its float64 certificate check")
    counts = res.counts()
    return {"argmaxable": counts["argmaxable"], "unargmaxable": counts["unargmaxable"],
            "undecided": counts["undecided"], "fraction": counts["argmaxable"] / len(rankings),
            "radius_min": float(np.nanmin(np.where(res.status == "argmaxable", res.radius, np.nan)))
            if counts["argmaxable"] else np.nan}


def ranking_table(cases, *, samples: int | None, seed: int, check: CheckSettings) -> pd.DataFrame:
    """For each (n, k): top-k rankings argmaxable for the DFT layer and a Gaussian layer of shape (n, 2k)."""
    rng = np.random.default_rng(seed)
    rows = []
    for n, k in cases:
        rankings = _rankings(n, k, samples, rng)
        layers = {"dft": dft_ranking_layer(n, k), "gaussian": rng.standard_normal((n, 2 * k))}
        for layer, W in layers.items():
            rows.append({"n": n, "k": k, "d": 2 * k, "layer": layer,
                         "rankings": len(rankings), "exhaustive": samples is None, **_count(W, rankings, check)})
    return pd.DataFrame(rows)


def gaussian_d_table(n: int, k_values, *, matrices: int, seed: int, check: CheckSettings) -> pd.DataFrame:
    """Fraction of all top-k rankings of n tokens argmaxable for Gaussian W (n, d), d = k..n-1, averaged over
    ``matrices`` draws: how far above Cor. 3's d* = 2k a random layer must go."""
    rng = np.random.default_rng(seed)
    rows = []
    for k in k_values:
        rankings = _rankings(n, k, None, rng)
        for d in range(k, n):
            fractions = [_count(rng.standard_normal((n, d)), rankings, check)["fraction"] for _ in range(matrices)]
            rows.append({"n": n, "k": k, "d": d, "rankings": len(rankings), "matrices": matrices,
                         "fraction_mean": float(np.mean(fractions)), "fraction_min": float(np.min(fractions)),
                         "all_argmaxable_share": float(np.mean(np.isclose(fractions, 1.0)))})
    return pd.DataFrame(rows)


def plot_rankings(exhaustive: pd.DataFrame, sampled: pd.DataFrame, by_d: pd.DataFrame, samples: int):
    """Left: share of top-k rankings argmaxable vs d for Gaussian layers, the DFT layer at d = 2k and Cor. 3's
    bracket. Right: DFT vs Gaussian at d = 2k on sampled rankings for large n."""
    import matplotlib.pyplot as plt

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 3.8))
    n = int(by_d["n"].iloc[0])
    for i, (k, sub) in enumerate(by_d.groupby("k")):
        color = f"C{i}"
        ax.plot(sub["d"], sub["fraction_mean"], marker="o", ms=3, color=color, label=f"Gaussian, k = {k}")
        ax.plot([2 * k], [1.0], marker="*", ms=12, color=color, linestyle="none",
                label="DFT minus DC" if i == 0 else None)
        ax.axvspan(2 * k - 0.1, 2 * k + 2 + 0.1, color=color, alpha=0.12)
    ax.set_xlabel("d (features)")
    ax.set_ylabel(f"share of top-k rankings argmaxable (n = {n}, all)")
    ax.set_title("shaded: Basri & Jacobs Cor. 3, 2k <= d* <= 2k + 2", fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    for layer, style in (("dft", "-"), ("gaussian", "--")):
        for i, (k, sub) in enumerate(sampled[sampled["layer"] == layer].groupby("k")):
            bx.plot(sub["n"], sub["fraction"], style, marker="o", ms=3, color=f"C{i}",
                    label=f"{'DFT minus DC' if layer == 'dft' else 'Gaussian'}, k = {k}")
    bx.set_xscale("log", base=2)
    bx.set_xlabel("n (categories), d = 2k")
    bx.set_ylabel(f"share argmaxable ({samples} random rankings)")
    bx.legend(fontsize=6, ncol=2)
    bx.grid(alpha=0.3)
    ex = exhaustive[exhaustive["layer"] == "dft"]
    fig.suptitle(f"Thesis Prop. 5.3: DFT layer, every top-k ranking argmaxable "
                 f"({int(ex['rankings'].sum())} checked exhaustively, n <= {int(ex['n'].max())})", fontsize=10)
    fig.tight_layout()
    return fig


def run_rankings(settings: TopmConfig | Mapping, out: dict, *, seed: int, config=None) -> None:
    """Rule ``check_dft_rankings``: Prop. 5.3 exhaustively (fails loudly on any unargmaxable DFT ranking),
    sampled for large n, Gaussian layers vs d, and the figure.

    Sampled rankings of large n are reported, not asserted: the DFT regions shrink fast with n (thesis Fig. 5.5)
    and may fall below the LP's eps while still non-empty.

    Parameters
    ----------
    settings : TopmConfig or mapping
        The ``topm`` blocks ``ranking`` and ``check`` (core keywords; ``bound`` comes from ``topm.ranking``).
    out : dict
        Paths: ``exhaustive``, ``sampled``, ``by_d`` (.parquet, .md beside), ``figure`` (.png).
    """
    topm = typed(TopmConfig, settings)
    ranking, check = topm.ranking, replace(topm.check, bound=topm.ranking.bound)
    cases = [(n, k) for n in ranking.exhaustive_n for k in range(1, (n - 2) // 2 + 1)]  # d = 2k < n - 1
    exhaustive = ranking_table(cases, samples=None, seed=seed, check=check)
    big = [(n, k) for n in ranking.sampled_n for k in ranking.k_values if 2 * k < n - 1]
    sampled = ranking_table(big, samples=ranking.samples, seed=seed + 1, check=check)
    failed = exhaustive[(exhaustive["layer"] == "dft") & (exhaustive["argmaxable"] < exhaustive["rankings"])]
    if len(failed):
        raise ReproductionError(f"thesis Prop. 5.3 (every top-k ranking of the DFT layer argmaxable) fails:\n{failed}")
    by_d = gaussian_d_table(ranking.by_d_n, ranking.by_d_k, matrices=ranking.matrices, seed=seed + 2,
                            check=check)
    write_tables({"exhaustive": exhaustive, "sampled": sampled, "by_d": by_d}, out, config)
    write_figure(plot_rankings(exhaustive, sampled, by_d, ranking.samples), out["figure"], config)

