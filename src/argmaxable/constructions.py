"""Layers argmaxable by construction, as numpy matrices (no torch): the truncated DFT matrix of thesis eq. 5.10.

:mod:`argmaxable.layers` builds its PyTorch heads on these; :mod:`argmaxable.theory.dft` and
:mod:`argmaxable.topm.ranking` check them with the core.
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
