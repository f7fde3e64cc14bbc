"""The window language model: the previous few words -> a d-dim bottleneck -> softmax over the vocabulary.

A Bengio et al. (2003) style model, small enough to train on 2 CPU cores in a minute: the embeddings of the
``context`` previous tokens are concatenated, passed through one hidden layer, projected to d features and
an activation, and the head ``softmax(W x + b)`` (W: n x d, b: n) scores every token. The head is the layer
the detection family checks; the activation is what bounds its inputs (the activation-aware box).
"""

from __future__ import annotations

import torch
from torch import nn

ACTIVATIONS = {"gelu": nn.GELU, "silu": nn.SiLU, "relu": nn.ReLU, "tanh": nn.Tanh}  # names of core.activation_bounds


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

    Examples
    --------
    >>> model = WindowLM(n=10, context=3, embed_dim=4, hidden=8, d=2, activation="gelu")
    >>> model(torch.zeros(5, 3, dtype=torch.long)).shape
    torch.Size([5, 10])
    """

    def __init__(self, n: int, context: int, embed_dim: int, hidden: int, d: int, activation: str):
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"The 'activation' parameter of WindowLM must be one of {sorted(ACTIVATIONS)}. "
                             f"Got {activation!r}.")
        self.embed = nn.Embedding(n, embed_dim)
        self.encoder = nn.Sequential(
            nn.Linear(context * embed_dim, hidden), nn.GELU(), nn.Linear(hidden, d), ACTIVATIONS[activation]()
        )
        self.head = nn.Linear(d, n)  # the checked softmax layer: weight (n, d), bias (n,)

    def features(self, ctx: torch.Tensor) -> torch.Tensor:
        """The head's inputs x for contexts ``ctx`` (B, context) -> (B, d)."""
        return self.encoder(self.embed(ctx).flatten(1))  # (B, context, e) -> (B, context * e) -> (B, d)

    def forward(self, ctx: torch.Tensor) -> torch.Tensor:
        """Next-token logits (B, context) -> (B, n)."""
        return self.head(self.features(ctx))
