"""Feasible rankings of a bottlenecked softmax: thesis Tables A.1/A.2 (ACL 2022 appendix C).

A ranking of the n logits of softmax(Wx + b) is a region of the braid arrangement {z_i = z_j} cut by the
d-dimensional image of x -> Wx + b. For W, b in general position the number of regions depends only on
(n, d, bias) (Cover 1967; Good and Tideman 1977). By Zaslavsky's theorem a generic section keeps the Whitney
numbers of the braid arrangement below its dimension, and those are the unsigned Stirling numbers of the
first kind c(n, n - i) (the braid arrangement's characteristic polynomial is t (t-1) ... (t-n+1)):

- with a bias (a generic affine d-section): ``sum_{i=0}^{d} c(n, n-i)``;
- without (a generic linear d-section, a central arrangement): ``sum_{i<d} c(n, n-i)`` plus the top
  Whitney number ``|sum_{i<d} (-1)^i c(n, n-i)|`` (OEIS A071223).

Both reach n! for d >= n - 1. The cross-check enumerates every ranking of a random Gaussian W (general
position with probability 1) and asks the core whether its halfspace system is strictly feasible.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from functools import cache

import numpy as np
import pandas as pd

from argmaxable.core import LPSettings, chebyshev
from argmaxable.outputs import ReproductionError, write_tables
from argmaxable.rules import typed
from argmaxable.theory.reference import REGIONS_BIAS, REGIONS_NO_BIAS, compare_cells
from argmaxable.theory.schema import RegionsConfig


@cache
def stirling_first(n: int) -> tuple[int, ...]:
    """Unsigned Stirling numbers of the first kind ``c(n, k)`` for k = 0..n (exact integers).

    Examples
    --------
    >>> stirling_first(4)
    (0, 6, 11, 6, 1)
    """
    row = [1]  # c(0, 0)
    for m in range(n):  # c(m+1, k) = m c(m, k) + c(m, k-1)
        row = [(m * (row[k] if k < len(row) else 0)) + (row[k - 1] if k >= 1 else 0) for k in range(m + 2)]
    return tuple(row)


def count_rankings(n: int, d: int, bias: bool) -> int:
    """Number of feasible rankings of n categories for softmax(Wx [+ b]) with x in R^d, W in general position.

    Parameters
    ----------
    n : int
        Number of categories (n >= 1).
    d : int
        Bottleneck dimension (d >= 1).
    bias : bool
        Whether the layer has a bias b outside the column space of W.

    Examples
    --------
    >>> count_rankings(4, 2, bias=False), count_rankings(4, 2, bias=True), count_rankings(10, 9, bias=False)
    (12, 18, 3628800)
    """
    if n < 1 or d < 1:
        raise ValueError(f"count_rankings needs n >= 1 and d >= 1; got n={n}, d={d}.")
    if d >= n - 1:
        return math.factorial(n)
    whitney = [stirling_first(n)[n - i] for i in range(n)]  # |w_i|, i = 0..n-1
    if bias:
        return sum(whitney[: d + 1])
    return sum(whitney[:d]) + abs(sum((-1) ** i * w for i, w in enumerate(whitney[:d])))


def ranking_system(W: np.ndarray, b: np.ndarray | None,
                   ranking: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Rows A, offsets c with ``A x + c < 0`` iff the logits follow ``ranking`` (first = largest)."""
    hi, lo = np.asarray(ranking[:-1]), np.asarray(ranking[1:])
    A = W[lo] - W[hi]  # (n-1, d): z_lo - z_hi < 0
    c = np.zeros(len(lo)) if b is None else b[lo] - b[hi]
    return A, c


def enumerate_rankings(W: np.ndarray, b: np.ndarray | None, *, bound: float, eps: float) -> dict[str, int]:
    """Count the rankings of the rows of W whose region holds a ball of radius > eps in the box.

    Returns
    -------
    dict
        ``{"feasible": ..., "infeasible": ..., "undecided": ...}`` over all n! rankings.
    """
    counts = {"feasible": 0, "infeasible": 0, "undecided": 0}
    for ranking in itertools.permutations(range(W.shape[0])):
        A, c = ranking_system(W, b, ranking)
        counts[chebyshev(A, c, bound, LPSettings(eps=eps)).status] += 1
    return counts


def region_table(max_n: int, max_d: int, enumerate_max_n: int, *, seed: int, bound: float,
                 eps: float) -> pd.DataFrame:
    """Closed-form counts beside the thesis's tables and, for small n, the enumeration.

    One row per (bias, n, d) with n in 2..max_n, d in 1..max_d. ``enumerated`` is filled for
    n <= enumerate_max_n and d <= n (larger d adds nothing: every ranking is already feasible at d = n - 1).
    """
    rng = np.random.default_rng(seed)
    rows = []
    for bias, paper in ((False, REGIONS_NO_BIAS), (True, REGIONS_BIAS)):
        for n in range(2, max_n + 1):
            for d in range(1, max_d + 1):
                row = {"bias": bias, "n": n, "d": d, "closed_form": count_rankings(n, d, bias),
                       "paper": paper.get((n, d)), "enumerated": None, "undecided": None}
                if n <= enumerate_max_n and d <= n:
                    W = rng.standard_normal((n, d))  # general position with probability 1
                    b = rng.standard_normal(n) if bias else None
                    counts = enumerate_rankings(W, b, bound=bound, eps=eps)
                    row["enumerated"], row["undecided"] = counts["feasible"], counts["undecided"]
                rows.append(row)
    df = pd.DataFrame(rows)
    return df.astype({"paper": "Int64", "enumerated": "Int64", "undecided": "Int64"})


def grid(df: pd.DataFrame, bias: bool, column: str = "closed_form") -> pd.DataFrame:
    """The thesis's layout: one row per n, one column per d."""
    sub = df[df["bias"] == bias].pivot(index="n", columns="d", values=column)
    sub.columns = [f"d={d}" for d in sub.columns]
    return sub.reset_index()


def check_region_table(df: pd.DataFrame) -> None:
    """Fail loudly if a closed-form or enumerated cell differs from the thesis's tables."""
    for bias, name in ((False, "Table A.1 (no bias)"), (True, "Table A.2 (bias)")):
        sub = df[df["bias"] == bias].set_index(["n", "d"])
        paper = sub["paper"].dropna()
        compare_cells(sub["closed_form"], paper, f"thesis {name}, closed form")
        compare_cells(sub["enumerated"].dropna(), paper, f"thesis {name}, enumeration with the core")
        undecided = sub["undecided"].dropna()
        if (undecided > 0).any():
            raise ReproductionError(f"thesis {name}: the core left rankings undecided at "
                                    f"{undecided[undecided > 0]}")


def run_regions(settings: RegionsConfig | Mapping, out: dict, *, seed: int, config=None) -> pd.DataFrame:
    """Rule ``count_regions``: write the long table and the two thesis-layout grids; fail on any mismatch.

    Parameters
    ----------
    settings : RegionsConfig or mapping
        ``theory.regions`` (max_n, max_d, enumerate_max_n, bound, eps).
    out : dict
        Output paths with keys ``table``, ``no_bias``, ``bias`` (.parquet; a .md copy is written beside).
    seed : int
        Seed of the random W used for enumeration.
    config : dict, optional
        Whole composed config, recorded as provenance.
    """
    settings = typed(RegionsConfig, settings)
    df = region_table(settings.max_n, settings.max_d, settings.enumerate_max_n, seed=seed,
                      bound=settings.bound, eps=settings.eps)
    check_region_table(df)
    write_tables({"table": df, "no_bias": grid(df, False), "bias": grid(df, True)}, out, config)
    return df
