"""Multi-label output layers: the bottlenecked sigmoid layer (BSL) and the DFT layer.

Both map encoder features e to logits z = W x with x = P e + b (thesis eq. 4.6). The BSL learns
W (n x d); the DFT layer is :class:`argmaxable.layers.DFTSigmoidHead`, which fixes the first 2k+1 columns of W
to the truncated DFT matrix (thesis eq. 5.10) and learns s slack columns (thesis §5.1.2). ``head.weights()[0]``
is the full classifier W for LP verification; :func:`composite` the map from encoder features to logits.
"""

from __future__ import annotations

import numpy as np
from torch import nn

from argmaxable.layers import DFTSigmoidHead
from argmaxable.multilabel.schema import HEADS


class BSLHead(nn.Module):
    """Bottlenecked sigmoid layer: Linear(e, d, bias) then Linear(d, n, no bias) (thesis §4.1.2)."""

    def __init__(self, e: int, n: int, d: int):
        super().__init__()
        self.projection = nn.Linear(e, d)
        self.classifier = nn.Linear(d, n, bias=False)

    def forward(self, features):
        return self.classifier(self.projection(features))  # (B, e) -> (B, d) -> (B, n)

    def weights(self) -> tuple[np.ndarray, None]:
        """``(W, None)``: the classifier matrix (n x d) in float64, as the LP verifies it; no bias."""
        return self.classifier.weight.detach().cpu().double().numpy(), None


Head = BSLHead | DFTSigmoidHead


def composite(head: Head) -> tuple[np.ndarray, np.ndarray]:
    """The map from encoder features to logits: ``(W P, W b)``, shapes (n, e) and (n,), float64."""
    W = head.weights()[0]
    P = head.projection.weight.detach().cpu().double().numpy()  # (D, e)
    b = head.projection.bias.detach().cpu().double().numpy()  # (D,)
    return W @ P, W @ b


def trainable_parameters(head: Head) -> int:
    """Number of trainable parameters of projection plus classifier (thesis Fig. 5.6(b))."""
    return sum(p.numel() for p in head.parameters() if p.requires_grad)


def make_head(kind: str, e: int, n: int, d: int, k: int) -> Head:
    """Build a head by name: ``"bsl"`` (d features) or ``"dft"`` (2k+1 fixed plus d slack features)."""
    if kind == "bsl":
        return BSLHead(e, n, d)
    if kind == "dft":
        return DFTSigmoidHead(e, n, k, slack=d)
    raise ValueError(f"head kind must be one of {HEADS}; got {kind!r}")
