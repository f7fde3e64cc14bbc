"""Basri & Jacobs' LP experiments (§6, apps. D, E): Figs 1, 3 and 7, with the paper's numbers beside.

- Fig. 1 (:func:`run_fraction`, :func:`run_fraction_summary`): the share of random m-sets of tokens that can be
  the top-m (``check_top_m``) and that can receive prescribed probabilities (:func:`check_prescribed`, targets
  U(0.1, 1.1) normalised, eps = 0.05, delta = 0.1), for a trained output matrix and a Gaussian N(0, 1) one of
  the same shape, beside Cor. 1's bound (:mod:`argmaxable.theory.basri_jacobs`).
- Fig. 3 (:func:`run_scaling_point`, :func:`run_scaling_summary`): the largest m whose share reaches 0.99 for
  random N x d matrices, against d and against N, with the fitted slope (paper: m ~ d / 5).
- Fig. 7 (:func:`run_rows`): row norms and cosine similarities of trained rows against a Gaussian matrix
  scaled to the same mean row norm.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd

from argmaxable.constructions import gaussian_like, uniform_probabilities
from argmaxable.core import check_prescribed, check_top_m
from argmaxable.outputs import write_figure, write_tables
from argmaxable.provenance import panel_grid, write_table
from argmaxable.rules import typed
from argmaxable.theory.basri_jacobs import bound, largest_m
from argmaxable.topm.schema import CheckSettings, PrescribedSettings, TopmConfig

# Basri & Jacobs §6 and Fig. 1 / Fig. 6 captions: largest m with the share near 1 (read from the text, not the plots).
# Keys are model config keys.
PAPER_FIG1 = {
    "gpt2": {"top-m": 95, "prescribed": 85},  # "GPT-2 ... m = 95"; Fig. 6: "m up to about 85"
    "tinyllama": {"top-m": 400},  # "TinyLlama ... maintains this up to m = 400"
    "llama2_7b": {"top-m": 1070},  # "Llama2 ... does this for up to m = 1070"
}
PAPER_SLOPE = 0.2  # Basri & Jacobs §6, Fig. 3: "with d << N, we observe that m ~ d/5"
TESTS = ("top-m", "prescribed")


def load_trained(model_cfg: dict, root: str | Path):
    """The output layer of a configured model, read from its local directory ``root`` (data/models/<key>)."""
    from argmaxable.detect.loaders import load_model

    return load_model(model_cfg, root=Path(root))


def share_feasible(W: np.ndarray, b, m: int, trials: int, test: str, rng: np.random.Generator, *,
                   prescribed: PrescribedSettings, check: CheckSettings) -> dict:
    """Check ``trials`` random m-sets of W's rows under ``test`` ("top-m" or "prescribed")."""
    N = W.shape[0]
    sets = [rng.choice(N, size=m, replace=False) for _ in range(trials)]
    if test == "top-m":
        res = check_top_m(W, sets, b, **asdict(check))
    else:
        probs = [uniform_probabilities(m, rng, prescribed.low, prescribed.high) for _ in sets]
        res = check_prescribed(W, sets, probs, b, eps_ratio=prescribed.eps_ratio, delta=prescribed.delta,
                               **asdict(check))
    counts = res.counts()
    decided = counts["argmaxable"] + counts["unargmaxable"]
    return {"trials": trials, "feasible": counts["argmaxable"], "undecided": counts["undecided"],
            "fraction": counts["argmaxable"] / decided if decided else np.nan}


def fraction_curve(W: np.ndarray, b, m_values, *, trials: int, seed: int, prescribed: PrescribedSettings,
                   check: CheckSettings) -> pd.DataFrame:
    """Share of random m-sets passing each test, for each m; a test's curve stops after its first zero share
    (larger sets only get harder; the figure says so)."""
    rng = np.random.default_rng(seed)
    rows = []
    for test in TESTS:
        for m in m_values:
            if m >= W.shape[0]:
                break
            row = {"m": int(m), "test": test, **share_feasible(W, b, int(m), trials, test, rng,
                                                                 prescribed=prescribed, check=check)}
            rows.append(row)
            if row["fraction"] == 0:
                break
    return pd.DataFrame(rows)


def run_fraction(settings: TopmConfig | Mapping, matrix: str, kind: str, model_cfg: dict, root: str, out: str, *,
                 seed: int, config=None) -> None:
    """Rule ``measure_topm``: Fig. 1's curves for one matrix (the trained layer or a Gaussian of its shape).

    Parameters
    ----------
    settings : TopmConfig or mapping
        The ``topm`` blocks ``fraction``, ``check`` (core keywords) and ``prescribed``.
    matrix : str
        Model key.
    kind : {"trained", "gaussian"}
    model_cfg : dict
        The model's config (``model.<key>``); root: its local directory.
    out : str
        Table path (.parquet).
    """
    topm = typed(TopmConfig, settings)
    layer = load_trained(model_cfg, root)
    if kind == "trained":
        W, b = layer.W, layer.b
    else:
        W, b = gaussian_like(layer.W.shape, seed), None
    df = fraction_curve(W, b, topm.fraction.m_values, trials=topm.fraction.trials, seed=seed,
                        prescribed=topm.prescribed, check=topm.check)
    df.insert(0, "matrix", matrix)
    df.insert(1, "kind", kind)
    df.insert(2, "N", W.shape[0])
    df.insert(3, "d", W.shape[1])
    write_table(df, out, config=config, inputs=layer.files)  # the head's files, also for the Gaussian twin's shape


def largest_passing(df: pd.DataFrame, probability: float) -> int:
    """Largest m whose share is >= probability (0 if none)."""
    ok = df["m"][df["fraction"] >= probability]
    return int(ok.max()) if len(ok) else 0


def fraction_summary(curves: pd.DataFrame, probability: float) -> pd.DataFrame:
    """One row per (matrix, kind, test): largest m reaching ``probability``, Cor. 1's m and the paper's."""
    rows = []
    for (matrix, kind, test), sub in curves.groupby(["matrix", "kind", "test"], sort=False):
        N, d = int(sub["N"].iloc[0]), int(sub["d"].iloc[0])
        rows.append({"matrix": matrix, "kind": kind, "test": test, "N": N, "d": d,
                     "trials": int(sub["trials"].iloc[0]), "m_measured": largest_passing(sub, probability),
                     "m_grid_max": int(sub["m"].max()), "m_cor1_bound": largest_m(N, d, probability),
                     "m_paper": PAPER_FIG1.get(matrix, {}).get(test)})  # the paper's trained and random agree
    return pd.DataFrame(rows).astype({"m_paper": "Int64"})


def plot_fraction(curves: pd.DataFrame, probability: float):
    """Fig. 1: one panel per matrix shape; blue top-m, red prescribed; solid trained, dotted Gaussian;
    purple Cor. 1's bound."""
    panels = list(dict.fromkeys(curves["matrix"]))
    fig, axes = panel_grid(len(panels), 4.6, 3.6)
    for ax, matrix in zip(axes.flat, panels, strict=False):
        sub = curves[curves["matrix"] == matrix]
        N, d = int(sub["N"].iloc[0]), int(sub["d"].iloc[0])
        for (kind, test), cur in sub.groupby(["kind", "test"]):
            ax.plot(cur["m"], cur["fraction"], "-" if kind == "trained" else ":", marker="o", ms=3,
                    color="tab:blue" if test == "top-m" else "tab:red",
                    label=f"{test}, {kind}: m = {largest_passing(cur, probability)}")
        m = np.arange(1, min(d - 4, int(sub["m"].max())) + 1)
        ax.plot(m, bound(N, d, m), "--", color="tab:purple", label="Cor. 1 bound (Gaussian)")
        for test, m_paper in PAPER_FIG1.get(matrix, {}).items():
            ax.axvline(m_paper, color="tab:blue" if test == "top-m" else "tab:red", alpha=0.4, lw=0.8,
                       label=f"paper's m, {test}: {m_paper}")
        ax.axhline(probability, color="k", lw=0.6, linestyle=":")
        ax.set_title(f"{matrix} ({N} x {d}); {int(sub['trials'].iloc[0])} sets per m", fontsize=9)
        ax.set_xlabel("m")
        ax.set_ylabel("share of random m-sets")
        ax.legend(fontsize=6, loc="lower left")  # the curves start at the top left and fall to the right
        ax.grid(alpha=0.3)
    with_paper = [m for m in panels if m in PAPER_FIG1]
    lines = (f"vertical lines: the paper's m ({', '.join(with_paper)})" if with_paper else
             f"the paper prints m only for {', '.join(PAPER_FIG1)}, none of them drawn here")
    fig.suptitle(f"Basri & Jacobs Fig. 1: top-m sets and prescribed probabilities (eps = 0.05, delta = 0.1)\n"
                 f"legend: largest m with share >= {probability}; {lines}; curves stop at their first zero", fontsize=9)
    fig.tight_layout()
    return fig


def run_fraction_summary(settings: TopmConfig | Mapping, inputs: list[str], out: dict, config=None) -> None:
    """Rule ``plot_topm_fraction``: gather every matrix's curves; tables ``curves``, ``summary``; ``figure``
    (``settings``: the ``topm`` value ``probability``)."""
    curves = pd.concat([pd.read_parquet(p) for p in inputs], ignore_index=True)
    curves["cor1_bound"] = [float(bound(N, d, m)) if m < d - 3 else np.nan
                            for N, d, m in zip(curves["N"], curves["d"], curves["m"], strict=True)]
    p = typed(TopmConfig, settings).probability
    write_tables({"curves": curves, "summary": fraction_summary(curves, p)}, out, config, inputs=inputs)
    write_figure(plot_fraction(curves, p), out["figure"], config, inputs=inputs)


# ------------------------------------------------------------------------------------------------ Fig. 3


def passes(W: np.ndarray, m: int, trials: int, probability: float, rng: np.random.Generator,
           check: CheckSettings) -> bool:
    """Whether at least ``probability`` of ``trials`` random m-sets can be the top-m; stops at the first failure
    too many (sets are checked in batches of ``check.workers``)."""
    allowed = int(np.floor((1 - probability) * trials))
    failures, done = 0, 0
    while done < trials:
        batch = min(trials - done, max(1, check.workers))
        res = check_top_m(W, [rng.choice(W.shape[0], size=m, replace=False) for _ in range(batch)], **asdict(check))
        failures += int(np.sum(res.status != "argmaxable"))
        done += batch
        if failures > allowed:
            return False
    return True


def m_at_probability(N: int, d: int, *, trials: int, probability: float, seed: int, check: CheckSettings) -> dict:
    """Largest m at which a Gaussian N x d matrix passes :func:`passes`, by bisection over 1 <= m < d (the share
    falls with m)."""
    rng = np.random.default_rng(seed)
    W = gaussian_like((N, d), seed)
    lo, hi = 0, d  # m = 0 passes trivially; m = d is checked first
    if passes(W, hi, trials, probability, rng, check):
        return {"N": N, "d": d, "m": hi, "evaluations": 1, "trials": trials}
    evaluations = 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        evaluations += 1
        if passes(W, mid, trials, probability, rng, check):
            lo = mid
        else:
            hi = mid
    return {"N": N, "d": d, "m": lo, "evaluations": evaluations, "trials": trials}


def run_scaling_point(settings: TopmConfig | Mapping, N: int, d: int, out: str, *, seed: int, config=None) -> None:
    """Rule ``measure_topm_scaling``: Fig. 3's m at one (N, d) (``settings``: the ``topm`` blocks ``scaling``
    (its ``trials``), ``check`` and ``probability``)."""
    topm = typed(TopmConfig, settings)
    row = m_at_probability(N, d, trials=topm.scaling.trials, probability=topm.probability, seed=seed,
                           check=topm.check)
    row["m_cor1_bound"] = largest_m(N, d, topm.probability)
    write_table(pd.DataFrame([row]), out, config=config)


def fit_slope(df: pd.DataFrame) -> tuple[float, float]:
    """Least-squares line m = slope d + intercept (the paper's m ~ d / 5 is a slope of 0.2)."""
    slope, intercept = np.polyfit(df["d"].astype(float), df["m"].astype(float), 1)
    return float(slope), float(intercept)


def plot_scaling(by_d: pd.DataFrame, by_n: pd.DataFrame, fit: tuple[float, float], trials: int):
    """Fig. 3: m reaching 0.99 against d (left) and N (right); LP in blue, Cor. 1's bound dotted red."""
    import matplotlib.pyplot as plt

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(9, 3.6))
    ax.plot(by_d["d"], by_d["m"], "o-", color="tab:blue", label="LP simulation")
    ax.plot(by_d["d"], by_d["m_cor1_bound"], ":", color="tab:red", label="Cor. 1 bound")
    ax.plot(by_d["d"], fit[0] * by_d["d"] + fit[1], "-", color="0.5", lw=0.8,
            label=f"fit m = {fit[0]:.3f} d {fit[1]:+.1f}")
    ax.plot(by_d["d"], PAPER_SLOPE * by_d["d"], "--", color="k", lw=0.8, label="paper: m = d / 5")
    ax.set_xlabel(f"d (N = {int(by_d['N'].iloc[0])})")
    ax.set_ylabel("largest m with share >= 0.99")
    ax.legend(fontsize=7)
    bx.plot(by_n["N"], by_n["m"], "o-", color="tab:blue", label="LP simulation")
    bx.plot(by_n["N"], by_n["m_cor1_bound"], ":", color="tab:red", label="Cor. 1 bound")
    bx.set_xlabel(f"N (d = {int(by_n['d'].iloc[0])})")
    bx.legend(fontsize=7)
    for a in (ax, bx):
        a.grid(alpha=0.3)
    fig.suptitle(f"Basri & Jacobs Fig. 3 on random matrices; {trials} sets per m (0.99 allows "
                 f"{int(np.floor(0.01 * trials))} failures)", fontsize=9)
    fig.tight_layout()
    return fig


def run_scaling_summary(settings: TopmConfig | Mapping, by_d_inputs: list[str], by_n_inputs: list[str], out: dict,
                        config=None) -> None:
    """Rule ``plot_topm_scaling``: tables ``by_d``, ``by_n``, ``slope`` and the figure (``settings``: the
    ``topm`` block ``scaling``, its ``trials``)."""
    trials = typed(TopmConfig, settings).scaling.trials
    by_d = pd.concat([pd.read_parquet(p) for p in by_d_inputs], ignore_index=True).sort_values("d")
    by_n = pd.concat([pd.read_parquet(p) for p in by_n_inputs], ignore_index=True).sort_values("N")
    fit = fit_slope(by_d)
    top = by_d.iloc[-1]
    summary = pd.DataFrame([{"slope_measured": fit[0], "intercept_measured": fit[1], "slope_paper": PAPER_SLOPE,
                             "m_over_d_at_d_max": top["m"] / top["d"], "N": int(top["N"]),
                             "d_min": int(by_d["d"].min()), "d_max": int(top["d"]), "trials": trials}])
    write_tables({"by_d": by_d, "by_n": by_n, "slope": summary}, out, config)
    write_figure(plot_scaling(by_d, by_n, fit, trials), out["figure"], config)


# ------------------------------------------------------------------------------------------------ Fig. 7


def row_statistics(W: np.ndarray, pairs: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Row norms of W and the cosine similarities of ``pairs`` random pairs of distinct rows."""
    norms = np.linalg.norm(W, axis=1)  # (N,)
    i = rng.integers(0, W.shape[0], size=pairs)
    j = (i + rng.integers(1, W.shape[0], size=pairs)) % W.shape[0]  # j != i
    cos = np.einsum("pd,pd->p", W[i], W[j]) / (norms[i] * norms[j])
    return norms, cos


def compare_rows(W: np.ndarray, pairs: int, seed: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Basri & Jacobs App. E: statistics of the trained rows and of a Gaussian matrix scaled to the same mean row
    norm."""
    rng = np.random.default_rng(seed)
    G = gaussian_like(W.shape, seed)
    G *= np.linalg.norm(W, axis=1).mean() / np.linalg.norm(G, axis=1).mean()
    return {"trained": row_statistics(W, pairs, rng), "gaussian": row_statistics(G, pairs, rng)}


def plot_rows(stats: dict) -> object:
    """Fig. 7: per model, histograms of row norms (top) and cosine similarities (bottom)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, len(stats), figsize=(4 * len(stats), 5.5), squeeze=False)
    for col, (model, pair) in enumerate(stats.items()):
        for row, what in enumerate(("row norm", "cosine similarity")):
            ax = axes[row, col]
            for kind, color in (("gaussian", "tab:orange"), ("trained", "tab:blue")):
                ax.hist(pair[kind][row], bins=60, alpha=0.6, color=color, density=True, label=kind)
            ax.set_xlabel(what)
            ax.set_ylabel("density (histogram, area 1)")
            ax.set_title(model if row == 0 else "", fontsize=9)
            ax.legend(fontsize=7)
    fig.suptitle("Basri & Jacobs Fig. 7: trained rows vs a Gaussian matrix with the same mean row norm", fontsize=9)
    fig.tight_layout()
    return fig


def run_rows(settings: TopmConfig | Mapping, models: dict[str, tuple[dict, str]], out: dict, *, seed: int,
             config=None) -> None:
    """Rule ``compare_topm_rows``: table ``table`` (one row per model and kind) and ``figure``.

    Parameters
    ----------
    settings : TopmConfig or mapping
        The ``topm`` block ``rows``.
    models : dict
        key -> (model config, local directory).
    """
    pairs = typed(TopmConfig, settings).rows.pairs
    stats, rows, files = {}, [], []
    for key, (model_cfg, root) in models.items():
        layer = load_trained(model_cfg, root)
        W, files = layer.W, [*files, *layer.files]
        stats[key] = compare_rows(W, pairs, seed)
        for kind, (norms, cos) in stats[key].items():
            rows.append({"model": key, "kind": kind, "N": W.shape[0], "d": W.shape[1],
                         "norm_mean": norms.mean(), "norm_std": norms.std(), "norm_cv": norms.std() / norms.mean(),
                         "cos_mean": cos.mean(), "cos_std": cos.std(), "cos_positive": float(np.mean(cos > 0)),
                         "pairs": pairs})
    write_tables({"table": pd.DataFrame(rows)}, out, config, inputs=files)
    write_figure(plot_rows(stats), out["figure"], config, inputs=files)
