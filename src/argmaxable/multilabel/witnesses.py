"""Proposed witnesses of the DFT head's label sets, built from the alternation construction (thesis §5.1, Prop. 5.1
and Thm 5.3), for the core to check like any point.

The logits of the truncated DFT layer ``W^DFT_{n,2k+1}`` (thesis eq. 5.10) at a point x are a trigonometric
polynomial p of degree k sampled at t_i = 2 pi i / n: ``z_i = p(t_i)``. A label set whose active labels form r <= k
runs on the circle of labels changes sign 2r <= 2k times, and the polynomial

    p(t) = +-prod_j sin((t - theta_j) / 2)  *  Q(t),

with a root theta_j half a label outside each end of each run, has exactly its sign pattern (a product of 2r
half-angle sines is a trigonometric polynomial of degree r). Q > 0 of degree k - r spends the degrees left on
raising |p| near the roots, where the margins are smallest: a sum of Fejér kernels centred on the roots, each
weighted by 1 / |prod's derivative there|. The coefficients of p are its x (the DFT columns are orthonormal), slack
columns get 0 (thesis Prop. 5.2). Nothing here is trusted: the core scales each point to the box's edge and checks
it against every row in float64 with its rounding bounded (``check_assignments(proposals=...)``). A set the point
does not close (its float64 margin too small: many runs, a thin region, the product's values near clustered roots
cancelling; or a set beyond k runs) goes to the core's stages, its LP starting at the point with the rows where a
degree-k polynomial's sign is decided in its first working set (:func:`seed_rows`).
"""

from __future__ import annotations

import math

import numpy as np

from argmaxable.constructions import dft_matrix

# Relative tolerance to which a head's first 2k+1 columns must equal the truncated DFT matrix for its label sets to
# get proposals: the head's inverse FFT computes them in float32 (a proposal is only a proposal: a looser match
# would only cost the check of a point that fails).
DFT_MATCH = 1e-5

# The first working set of a set's LP: the rows of every GRID-th label and of the NEAR labels each side of every
# active one. A degree-k polynomial varies over about n / k labels, so between two grid labels it rarely crosses zero,
# and the active labels' neighbours are where its sign changes. On the first 100 sets of the BioASQ-sized benchmark
# row (n = 20000, k = 24; benchmarks/RESULTS.md) the float stages took 907 LP rounds (at most 76 a set) and 32 s with
# these rows, 3141 rounds (at most 138) and 213 s with the LP started as without them (at reflection's iterate from
# the same points, its default first rows).
GRID = 50
NEAR = 3


def cyclic_runs(active: np.ndarray, n: int) -> np.ndarray:
    """The runs of consecutive active labels on the circle 0..n-1, as (r, 2) ``[first, last]`` (a run may wrap
    past n - 1); none for the empty and the full set."""
    a = np.unique(np.asarray(active, dtype=np.int64))
    if a.size in (0, n):
        return np.zeros((0, 2), dtype=np.int64)
    firsts = a[(a - np.roll(a, 1)) % n != 1]
    lasts = a[(np.roll(a, -1) - a) % n != 1]
    if lasts[0] < firsts[0]:  # the run through label 0 wraps: its last label is the first one listed
        lasts = np.roll(lasts, -1)
    return np.stack([firsts, lasts], axis=1)


def alternation_coefficients(active, n: int, k: int) -> np.ndarray | None:
    """The coefficients x (2k+1,) of a degree-k trigonometric polynomial with the sign pattern of label set
    ``active`` at t_i = 2 pi i / n, in the basis of :func:`argmaxable.constructions.dft_matrix` (``W^DFT x``
    samples it); None where the set has more than k runs (no such polynomial: thesis Thm 5.3)."""
    runs = cyclic_runs(active, n)
    x = np.zeros(2 * k + 1)
    if not runs.size:
        x[0] = math.sqrt(n) * (1.0 if len(np.unique(active)) == n else -1.0)  # the constant +-1
        return x
    r = len(runs)
    if r > k:
        return None
    roots = np.concatenate([runs[:, 0] - 0.5, runs[:, 1] + 0.5]) * (2 * np.pi / n)  # (2r,)
    samples = 4 * k + 4  # > 2k equispaced samples determine a degree-k polynomial's coefficients exactly
    s = (np.arange(samples) + 0.5) * (2 * np.pi / samples)
    prod = np.prod(np.sin((s[:, None] - roots[None, :]) / 2), axis=1)  # (samples,)
    boost = np.ones(samples)
    degrees = k - r
    if degrees > 0:
        gaps = np.abs(np.sin((roots[:, None] - roots[None, :]) / 2))
        np.fill_diagonal(gaps, 1.0)
        log_slope = np.log(gaps).sum(axis=1)  # log of 2 |prod'(theta_j)|
        weights = np.exp(log_slope.min() - log_slope)  # 1 / |prod'|, the largest 1
        lags = np.arange(1, degrees + 1)
        taper = 1 - lags / (degrees + 1)  # Fejér's: the kernel 1 + 2 sum taper_l cos(l u) >= 0
        u = s[:, None] - roots[None, :]  # (samples, 2r)
        fejer = 1 + 2 * np.cos(u[..., None] * lags) @ taper  # (samples, 2r)
        boost = fejer @ weights + 1e-3 * weights.sum()  # > 0 everywhere
    p = prod * boost
    # p's coefficients from its samples (exact for degree k < samples / 2), then the DFT columns' scaling
    freq = s[:, None] * np.arange(1, k + 1)
    x[0] = p.mean() * math.sqrt(n)
    x[1::2] = (2 / samples) * (np.cos(freq).T @ p) * math.sqrt(n / 2)
    x[2::2] = (2 / samples) * (np.sin(freq).T @ p) * math.sqrt(n / 2)
    # the sign: positive at the middle of the first run (the product's sign there is fixed by the roots' order)
    first, last = runs[0]
    mid = (first + ((last - first) % n) / 2) * (2 * np.pi / n)
    at = x[0] / math.sqrt(n) + math.sqrt(2 / n) * (
        np.cos(mid * np.arange(1, k + 1)) @ x[1::2] + np.sin(mid * np.arange(1, k + 1)) @ x[2::2])
    return x if at > 0 else -x


def is_dft_head(W: np.ndarray, k: int) -> bool:
    """Whether W's first 2k+1 columns are the truncated DFT matrix (to :data:`DFT_MATCH`, relative)."""
    n, d = W.shape
    if not (k >= 0 and 2 * k + 1 <= min(n, d)):
        return False
    ref = dft_matrix(n, k)
    return bool(np.abs(W[:, : 2 * k + 1] - ref).max() <= DFT_MATCH * np.abs(ref).max())


def seed_rows(active, n: int) -> np.ndarray:
    """The labels whose rows start the LP of label set ``active`` (see :data:`GRID`), sorted."""
    act = np.asarray(active, dtype=np.int64)
    near = ((act[:, None] + np.arange(-NEAR, NEAR + 1)) % n).ravel()
    return np.union1d(np.arange(0, n, GRID), near)


def dft_proposals(W: np.ndarray, k: int, assignments) -> tuple[np.ndarray, list[np.ndarray]]:
    """One proposed point (W.shape[1],) per label set of a DFT head with k frequencies, the alternation construction
    (slack coordinates 0; NaN for a set beyond k runs), and the rows its LP starts with where the point does not
    close it (:func:`seed_rows`). All NaN and no rows where W is not such a head."""
    n, d = W.shape
    out = np.full((len(assignments), d), np.nan)
    if not is_dft_head(W, k):
        return out, [np.zeros(0, dtype=np.int64)] * len(assignments)
    for j, active in enumerate(assignments):
        x = alternation_coefficients(active, n, k)
        if x is not None:
            out[j] = 0.0
            out[j, : 2 * k + 1] = x
    return out, [seed_rows(active, n) for active in assignments]
