"""Multi-label output layers: the bottlenecked sigmoid layer (BSL) and the DFT layer.

Both map encoder features e to logits z = W x with x = P e + b (thesis eq. 4.6). The BSL learns
W (n x d); the DFT layer fixes the first 2k+1 columns of W to the truncated DFT matrix (thesis eq. 5.10),
which makes every assignment with at most k active labels argmaxable (thesis Thm 5.4, Prop. 5.1), and
learns s slack columns (thesis §5.1.2). Its fixed part is applied with an inverse real FFT in O(n log n)
(thesis A.10), and :meth:`Head.W` returns the full matrix for LP verification.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from argmaxable.multilabel.schema import HEADS


def _check_dft_size(n: int, k: int) -> None:
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
    _check_dft_size(n, k)
    t = 2 * np.pi * np.arange(n) / n  # (n,)
    freq = t[:, None] * np.arange(1, k + 1)[None, :]  # (n, k)
    W = np.empty((n, 2 * k + 1))
    W[:, 0] = 1 / math.sqrt(n)
    W[:, 1::2] = math.sqrt(2 / n) * np.cos(freq)
    W[:, 2::2] = math.sqrt(2 / n) * np.sin(freq)
    return W


def dft_apply(x: torch.Tensor, n: int) -> torch.Tensor:
    """Compute ``x @ dft_matrix(n, k).T`` with an inverse real FFT (thesis A.10), k = (x.shape[-1]-1)/2.

    The coefficients of frequency j (cosine x[2j-1], sine x[2j]) become the complex number
    sqrt(2/n)/2 (x_cos - i x_sin); ``irfft`` with ``norm="forward"`` then sums
    X_0 + 2 Re(sum_j X_j e^{i j t}), which is exactly the DFT layer's logit (2k+1 <= n, so no Nyquist term).
    """
    k = (x.shape[-1] - 1) // 2
    _check_dft_size(n, k)
    scale = math.sqrt(2 / n) / 2
    dc = (x[..., :1] / math.sqrt(n)).to(torch.complex64 if x.dtype == torch.float32 else torch.complex128)
    waves = torch.complex(x[..., 1::2], -x[..., 2::2]) * scale  # (..., k)
    return torch.fft.irfft(torch.cat([dc, waves], dim=-1), n=n, dim=-1, norm="forward")  # (..., n)


class Head(nn.Module):
    """Projection ``x = P e + b`` followed by a bias-free linear classifier ``z = W x`` (thesis eq. 4.6)."""

    projection: nn.Linear

    def classify(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.classify(self.projection(features))  # (B, e) -> (B, D) -> (B, n)

    def W(self) -> np.ndarray:
        """The classifier matrix (n x D) in float64, as the LP verifies it."""
        raise NotImplementedError

    def composite(self) -> tuple[np.ndarray, np.ndarray]:
        """The map from encoder features to logits: ``(W P, W b)``, shapes (n, e) and (n,), float64."""
        W = self.W()
        P = self.projection.weight.detach().cpu().double().numpy()  # (D, e)
        b = self.projection.bias.detach().cpu().double().numpy()  # (D,)
        return W @ P, W @ b

    def trainable_parameters(self) -> int:
        """Number of trainable parameters of projection plus classifier (thesis Fig. 5.6(b))."""
        return sum(p.numel() for p in self.parameters() if p.requires_grad)


class BSLHead(Head):
    """Bottlenecked sigmoid layer: Linear(e, d, bias) then Linear(d, n, no bias) (thesis §4.1.2)."""

    def __init__(self, e: int, n: int, d: int):
        super().__init__()
        self.projection = nn.Linear(e, d)
        self.classifier = nn.Linear(d, n, bias=False)

    def classify(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(x)

    def W(self) -> np.ndarray:
        return self.classifier.weight.detach().cpu().double().numpy()


class DFTHead(Head):
    """DFT layer: W = [W^DFT_{n,2k+1}, S] with s learnable slack columns S (thesis §5.1.2-5.1.3).

    The projection bias starts at ``[sqrt(n) logit(k/n), 0, ..., 0]`` so that, since the DC column is
    1/sqrt(n), every label starts with probability about k/n (thesis §5.1.3, initialisation trick).
    """

    def __init__(self, e: int, n: int, d: int, k: int):
        super().__init__()
        _check_dft_size(n, k)
        self.n, self.k = n, k
        self.projection = nn.Linear(e, 2 * k + 1 + d)
        # Slack columns initialised like nn.Linear(d, n) weights (thesis Fig. 5.5: randomly initialised).
        self.slack = nn.Parameter(torch.empty(n, d))
        nn.init.kaiming_uniform_(self.slack, a=math.sqrt(5))
        with torch.no_grad():
            self.projection.bias.zero_()
            self.projection.bias[0] = math.sqrt(n) * math.log(k / (n - k)) if k > 0 else 0.0

    def classify(self, x: torch.Tensor) -> torch.Tensor:
        fixed = 2 * self.k + 1
        return dft_apply(x[..., :fixed], self.n) + x[..., fixed:] @ self.slack.T  # (B, n)

    def W(self) -> np.ndarray:
        return np.hstack([dft_matrix(self.n, self.k), self.slack.detach().cpu().double().numpy()])




def make_head(kind: str, e: int, n: int, d: int, k: int) -> Head:
    """Build a head by name: ``"bsl"`` (d features) or ``"dft"`` (2k+1 fixed plus d slack features)."""
    if kind == "bsl":
        return BSLHead(e, n, d)
    if kind == "dft":
        return DFTHead(e, n, d, k)
    raise ValueError(f"head kind must be one of {HEADS}; got {kind!r}")
