"""Geometry of the truncated DFT layer: thesis Thm 5.3 / Prop. 5.1, Fig. 5.4 and Fig. 5.5.

- Alternation: for W = W^DFT_{n,2k+1} the argmaxable assignments are exactly those with at most 2k sign
  changes (thesis Thm 5.3 with Prop. 5.1); checked on all 2^n assignments for small n.
- Fig. 5.4: decision regions of W^DFT_{n,3} for n = 3, 4, 5 on the plane x_0 = -1 (the DC coordinate), where
  the all-inactive region sits in the middle and the n single-active regions around it.
- Fig. 5.5: the 1% quantile of the Chebyshev radius of random k-active assignments as n grows, for the DFT
  layer alone and with 16 random slack columns (thesis Prop. 5.2: slack keeps every assignment argmaxable);
  the regions of those the LP does not show eps-argmaxable are settled exactly (thinner than eps, or empty).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from argmaxable.constructions import dft_matrix
from argmaxable.core import check_assignments
from argmaxable.outputs import ReproductionError, write_figure, write_tables
from argmaxable.rules import typed
from argmaxable.theory.cover import all_assignments
from argmaxable.theory.schema import DftConfig
from argmaxable.verify import verify_certificate


def alternations(Y: np.ndarray) -> np.ndarray:
    """Sign changes of each row read left to right (thesis Def. 5.1.3, first and last not compared)."""
    return (Y[:, 1:] != Y[:, :-1]).sum(axis=1)


def alternation_table(max_n: int, *, bound: float, eps: float) -> pd.DataFrame:
    """For n = 3..max_n and each k with 2k+1 <= n: argmaxable assignments of W^DFT vs alt(y) <= 2k."""
    rows = []
    for n in range(3, max_n + 1):
        Y = all_assignments(n)
        predicted = alternations(Y)
        for k in range(1, (n - 1) // 2 + 1):
            res = check_assignments(dft_matrix(n, k), Y, bound=bound, eps=eps, workers=1)
            found = res.status == "argmaxable"
            expected = predicted <= 2 * k
            rows.append({"n": n, "k": k, "argmaxable": int(found.sum()), "alternating": int(expected.sum()),
                         "mismatches": int((found != expected).sum()),
                         "undecided": int((res.status == "undecided").sum())})
    return pd.DataFrame(rows)


def sample_k_active(n: int, k: int, samples: int, rng: np.random.Generator) -> np.ndarray:
    """``samples`` assignments with exactly k active labels chosen uniformly, as bool (samples, n)."""
    Y = np.zeros((samples, n), dtype=bool)
    for row in Y:
        row[rng.choice(n, size=k, replace=False)] = True
    return Y


def radius_table(n_values, k_values, *, slack: int, samples: int, quantile: float, seed: int, bound: float,
                 eps: float) -> pd.DataFrame:
    """Radius quantile of random k-active assignments of W^DFT_{n,2k+1}, without and with slack columns.

    Slack columns are N(0, 1/n), so each has about unit norm like the orthonormal DFT columns. Of the assignments
    not shown eps-argmaxable, ``thin`` counts those whose region is non-empty (a rational point inside it: thinner
    than eps) and ``empty`` those whose region is empty (rational Farkas weights), both from the core's exact
    stage and re-checked by the independent verifier (a failure stops the run).
    """
    rng = np.random.default_rng(seed)
    rows = []
    for n in n_values:
        for k in k_values:
            if 2 * k + 1 > n:
                continue
            Y = sample_k_active(n, k, samples, rng)
            W = dft_matrix(n, k)
            for s in (0, slack):
                Ws = np.hstack([W, rng.standard_normal((n, s)) / np.sqrt(n)])  # (n, 2k+1+s)
                res = check_assignments(Ws, Y, bound=bound, eps=eps, workers=1, exact_radius=True, regions=True)
                counts = res.counts()
                if res.exact and not verify_certificate(res, Ws, items=Y, bound=bound, eps=eps)[list(res.exact)].all():
                    raise ReproductionError(f"DFT n={n}, k={k}, slack={s}: exact evidence fails the verifier")
                regions = [rec.region for pos, rec in res.exact.items() if res.status[pos] != "argmaxable"]
                # An undecided LP showed no ball larger than eps: count its radius as 0 (below the LP's reach).
                radius = np.nan_to_num(res.radius, nan=0.0)
                rows.append({"n": n, "k": k, "slack": s, "samples": samples,
                             "radius_quantile": float(np.quantile(radius, quantile)),
                             "radius_min": float(radius.min()), "eps_argmaxable": counts["argmaxable"],
                             "unargmaxable": counts["unargmaxable"], "undecided": counts["undecided"],
                             "thin": regions.count("yes"), "empty": regions.count("no")})
    return pd.DataFrame(rows)


def plot_geometry(n_values, extent: float = 3.0, pixels: int = 400):
    """Thesis Fig. 5.4: regions of sign(W^DFT_{n,3} x) on the plane x_0 = -1, labelled by sign vector."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(n_values), figsize=(3.4 * len(n_values), 3.4))
    grid = np.linspace(-extent, extent, pixels)
    g1, g2 = np.meshgrid(grid, grid)
    for ax, n in zip(np.atleast_1d(axes), n_values, strict=True):
        W = dft_matrix(n, 1)
        X = np.stack([-np.ones(g1.size), g1.ravel(), g2.ravel()], axis=1) * np.sqrt(n)  # (pixels^2, 3)
        active = (X @ W.T) > 0  # (pixels^2, n)
        code = active @ (1 << np.arange(n))  # one integer per sign vector
        ax.imshow(code.reshape(g1.shape), origin="lower", extent=(-extent, extent, -extent, extent),
                  cmap="tab20", interpolation="nearest")
        for value in np.unique(code):
            inside = code == value
            label = "".join("+" if a else "-" for a in active[np.flatnonzero(inside)[0]])
            ax.text(g1.ravel()[inside].mean(), g2.ravel()[inside].mean(), label, ha="center", va="center",
                    fontsize=7, family="monospace")
        ax.set_title(f"n = {n}, d = 3")
        ax.set_xticks([])
        ax.set_yticks([])
    fig.suptitle("Decision regions of the DFT layer on the plane x_0 = -1 (thesis Fig. 5.4)")
    fig.tight_layout()
    return fig


def plot_radius(df: pd.DataFrame, eps: float, quantile: float):
    """Thesis Fig. 5.5: radius quantile vs n per k, DFT alone (left) and with slack columns (right)."""
    import matplotlib.pyplot as plt

    slacks = sorted(df["slack"].unique())
    fig, axes = plt.subplots(1, len(slacks), figsize=(4.5 * len(slacks), 3.4), sharey=True)
    for ax, s in zip(np.atleast_1d(axes), slacks, strict=True):
        for k, sub in df[df["slack"] == s].groupby("k"):
            ax.plot(sub["n"], sub["radius_quantile"].clip(lower=eps / 10), marker="o", label=f"k = {k}")
        ax.axhline(eps, color="k", linestyle=":", label="LP eps (points below: not eps-argmaxable)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("n (labels)")
        ax.set_title("DFT" if s == 0 else f"DFT + {s} slack columns")
        ax.grid(alpha=0.3)
    np.atleast_1d(axes)[0].set_ylabel(f"{quantile:.0%} quantile of the radius")
    np.atleast_1d(axes)[-1].legend(fontsize=8)
    fig.suptitle("thesis Fig. 5.5: slack columns alleviate hyperplane overcrowding", fontsize=9)
    fig.tight_layout()
    return fig


def run_dft(settings: DftConfig | Mapping, out: dict, *, seed: int, config=None) -> None:
    """Rule ``measure_dft``: alternation check (fails loudly), Fig. 5.5 table and figure, Fig. 5.4 figure.

    Parameters
    ----------
    settings : DftConfig or mapping
        ``theory.dft``.
    out : dict
        Paths: ``alternation``, ``radius`` (.parquet, .md beside), ``geometry``, ``radius_figure`` (.png).
    """
    settings = typed(DftConfig, settings)
    alt = alternation_table(settings.alternation_max_n, bound=settings.bound, eps=settings.eps)
    bad = alt[(alt["mismatches"] > 0) | (alt["undecided"] > 0)]
    if len(bad):
        raise ReproductionError(f"thesis Thm 5.3 (argmaxable = at most 2k sign changes) fails for:\n{bad}")
    radius = radius_table(settings.n_values, settings.k_values, slack=settings.slack,
                          samples=settings.samples, quantile=settings.quantile, seed=seed,
                          bound=settings.bound, eps=settings.eps)
    write_tables({"alternation": alt, "radius": radius}, out, config)
    write_figure(plot_geometry(settings.geometry_n), out["geometry"], config)
    write_figure(plot_radius(radius, settings.eps, settings.quantile), out["radius_figure"], config)
