"""The layers the families check, built in numpy (no torch): DFT, random, and prescribed targets.

- Argmaxable by construction: the truncated DFT matrix of thesis eq. 5.10 (:func:`dft_matrix`) and its ranking
  layer without the constant column (:func:`dft_ranking_layer`, thesis Prop. 5.3). :mod:`argmaxable.layers`
  builds its PyTorch heads on them; :mod:`argmaxable.theory.dft` and :mod:`argmaxable.topm.ranking` check them.
- Random: uniform layers of ACL 2022 Fig. 10 (:func:`random_layer`) and Gaussian ones of Basri & Jacobs §4
  (:func:`gaussian_like`).
- Prescribed probabilities of Basri & Jacobs §6 (:func:`uniform_probabilities`), the targets of the top-m family.
"""

from __future__ import annotations

import math

import numpy as np


def check_dft_size(n: int, k: int) -> None:
    """Refuse a truncated DFT that does not exist: it needs ``0 <= k`` and ``2k + 1 <= n``."""
    if k < 0 or 2 * k + 1 > n:
        raise ValueError(
            f"the truncated DFT needs 0 <= k and 2k+1 <= n (thesis eq. 5.10); got n={n}, k={k}. "
            f"Lower k_active to at most {(n - 1) // 2}."
        )


def dft_matrix(n: int, k: int) -> np.ndarray:
    """The truncated DFT matrix W^DFT_{n,2k+1} of thesis eq. (5.10).

    Parameters
    ----------
    n : int
        Number of labels (rows).
    k : int
        Highest frequency kept; the matrix has 2k+1 orthonormal columns
        ``[1/sqrt(n), sqrt(2/n) cos(t), sqrt(2/n) sin(t), ..., sqrt(2/n) cos(kt), sqrt(2/n) sin(kt)]``
        with ``t_i = 2 pi (i-1) / n``.

    Returns
    -------
    np.ndarray of shape (n, 2k+1), float64

    Examples
    --------
    >>> W = dft_matrix(4, 1)
    >>> W.shape
    (4, 3)
    >>> bool(np.allclose(W.T @ W, np.eye(3)))
    True
    """
    check_dft_size(n, k)
    t = 2 * np.pi * np.arange(n) / n  # (n,)
    freq = t[:, None] * np.arange(1, k + 1)[None, :]  # (n, k)
    W = np.empty((n, 2 * k + 1))
    W[:, 0] = 1 / math.sqrt(n)
    W[:, 1::2] = math.sqrt(2 / n) * np.cos(freq)
    W[:, 2::2] = math.sqrt(2 / n) * np.sin(freq)
    return W


def dft_ranking_layer(n: int, k: int) -> np.ndarray:
    """``W^DFT_{n,2k+1}`` without its constant (DC) column: shape (n, 2k) (thesis Prop. 5.3).

    Examples
    --------
    >>> dft_ranking_layer(8, 2).shape
    (8, 4)
    """
    return dft_matrix(n, k)[:, 1:]


def random_layer(n: int, d: int, *, low: float, high: float, bias: bool, seed: int):
    """W (n, d) and b (n,) or None, i.i.d. U(low, high); the stream depends on (seed, d) only."""
    rng = np.random.default_rng([seed, d])
    W = rng.uniform(low, high, (n, d))
    b = rng.uniform(low, high, n) if bias else None
    return W, b


def gaussian_like(shape: tuple[int, int], seed: int) -> np.ndarray:
    """A random output matrix of Basri & Jacobs §4: i.i.d. N(0, 1) entries, no bias (its stream is keyed by the
    shape too, so it never repeats a synthetic model drawn from the same seed)."""
    return np.random.default_rng((seed, *shape)).standard_normal(shape)


def uniform_probabilities(m: int, rng: np.random.Generator, low: float = 0.1, high: float = 1.1) -> np.ndarray:
    """Targets of Basri & Jacobs §6: m values drawn from U(low, high), normalised to sum to 1 (ratio at most high/low).

    Examples
    --------
    >>> p = uniform_probabilities(5, np.random.default_rng(0))
    >>> bool(np.isclose(p.sum(), 1.0) and p.max() / p.min() <= 11)
    True
    """
    p = rng.uniform(low, high, size=m)
    return p / p.sum()
