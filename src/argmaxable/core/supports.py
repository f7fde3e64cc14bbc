"""The dual stage for categories: certificates passed on from one category to the next.

Category t of softmax(Wx + b) is unargmaxable when weights ``lambda >= 0`` on other rows, summing to 1, put
``w_t`` inside their convex hull with at least its bias: ``sum lambda_i w_i = w_t`` and ``sum lambda_i b_i >= b_t``
(Gordan's alternative for the rows ``w_i - w_t``). Within a box the cancellation may be inexact: with
``n_i = ||w_i - w_t||``, ``Z = sum lambda_i n_i`` and ``v = sum lambda_i (w_i - w_t) / Z``, the Chebyshev radius is
at most ``sup_{x in box} (-v.x) - sum lambda_i (b_i - b_t) / Z``, the bound of
:func:`argmaxable.core.chebyshev.dual_bound` for the weights ``y_i = lambda_i n_i / Z`` on the normalised rows.

Every such system ``[w_i - w_t, 1]`` is a shift of the rows of ``[W, 1]``, so a set S of rows that carried an LP
certificate for one category serves every other: the barycentric coordinates of ``[w_t, 1]`` in ``[W_S, 1]``
are one product with the pseudo-inverse of that small matrix, for all remaining categories at once. When they
are non-negative and the bound holds, the category is proven with no LP. Unargmaxable categories of real heads
sit together deep inside the hull (on the PP-OCRv4 head, rows of half the average norm), so their certificates
share simplices: one LP's support proves many of its neighbours.

The stage is one-sided like :mod:`gordan`: it only proves "unargmaxable", and every certificate is checked in
float64 by the same bound as the LP's.
"""

from __future__ import annotations

import numpy as np

from argmaxable.core.chebyshev import dual_bound


class SupportPool:
    """Supports of the certificates found so far, tried on categories not yet decided.

    Parameters
    ----------
    W : ndarray, shape (n, d)
        Rows, float64 or float32 (differences are taken in float64).
    b : ndarray, shape (n,)
        Bias (zeros without one).
    box : (ndarray, ndarray)
        Per-coordinate ends ``(lo, hi)`` of the box.
    eps : float
        The radius that counts as a region.
    """

    def __init__(self, W: np.ndarray, b: np.ndarray, box: tuple[np.ndarray, np.ndarray], eps: float):
        self.W, self.b, self.box, self.eps = W, b, box, eps
        self.supports: list[tuple[np.ndarray, np.ndarray]] = []  # (rows, pinv of [W_S, 1]ᵀ: (k, d+1))
        self._seen: set[bytes] = set()  # the row sets kept so far, for a constant-time duplicate test

    def add(self, rows: np.ndarray) -> None:
        """Keep the category indices ``rows`` of a certificate's positive weights (a new set only)."""
        rows = np.unique(np.asarray(rows, dtype=np.int64))
        key = rows.tobytes()
        if rows.size == 0 or key in self._seen:
            return
        self._seen.add(key)
        M = np.vstack([self.W[rows].T.astype(np.float64), np.ones(rows.size)])  # (d+1, k)
        self.supports.append((rows, _pseudo_inverse(M)))

    def prove(self, items: np.ndarray, start: int = 0) -> dict:
        """Certificates for ``items`` from the supports numbered ``start`` on.

        Returns
        -------
        dict
            Position in ``items`` -> ``(rows, weights, upper)``: category indices, weights on the normalised rows
            ``w_i - w_t`` summing to 1 (as the LP's duals), and the certified bound on the radius (<= eps).
        """
        items = np.asarray(items, dtype=np.int64)
        found: dict = {}
        if items.size == 0:
            return found
        targets = np.vstack([self.W[items].T.astype(np.float64), np.ones(items.size)])  # (d+1, T): [w_t, 1]
        for rows, pinv in self.supports[start:]:
            open_ = np.array([k not in found for k in range(items.size)])
            lam = pinv @ targets[:, open_]  # (k, T'): barycentric coordinates, shared factorisation
            for j in np.flatnonzero(lam.min(axis=0) >= 0):
                pos = int(np.flatnonzero(open_)[j])
                t = int(items[pos])
                if np.isin(t, rows):
                    continue
                A = self.W[rows].astype(np.float64) - self.W[t].astype(np.float64)  # (k, d): t's rows over S
                norms = np.sqrt(np.einsum("kd,kd->k", A, A))
                weights = lam[:, j] * norms
                if np.any(norms == 0) or not weights.sum() > 0:  # a duplicate of t: the LP names it
                    continue
                weights /= weights.sum()
                upper = dual_bound(A, self.b[rows] - self.b[t], norms, np.arange(rows.size), weights, self.box)
                if upper <= self.eps:
                    found[pos] = (rows, weights, upper)
        return found


def _pseudo_inverse(M: np.ndarray) -> np.ndarray:
    """``M``'s pseudo-inverse: by LU when it is square and well conditioned (a vertex certificate's d+1 rows; 8x
    faster than the SVD at d = 120), else by the SVD. Inaccurate coordinates could only fail the bound, which is
    always checked; the residual test keeps the SVD's least-squares answer for nearly singular supports."""
    if M.shape[0] == M.shape[1]:
        try:
            inverse = np.linalg.inv(M)
        except np.linalg.LinAlgError:
            pass
        else:
            if np.abs(M @ inverse - np.eye(len(M))).max() < 1e-8:
                return inverse
    return np.linalg.pinv(M)
