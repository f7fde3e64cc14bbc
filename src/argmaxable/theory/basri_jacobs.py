"""Basri & Jacobs' random-matrix bound on the top-m tokens (Cor. 1, eq. 3; Table 1, Fig. 2, app. B).

For A (N x d) with i.i.d. N(0, 1) entries, the probability that m given tokens can be made the m most likely
is bounded below by ``Phi^(N-m)(1 / sqrt(m v))`` with ``v = d(d-1) / ((d-m)(d-m-1)(d-m-3))`` (eqs. 3, 4).
Two evaluations of ``Phi^(N-m)`` are reported:

- ``gumbel``: the extreme-value approximation given after eq. 10 (a Gumbel CDF with location
  ``Phi^-1(1 - 1/(N-m))`` and scale ``Phi^-1(1 - 1/((N-m) e)) - location``). It reproduces all 22 rows of
  Table 1, so it is what the paper used;
- ``direct``: ``Phi`` raised to the power N - m (in log space), which gives m larger by up to 11.

Appendix B compares the bound with a simulation that builds the embedding of the proof, x in the row space
of A_m with ``A_m x = 1`` (Cor. 1's optimum), and tests whether every other logit stays below 1.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
from scipy.special import log_ndtr, ndtri

from argmaxable.outputs import write_figure, write_tables
from argmaxable.rules import typed
from argmaxable.theory.reference import BASRI_JACOBS_APPENDIX_B, BASRI_JACOBS_TABLE1, compare_cells
from argmaxable.theory.schema import BasriJacobsConfig

FORMS = ("gumbel", "direct")


def variance(d: int, m):
    """Eq. (3): variance of the entries of a_j^T A_m^T (A_m A_m^T)^-1, valid for m < d - 3."""
    m = np.asarray(m, dtype=np.float64)
    return d * (d - 1) / ((d - m) * (d - m - 1) * (d - m - 3))


def bound(N: int, d: int, m, form: str = "gumbel") -> np.ndarray:
    """Cor. 1 / eq. (4): lower bound on P(any m tokens can be the top m), for m = 1..d-4.

    Parameters
    ----------
    N, d : int
        Vocabulary size and embedding dimension.
    m : int or array of int
        Number of top tokens (1 <= m < d - 3).
    form : {"gumbel", "direct"}
        How ``Phi^(N-m)`` is evaluated (see the module docstring).

    Examples
    --------
    >>> float(bound(50257, 768, 26)) >= 0.99 > float(bound(50257, 768, 27))
    True
    """
    m = np.asarray(m, dtype=np.float64)
    if np.any((m < 1) | (m >= d - 3)):
        raise ValueError(f"Basri-Jacobs eq. (3) needs 1 <= m < d - 3 = {d - 3}; got m outside that range.")
    x = 1.0 / np.sqrt(m * variance(d, m))
    M = N - m
    if form == "direct":
        return np.exp(M * log_ndtr(x))
    if form == "gumbel":
        loc = ndtri(1 - 1 / M)
        scale = ndtri(1 - 1 / (M * np.e)) - loc
        return np.exp(-np.exp(-(x - loc) / scale))
    raise ValueError(f"The 'form' parameter must be one of {FORMS}. Got {form!r} instead.")


def largest_m(N: int, d: int, probability: float, form: str = "gumbel") -> int:
    """Largest m whose bound stays >= ``probability`` (Table 1's last column); 0 if none."""
    m = np.arange(1, d - 3)
    ok = m[bound(N, d, m, form) >= probability]
    return int(ok.max()) if ok.size else 0


def table1(probability: float) -> pd.DataFrame:
    """Table 1 with both evaluations beside the paper's m."""
    df = BASRI_JACOBS_TABLE1.copy()
    for form in FORMS:
        df[f"m_{form}"] = [largest_m(N, d, probability, form) for N, d in zip(df["N"], df["d"], strict=True)]
    df["gumbel_matches_paper"] = df["m_gumbel"] == df["m_paper"]
    df["direct_minus_paper"] = df["m_direct"] - df["m_paper"]
    return df


def simulate(N: int, d: int, m_values, trials: int, matrices: int, seed: int) -> np.ndarray:
    """Appendix B: fraction of random m-sets whose row-space embedding with A_m x = 1 keeps others below 1."""
    rng = np.random.default_rng(seed)
    hits = np.zeros(len(m_values))
    per = np.full(matrices, trials // matrices)
    per[: trials % matrices] += 1
    for count in per:
        A = rng.standard_normal((N, d)).astype(np.float32)  # (N, d); float32 halves the memory of A
        for i, m in enumerate(m_values):
            X = np.empty((d, count), dtype=np.float32)
            sets = [rng.choice(N, size=m, replace=False) for _ in range(count)]
            for t, S in enumerate(sets):
                Am = A[S].astype(np.float64)  # (m, d)
                X[:, t] = Am.T @ np.linalg.solve(Am @ Am.T, np.ones(m))  # x in the row space, A_m x = 1
            Y = A @ X  # (N, count)
            for t, S in enumerate(sets):
                Y[S, t] = -np.inf
            hits[i] += np.sum(Y.max(axis=0) < 1.0)
    return hits / trials


def appendix_b(settings: BasriJacobsConfig, *, seed: int) -> pd.DataFrame:
    """Bound (both forms) and simulation for m = 1..mc_m_max on a random matrix of size mc_N x mc_d, and per m
    where the bound (Gumbel form) lies against the simulation's 95% Wilson interval (:func:`bound_side`)."""
    N, d = settings.mc_N, settings.mc_d
    m = np.arange(1, settings.mc_m_max + 1)
    df = pd.DataFrame({"m": m, "bound_gumbel": bound(N, d, m, "gumbel"),
                       "bound_direct": bound(N, d, m, "direct")})
    df["simulation"] = simulate(N, d, m, settings.mc_trials, settings.mc_matrices, seed)
    df.insert(0, "trials", settings.mc_trials)
    df["bound_vs_simulation"] = bound_side(df["bound_gumbel"].to_numpy(), df["simulation"].to_numpy(),
                                           settings.mc_trials)
    return df


def bound_side(bound_values: np.ndarray, simulated: np.ndarray, trials: int) -> np.ndarray:
    """Per m, "below" where the bound lies under the simulation's 95% Wilson interval, "above" where it lies over
    it, "within" where the Monte Carlo cannot tell them apart (the appendix's claim: the bound undershoots).

    >>> bound_side(np.array([0.90, 0.99, 0.999]), np.array([0.99, 0.99, 0.95]), 200).tolist()
    ['below', 'within', 'above']
    """
    lo, hi = wilson(simulated, trials)
    return np.where(bound_values < lo, "below", np.where(bound_values > hi, "above", "within"))


def wilson(hits: np.ndarray, trials: int, z: float = 1.96) -> tuple[np.ndarray, np.ndarray]:
    """95% Wilson score interval of a share ``hits`` (a fraction) estimated from ``trials`` draws."""
    centre = (hits + z * z / (2 * trials)) / (1 + z * z / trials)
    half = z * np.sqrt(hits * (1 - hits) / trials + z * z / (4 * trials * trials)) / (1 + z * z / trials)
    return centre - half, centre + half


def crossings(df: pd.DataFrame, probability: float) -> pd.DataFrame:
    """For each curve, the largest m with P >= probability, the first m with P < probability and the first m
    with P <= probability (the strict reading, "achieves more than probability"); for the simulation also the
    m whose 95% Wilson interval contains ``probability`` (the range its Monte Carlo cannot tell apart)."""
    rows = []
    for col in ("bound_gumbel", "bound_direct", "simulation"):
        above = df["m"][df[col] >= probability]
        below = df["m"][df[col] < probability]
        not_above = df["m"][df[col] <= probability]
        row = {"curve": col, "largest_m_at_or_above": int(above.max()) if len(above) else 0,
               "first_m_below": int(below.min()) if len(below) else None,
               "first_m_not_above": int(not_above.min()) if len(not_above) else None,
               "m_interval_low": None, "m_interval_high": None}
        if col == "simulation":
            lo, hi = wilson(df[col].to_numpy(), int(df["trials"].iloc[0]))
            unsure = df["m"][(lo <= probability) & (probability <= hi)]
            if len(unsure):
                row["m_interval_low"], row["m_interval_high"] = int(unsure.min()), int(unsure.max())
        rows.append(row)
    out = pd.DataFrame(rows)
    out["paper"] = [BASRI_JACOBS_APPENDIX_B["m_bound"], None, BASRI_JACOBS_APPENDIX_B["m_simulation"]]
    ints = ["first_m_below", "first_m_not_above", "m_interval_low", "m_interval_high", "paper"]
    return out.astype(dict.fromkeys(ints, "Int64"))


def plot_fig2(df: pd.DataFrame, probability: float):
    """Fig. 2: the bound (Gumbel form) against m for each model of Table 1."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    rows = df.drop_duplicates(["N", "d"]).sort_values(["d", "N"])
    colours = plt.get_cmap("turbo")(np.linspace(0.05, 0.95, len(rows)))  # one colour per curve, ordered by d
    styles = ["-", "--", "-.", ":"]  # and a dash pattern, so neighbours in colour still differ
    for i, (row, colour) in enumerate(zip(rows.itertuples(), colours, strict=True)):
        m = np.arange(1, min(row.d - 4, 3 * row.m_paper))
        ax.plot(m, bound(row.N, row.d, m, "gumbel"), lw=1.2, color=colour, ls=styles[i % len(styles)],
                label=f"{row.model} ({row.N}, {row.d})")
    ax.axhline(probability, color="k", linestyle=":", lw=1)
    ax.set_xscale("log")
    ax.set_xlabel("m")
    ax.set_ylabel("bound on P(any m tokens can be the top m)")
    ax.set_title(f"Basri & Jacobs Fig. 2: Cor. 1's bound for the models of Table 1 (dotted: {probability})",
                 fontsize=9)
    ax.legend(fontsize=6, ncol=1, loc="center left", bbox_to_anchor=(1.01, 0.5), title="model (N, d)",
              title_fontsize=6)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def plot_appendix_b(df: pd.DataFrame, probability: float, N: int, d: int):
    """Appendix B Fig. 5: bound vs simulation on one random N x d matrix, each curve's first m below
    ``probability`` marked (solid), the m the simulation's Wilson interval cannot tell from the threshold shaded,
    and the paper's crossings (dashed) where the matrix has the appendix's size."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8.5, 4.0))
    trials = int(df["trials"].iloc[0])
    cross = crossings(df, probability).set_index("curve")
    sim = cross.loc["simulation"]
    if not pd.isna(sim["m_interval_low"]):
        ax.axvspan(sim["m_interval_low"] - 0.5, sim["m_interval_high"] + 0.5, color="tab:blue", alpha=0.12,
                   label=f"simulation within its Wilson interval of {probability}: m = {sim['m_interval_low']}-"
                         f"{sim['m_interval_high']}")
    ax.plot(df["m"], df["simulation"], color="tab:blue", label=f"simulation ({trials} sets/m)")
    ax.plot(df["m"], df["bound_gumbel"], "--", color="tab:purple", label="bound, Gumbel form")
    ax.plot(df["m"], df["bound_direct"], ":", color="tab:green", label="bound, direct Phi^(N-m)")
    ax.axhline(probability, color="k", lw=0.8, linestyle=":")
    for curve, colour, what in (("bound_gumbel", "tab:purple", "bound (Gumbel form)"),
                                ("simulation", "tab:blue", "simulation")):
        if not pd.isna(m := cross.loc[curve, "first_m_below"]):
            ax.axvline(m, color=colour, lw=1.2, label=f"ours: {what} first below {probability} at m = {m}")
    if (N, d) == (BASRI_JACOBS_APPENDIX_B["N"], BASRI_JACOBS_APPENDIX_B["d"]):  # the appendix's crossings
        for key, colour, what in (("m_bound", "tab:purple", "bound"), ("m_simulation", "tab:blue", "simulation")):
            ax.axvline(BASRI_JACOBS_APPENDIX_B[key], color=colour, lw=1.0, ls="--", alpha=0.6,
                       label=f"paper's {what} crossing: m = {BASRI_JACOBS_APPENDIX_B[key]}")
    _zoom(ax, df, probability)
    ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_xlabel("m")
    ax.set_ylabel("top-m probability")
    ax.set_title(f"Basri & Jacobs Fig. 5 (appendix B): top-m probability against m, bound and simulation,\nrandom "
                 f"{N} x {d} "
                 f"matrix; first m below {probability}: bound {cross.loc['bound_gumbel', 'first_m_below']}, "
                 f"simulation {sim['first_m_below']}\nthe bound under the simulation's Wilson interval at "
                 f"{_m_list(df, 'below')}, over it at {_m_list(df, 'above')}", fontsize=9)
    fig.tight_layout()
    return fig


def _m_list(df: pd.DataFrame, side: str) -> str:
    """The m (as ranges) where :func:`bound_side` puts the bound on ``side`` of the simulation; "no m" if none."""
    ms = df["m"][df["bound_vs_simulation"] == side].tolist() if "bound_vs_simulation" in df else []
    runs, start = [], None
    for i, m in enumerate(ms):
        start = m if start is None else start
        if i + 1 == len(ms) or ms[i + 1] != m + 1:
            runs.append(f"{start}" if start == m else f"{start}-{m}")
            start = None
    return "m = " + ", ".join(runs) if runs else "no m"


def _zoom(ax, df: pd.DataFrame, probability: float) -> None:
    """An inset of :func:`plot_appendix_b` around the threshold, where the curves cross it."""
    below = [m for curve in ("simulation", "bound_gumbel") if len(m := df["m"][df[curve] < probability])]
    if not below:
        return
    inset = ax.inset_axes((0.08, 0.08, 0.5, 0.5))
    for line in ax.get_lines():  # the same curves and markers, zoomed
        inset.plot(line.get_xdata(), line.get_ydata(), ls=line.get_linestyle(), color=line.get_color(),
                   lw=line.get_linewidth())
    for span in ax.patches:  # the Wilson range
        x0, x1 = span.get_x(), span.get_x() + span.get_width()
        inset.axvspan(x0, x1, color=span.get_facecolor(), alpha=None)
    inset.axhline(probability, color="k", lw=0.8, linestyle=":")
    inset.set_xlim(min(b.min() for b in below) - 6, max(b.min() for b in below) + 4)
    inset.set_ylim(2 * probability - 1, 1.0 + (1 - probability) / 4)
    inset.tick_params(labelsize=6)
    inset.set_title(f"zoom: probability >= {2 * probability - 1:g}", fontsize=6)


def run_basri_jacobs(settings: BasriJacobsConfig | Mapping, out: dict, *, seed: int, config=None) -> None:
    """Rule ``bound_topm``: Table 1 (fails loudly if the Gumbel form differs), Fig. 2, appendix B.

    Parameters
    ----------
    settings : BasriJacobsConfig or mapping
        ``theory.basri_jacobs``.
    out : dict
        Paths: ``table1``, ``appendix_b``, ``crossings`` (.parquet, .md beside), ``fig2``, ``fig_b`` (.png).
    """
    settings = typed(BasriJacobsConfig, settings)
    p = settings.probability
    t1 = table1(p)
    rows = t1["model"] + " (N=" + t1["N"].astype(str) + ", d=" + t1["d"].astype(str) + ")"
    compare_cells(t1["m_gumbel"].set_axis(rows), t1["m_paper"].set_axis(rows),
                  "Basri-Jacobs Table 1 (Gumbel form)")
    if settings.mc_N == BASRI_JACOBS_APPENDIX_B["N"] and settings.mc_d == BASRI_JACOBS_APPENDIX_B["d"]:
        m_b = largest_m(settings.mc_N, settings.mc_d, p) + 1  # appendix B quotes the first m below p
        compare_cells(pd.Series([m_b]), pd.Series([BASRI_JACOBS_APPENDIX_B["m_bound"]]),
                      "Basri-Jacobs appendix B, first m with bound < 0.99")
    sim = appendix_b(settings, seed=seed)
    write_tables({"table1": t1, "appendix_b": sim, "crossings": crossings(sim, p)}, out, config)
    write_figure(plot_fig2(t1, p), out["fig2"], config)
    write_figure(plot_appendix_b(sim, p, settings.mc_N, settings.mc_d), out["fig_b"], config)
