"""Floating-point helpers every stage uses to stay rigorous at any magnitude.

- :func:`range_scale`: one power of two that brings a layer's largest entry into [2^-500, 2^500]. Scaling every
  row and offset of a halfspace system by the same positive number changes no region, no witness, no radius and
  no certificate, and a power of two scales exactly (unless an entry underflows): a layer at 1e300 (whose squares
  overflow) or 1e-170 (whose squares underflow) is checked as the same layer in range.
- :func:`row_norms`: norms computed on rows scaled by their own largest entry, so a row whose entries are tiny
  next to the others' (a near-duplicate's difference, 1e-170) keeps a positive norm; only an exactly zero row
  has norm 0 (duplicates are found by exact equality, never by a norm that underflowed).
- :func:`gamma`: Higham's bound on the relative error of a k-term float64 sum or dot product, which every
  float64 acceptance subtracts.
"""

from __future__ import annotations

import numpy as np

U64 = 2.0**-53  # unit roundoff of float64


def gamma(k: int, u: float = U64) -> float:
    """gamma_k = k u / (1 - k u): |fl(sum of k terms) - sum| <= gamma_k * sum of their absolute values."""
    return k * u / (1.0 - k * u)


def range_scale(top: float) -> float:
    """The power of two s that brings a largest |entry| ``top`` outside [2^-500, 2^500] back: above, only down to
    [2^499, 2^500) (squares still fit, and small entries keep 2^500 more room before they underflow); below, up
    to [0.5, 1). 1.0 inside the range or for 0."""
    if top == 0.0 or 2.0**-500 <= top <= 2.0**500:
        return 1.0
    e = int(np.frexp(top)[1])
    return float(np.ldexp(1.0, 500 - e if top > 1 else -e))


def row_norms(A: np.ndarray, squares: np.ndarray | None = None) -> np.ndarray:
    """Euclidean norm of each row, without overflow or underflow of the squares: rows whose plain norm is
    infinite or below 1e-150 (where squares may have been lost) are recomputed divided by their largest
    |entry|. Exactly zero rows, and only they, get 0. ``squares``: the rows' squared norms if already computed
    (in float64), so that only the rows to redo are read again."""
    out = np.sqrt(np.einsum("nd,nd->n", A, A) if squares is None else squares)
    redo = np.flatnonzero(~(out >= 1e-150) | ~np.isfinite(out))
    if redo.size:
        Ab = np.asarray(A[redo], dtype=np.float64)
        top = np.abs(Ab).max(axis=1)
        scaled = Ab / np.where(top > 0, top, 1.0)[:, None]
        out[redo] = np.sqrt(np.einsum("nd,nd->n", scaled, scaled)) * top
    return out


def chunked_product(M: np.ndarray, H: np.ndarray, chunk: int = 64) -> tuple[np.ndarray, int]:
    """``M @ H`` summed over chunks of ``chunk`` rows of H, the chunks' products added pairwise (a binary counter:
    at most log2 partial sums are held); and ``k`` such that each entry's rounding is at most gamma_k times the
    same product of absolute values (chunk + twice the tree depth + 1). Over n rows that is
    gamma_(64 + 2 log2(n/64)) instead of gamma_n: 1e-12 at n = 9k would be about eps once times B = 1e4."""
    stack: list[tuple[int, np.ndarray]] = []
    count = 0
    for s in range(0, H.shape[0], chunk):
        part, level = M[:, s : s + chunk] @ H[s : s + chunk], 0
        while stack and stack[-1][0] == level:
            part, level = stack.pop()[1] + part, level + 1
        stack.append((level, part))
        count += 1
    total = stack.pop()[1] if stack else np.zeros((M.shape[0], H.shape[1]))
    while stack:
        total = stack.pop()[1] + total
    depth = int(np.ceil(np.log2(max(count, 1))))
    return total, chunk + 2 * depth + 1
