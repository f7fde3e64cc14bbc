"""Cover's count of argmaxable label assignments (thesis Thm 5.1, eq. 5.2) and thesis Fig. 5.2.

A sigmoid layer W (n x d) in general position makes exactly ``2 sum_{i<d} C(n-1, i)`` of the 2^n label
assignments sign(Wx) argmaxable. For n = 1000 the counts have hundreds of digits, so they are exact Python
integers and percentages are formed in log space. The check enumerates all 2^n assignments of a random
Gaussian W with the core for small n.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from decimal import Decimal

import numpy as np
import pandas as pd

from argmaxable.core import check_assignments
from argmaxable.outputs import ReproductionError, write_figure, write_tables
from argmaxable.rules import typed
from argmaxable.theory.reference import compare_cells
from argmaxable.theory.schema import CoverConfig


def cover_count(n: int, d: int) -> int:
    """Number of argmaxable label assignments of a W (n x d) in general position (thesis eq. 5.2).

    Examples
    --------
    >>> cover_count(4, 2), cover_count(4, 4)
    (8, 16)
    """
    if n < 1 or d < 1:
        raise ValueError(f"cover_count needs n >= 1 and d >= 1; got n={n}, d={d}.")
    return 2 * sum(math.comb(n - 1, i) for i in range(min(d, n)))


def log10_percentage(n: int, d: int) -> float:
    """log10 of the percentage of the 2^n assignments that are argmaxable (exact integers, then a log)."""
    return math.log10(cover_count(n, d)) - n * math.log10(2) + 2


def all_assignments(n: int) -> np.ndarray:
    """Every label assignment on n labels as a (2^n, n) bool matrix."""
    return np.array(list(itertools.product([False, True], repeat=n)), dtype=bool)


def enumeration_table(max_n: int, *, seed: int, bound: float, eps: float) -> pd.DataFrame:
    """Count argmaxable assignments of a random Gaussian W for n = 2..max_n, d = 1..n, beside eq. 5.2."""
    rng = np.random.default_rng(seed)
    rows = []
    for n in range(2, max_n + 1):
        Y = all_assignments(n)
        for d in range(1, n + 1):
            W = rng.standard_normal((n, d))  # general position with probability 1
            counts = check_assignments(W, Y, bound=bound, eps=eps, workers=1).counts()
            rows.append({"n": n, "d": d, "cover": cover_count(n, d), "enumerated": counts["argmaxable"],
                         "undecided": counts["undecided"]})
    return pd.DataFrame(rows)


def percentage_table(n: int, d_values: list[int]) -> pd.DataFrame:
    """Fig. 5.2's numbers at selected d: the count of argmaxable assignments (6 significant digits, rounded from
    the exact integer; a 300-digit column helps nobody reading the table) and the percentage."""
    rows = []
    for d in d_values:
        lp = log10_percentage(n, d)
        rows.append({"n": n, "d": d, "argmaxable": f"{Decimal(cover_count(n, d)):.5e}", "log10_percent": lp,
                     "percent": 10.0**lp})
    return pd.DataFrame(rows)


def plot_percentage(n: int):
    """Thesis Fig. 5.2: percentage of argmaxable assignments vs d, all d (left) and near d = n/2 (right)."""
    import matplotlib.pyplot as plt

    d = np.arange(1, n + 1)
    percent = 10.0 ** np.array([log10_percentage(n, k) for k in d])  # smallest 2^(1-n)*100: within float64
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.2))
    zoom = d >= n // 2 - n // 20
    for ax, keep, title in ((axes[0], slice(None), "all d"), (axes[1], zoom, "d near n/2")):
        ax.plot(d[keep], percent[keep])
        ax.set_yscale("log")
        ax.set_ylim(top=300)  # a percentage: the axis stops just above 100%, not at the next decade of ticks
        ax.set_xlabel("d")
        ax.set_title(title)
        ax.grid(alpha=0.3)
    low = int(np.floor(np.log10(percent.min()) / 50) * 50)
    exponents = range(low, -49, 50)  # every 50 decades, then 100%
    axes[0].set_yticks([10.0**e for e in exponents] + [100.0], [f"$10^{{{e}}}$" for e in exponents] + ["100"])
    axes[0].minorticks_off()
    axes[0].set_ylabel(f"% of the 2^{n} assignments argmaxable")
    fig.suptitle(f"thesis Fig. 5.2: % of the 2^{n} label assignments argmaxable (Cover's count), n = {n}")
    fig.tight_layout()
    return fig


def run_cover(settings: CoverConfig | Mapping, out: dict, *, seed: int, config=None) -> None:
    """Rule ``count_cover``: Fig. 5.2 table and figure, and the enumeration check (fails on any mismatch).

    Parameters
    ----------
    settings : CoverConfig or mapping
        ``theory.cover`` (n, d_values, enumerate_max_n, bound, eps).
    out : dict
        Paths: ``percentage`` and ``enumeration`` (.parquet, .md beside), ``figure`` (.png, .pdf beside).
    seed : int
        Seed of the random W used for enumeration.
    """
    settings = typed(CoverConfig, settings)
    enum = enumeration_table(settings.enumerate_max_n, seed=seed, bound=settings.bound,
                             eps=settings.eps)
    indexed = enum.set_index(["n", "d"])
    compare_cells(indexed["enumerated"], indexed["cover"], "Cover's count (thesis eq. 5.2) vs enumeration")
    if enum["undecided"].any():
        stuck = enum[enum["undecided"] > 0]
        raise ReproductionError(f"Cover enumeration left assignments undecided:\n{stuck}")
    n = settings.n
    write_tables({"percentage": percentage_table(n, settings.d_values), "enumeration": enum}, out, config)
    write_figure(plot_percentage(n), out["figure"], config)
