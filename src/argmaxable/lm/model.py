"""The window language model: the previous few words -> a d-dim bottleneck -> softmax over the vocabulary.

A Bengio et al. (2003) style model, small enough to train on 2 CPU cores in a minute: the embeddings of the
``context`` previous tokens are concatenated, passed through one hidden layer, projected to d features and
an activation, and the head ``softmax(W x + b)`` (W: n x d, b: n) scores every token. The head is the layer
the detection family checks; the activation is what bounds its inputs (the activation-aware box). The head is
a plain ``nn.Linear(d, n)`` or one of the heads of :mod:`argmaxable.layers` that cannot lose tokens
(:data:`HEADS`).
"""

from __future__ import annotations

import torch
from torch import nn

from argmaxable.layers import DFTSoftmaxHead, SphericalSoftmaxHead
from argmaxable.lm.schema import HEADS

ACTIVATIONS = {"gelu": nn.GELU, "silu": nn.SiLU, "relu": nn.ReLU, "tanh": nn.Tanh}  # names of core.activation_bounds
# Softmax heads of width d: plain; rows on a sphere, no bias (every token argmaxable, thesis §5.2.1); the DFT head
# (Prop. 5.3) with k = d/2, or with k = d/4 and d - 2k learnable slack columns (every top-k ranking argmaxable),
# its rows in "centred" order: the vocabulary is sorted by frequency, so a cosine feature can carry the unigram prior.


def dft_sizes(kind: str, d: int) -> tuple[int, int]:
    """``(k, slack)`` of a DFT head of width d = 2k + slack: ``dft`` k = d/2, ``dft_slack`` k = d/4.

    Examples
    --------
    >>> dft_sizes("dft", 8), dft_sizes("dft_slack", 8)
    ((4, 0), (2, 4))
    """
    if kind == "dft":
        if d % 2:
            raise ValueError(f"The DFT softmax head needs an even width d = 2k. Got d={d}.")
        return d // 2, 0
    if d < 4:
        raise ValueError(f"The DFT head with slack needs d >= 4 (k = d/4 >= 1). Got d={d}.")
    return d // 4, d - 2 * (d // 4)


def softmax_head(kind: str, d: int, n: int) -> nn.Module:
    """The head of width d over n tokens by name (:data:`HEADS`).

    Examples
    --------
    >>> softmax_head("dft", 4, 10).weights()[0].shape
    (10, 4)
    """
    if kind == "linear":
        return nn.Linear(d, n)
    if kind == "spherical":
        return SphericalSoftmaxHead(d, n, bias=False)
    if kind in ("dft", "dft_slack"):
        k, slack = dft_sizes(kind, d)
        return DFTSoftmaxHead(d, n, k, slack=slack, order="centred")  # rows 0, 1, ...: the frequent tokens
    raise ValueError(f"The 'head' parameter must be one of {HEADS}. Got {kind!r}.")


class WindowLM(nn.Module):
    """Next-token model over a fixed window of previous tokens with a d-dim softmax bottleneck.

    Parameters
    ----------
    n : int
        Vocabulary size (rows of the head).
    context : int
        Previous tokens read.
    embed_dim, hidden : int
        Token embedding width and hidden layer width.
    d : int
        Bottleneck width (columns of the head).
    activation : str
        Activation of the bottleneck, one of :data:`ACTIVATIONS`.
    head : str, default "linear"
        The softmax head, one of :data:`HEADS` (:func:`softmax_head`).

    Examples
    --------
    >>> model = WindowLM(n=10, context=3, embed_dim=4, hidden=8, d=2, activation="gelu")
    >>> model(torch.zeros(5, 3, dtype=torch.long)).shape
    torch.Size([5, 10])
    """

    def __init__(self, n: int, context: int, embed_dim: int, hidden: int, d: int, activation: str,
                 head: str = "linear"):
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"The 'activation' parameter of WindowLM must be one of {sorted(ACTIVATIONS)}. "
                             f"Got {activation!r}.")
        self.embed = nn.Embedding(n, embed_dim)
        self.encoder = nn.Sequential(
            nn.Linear(context * embed_dim, hidden), nn.GELU(), nn.Linear(hidden, d), ACTIVATIONS[activation]()
        )
        self.head = softmax_head(head, d, n)  # the checked softmax layer

    def features(self, ctx: torch.Tensor) -> torch.Tensor:
        """The head's inputs x for contexts ``ctx`` (B, context) -> (B, d)."""
        return self.encoder(self.embed(ctx).flatten(1))  # (B, context, e) -> (B, context * e) -> (B, d)

    def forward(self, ctx: torch.Tensor) -> torch.Tensor:
        """Next-token logits (B, context) -> (B, n)."""
        return self.head(self.features(ctx))
