"""The approximate dual stage: Gordan certificates by projection, batched over label assignments.

The approximate primal stage (:mod:`reflect`) proves items argmaxable; this one proves them unargmaxable, and
is just as one-sided. A label assignment's rows are the rows of one fixed matrix with signs: normalised, its
system is ``s_i h_i . (x, 1) < 0`` with ``h_i = [w_i, b_i] / ||w_i||`` and ``s_i = -y_i``. Any weights
``mu >= 0``, not all zero, with ``sum_i mu_i s_i h_i = 0`` prove that no x satisfies every row (Gordan's
alternative), and they bound the Chebyshev radius by ``sup_box(-sum mu_i s_i h_i[:d]) - sum mu_i s_i h_i[d] ~ 0``
(:func:`argmaxable.core.chebyshev.dual_bound`, with ``mu`` summing to 1; ``B ||.||_1`` for the box |x_j| <= B).

Such weights are found without an LP. The projection ``P = H (HᵀH)⁺ Hᵀ`` onto the column space of H does not
depend on the signs, because the Gram matrix ``Σ (s_i h_i)(s_i h_i)ᵀ = HᵀH`` does not; so one factorisation
serves every assignment, and ``mu = omega - s∘P(s∘omega)`` satisfies ``Σ mu_i s_i h_i = 0`` for any omega.
Starting from omega = 1, the few entries of mu that come out non-positive get more weight and the projection
is repeated. Each round is two matrix products over a batch of assignments. When n is far above the
rank, as in a wide label set with a narrow bottleneck, one or two rounds prove nearly every assignment that is
unargmaxable (measured: all 10k of a Gaussian 8921x561 layer, where each LP takes seconds). What
this stage cannot prove goes on to reflection and the exact LP as before.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from argmaxable.core.box import support
from argmaxable.core.numerics import chunked_product, gamma, row_norms

# Entries of mu must exceed this fraction of their weight omega to count as safely positive.
FLOOR = 1e-3
# Re-weighting rounds before giving up on an item (an argmaxable item can never succeed).
MAX_ROUNDS = 4


@dataclass
class GordanOutcome:
    """Per-item result of the dual stage."""

    proven: np.ndarray  # (T,) bool: weights found whose float64 bound is <= eps
    upper: np.ndarray  # (T,) certified upper bound on the Chebyshev radius (inf where not proven)
    rows: np.ndarray  # the constraint rows the weights refer to (shared by every item)
    weights: dict  # position -> (len(rows),) float64 weights summing to 1, for proven items


def _pseudo_inverse_gram(H: np.ndarray) -> tuple[np.ndarray, int]:
    """(HᵀH)⁺ and the rank of H, from the symmetric eigendecomposition of the small Gram matrix."""
    G = H.T @ H
    vals, vecs = np.linalg.eigh(G)
    keep = vals > vals.max(initial=0.0) * G.shape[0] * np.finfo(np.float64).eps
    inv = (vecs[:, keep] / vals[keep]) @ vecs[:, keep].T
    return inv, int(keep.sum())


def batch_size(n: int, budget_bytes: int = 1 << 27) -> int:
    """Items per batch so that one (batch × n) float64 block stays within ``budget_bytes``."""
    return max(1, min(2048, budget_bytes // (8 * max(n, 1))))


def gordan_certificates(W: np.ndarray, b: np.ndarray | None, signs: np.ndarray, *,
                        box: tuple[np.ndarray, np.ndarray], eps: float, progress=None) -> GordanOutcome:
    """Try to prove each sign pattern's system ``signs_i (w_i . x + b_i) < 0`` infeasible (see module doc).

    Parameters
    ----------
    W : ndarray, shape (n, d)
        Rows, float64.
    b : ndarray, shape (n,), optional
        Offsets (bias).
    signs : ndarray, shape (T, n)
        +1/-1 per row and item: the item's constraint ``i`` is ``signs[i] * (w_i . x + b_i) < 0``.
    box : (ndarray, ndarray)
        Per-coordinate ends ``(lo, hi)`` of the box (:func:`argmaxable.core.box.make_box`).
    eps : float
        The radius that counts as a region.
    progress : callable, optional
        Called with the number of items finished after each batch.
    """
    T = len(signs)
    progress = progress or (lambda k: None)
    norms = row_norms(W)
    rows = np.flatnonzero(norms > 0)  # a zero row is a constant constraint: a certificate may ignore it
    H = W[rows] / norms[rows, None]
    if b is not None:
        H = np.hstack([H, (b[rows] / norms[rows])[:, None]])
    d = W.shape[1]
    lo, hi = box
    # Per row: sum_j max(|lo_j|, |hi_j|) |h_ij| and |h_i,d|, for the rounding bound of the check sum.
    habs = np.abs(H[:, :d]) @ np.maximum(np.abs(lo), np.abs(hi)) + (np.abs(H[:, d]) if b is not None else 0.0)
    upper = np.full(T, np.inf)
    out = GordanOutcome(np.zeros(T, dtype=bool), upper, rows, {})
    Ginv, rank = _pseudo_inverse_gram(H)
    if len(rows) <= rank:  # the rows are independent: no weights cancel them (Gordan), skip the stage
        progress(T)
        return out
    step = batch_size(len(rows))
    rowset = _Rows(H, Ginv, habs, np.maximum(np.abs(lo), np.abs(hi)), b is not None)
    for first in range(0, T, step):
        pos = np.arange(first, min(first + step, T))
        _prove_batch(out, pos, signs[pos][:, rows].astype(np.float64), rowset, box, eps)
        progress(min(step, T - first))
    return out


@dataclass(frozen=True)
class _Rows:
    """The nonzero rows of a check's systems as :func:`_prove_batch` reads them: normalised (``H``, with the offset
    column where there is a bias), the pseudo-inverse of their Gram matrix, each row's |h_i| against the box
    (``habs``), and ``reach``, the bound on |x_j| over the box, for the rounding bound of the check sum."""

    H: np.ndarray
    Ginv: np.ndarray
    habs: np.ndarray
    reach: np.ndarray
    has_bias: bool


def _prove_batch(out: GordanOutcome, pos, S, rows: _Rows, box, eps: float) -> None:
    """Re-weighting rounds for the items ``pos`` (signs ``S`` over ``rows``), writing the proven ones into ``out``."""
    H, Ginv, habs, reach, has_bias = rows.H, rows.Ginv, rows.habs, rows.reach, rows.has_bias
    d = H.shape[1] - has_bias
    omega = np.ones_like(S)
    for _ in range(MAX_ROUNDS + 1):
        V = S * omega
        mu = omega - S * ((V @ H) @ Ginv @ H.T)
        low = mu <= FLOOR * omega
        positive = ~low.any(axis=1)
        cand = np.flatnonzero(positive)
        if cand.size:
            R, k_sum = chunked_product(S[cand] * mu[cand], H)  # Σ mu_i s_i h_i: ~0, recomputed as the check
            total = mu[cand].sum(axis=1)
            bias_term = R[:, d] if has_bias else 0.0
            terms = support(-R[:, :d], *box)
            # Rounding: the chunked sums, h_i = w_i / ||w_i|| (relative u per entry), the support's d terms;
            # the rows' true norms are within gamma_(d+4) of 1.
            err = (gamma(k_sum + 3) * (mu[cand] @ habs)
                   + gamma(d + 2) * (np.abs(R[:, :d]) @ reach + np.abs(bias_term)))
            num = terms - bias_term + err
            bnd = num / np.where(num > 0, 1 - gamma(d + 4), 1 + gamma(d + 4)) / total
            for k in np.flatnonzero(bnd <= eps):
                p = int(pos[cand[k]])
                out.proven[p], out.upper[p] = True, bnd[k]
                out.weights[p] = mu[cand[k]] / total[k]
        keep = ~positive  # positive weights whose bound failed are numerical trouble: leave them to the LP
        if not keep.any():
            break
        pos, S, omega, mu, low = pos[keep], S[keep], omega[keep], mu[keep], low[keep]
        omega = np.where(low, (2.0 + FLOOR) * omega - mu, omega)
