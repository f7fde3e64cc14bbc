"""Output layers that cannot lose outputs: PyTorch heads argmaxable by construction (thesis ch. 5).

Each is a drop-in for ``nn.Linear(in_features, n)`` at the end of a model, and :meth:`weights` returns the
matrix W (n x D, as float64) and bias b (or None) of the map ``z = W x + b`` that the checks read: the values the
module computes with, in its own dtype and scale (a scale that underflows in float32 gives the zero matrix the
module uses, not the float64 one it would like to), so the guarantee is verified on the layer as trained:

- :class:`DFTSigmoidHead` (multi-label, sigmoid): a projection to ``x`` (2k+1+s features) and
  ``W = [W^DFT_{n,2k+1}, S]``; every label assignment with at most k active labels is argmaxable
  (thesis Thm 5.4, Prop. 5.1), whatever the s learnable slack columns S (Prop. 5.2). Check with
  ``am.check_assignments(W, Y, b)``.
- :class:`SphericalSoftmaxHead` (multi-class, softmax): learnable rows normalised onto a sphere of one learnable
  radius (thesis §5.2.1); without a bias every category whose row direction is its own is argmaxable. Check with
  ``am.check_categories(W, b=b)``.
- :class:`DFTSoftmaxHead` (softmax, top-k): a projection to ``x`` (2k+s features) and
  ``W = [W^DFT_{n,2k+1} without its constant column, S]`` (scaled by ``sqrt(n/2)``); every top-k ranking, and so
  every category, is argmaxable (thesis Prop. 5.3, d = 2k; slack columns keep it, Prop. 5.2). Check with
  :func:`argmaxable.core.check_rankings`.

The guarantees hold for the inputs x of W anywhere in a box around the origin (the checks' default box): a
model that can only reach part of it (x after a ReLU, say) may still miss outputs. The DFT heads therefore end
in their own unconstrained linear projection, which reaches every x only when it is at least as wide as x: the
softmax DFT head refuses a narrower one; the sigmoid DFT head's guarantee is over its projected features, as the
thesis states it (its multi-label setup projects 64 features to 2k+1+s; that family checks the encoder space too).
Sizes are integers (a float is refused with one line).
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from argmaxable.constructions import check_dft_size, dft_matrix


def _numpy(t: torch.Tensor) -> np.ndarray:
    """A tensor's values as float64 (exactly: every float16, bfloat16 and float32 value is a float64 value)."""
    return t.detach().cpu().double().numpy()


def _size(name: str, value, least: int, head: str) -> int:
    """An integer size of a head, refused in one line when it is not an integer >= ``least``."""
    if not isinstance(value, (int, np.integer)) or isinstance(value, (bool, np.bool_)) or value < least:
        raise ValueError(f"The {name!r} parameter of {head} must be an integer >= {least}. Got {value!r}.")
    return int(value)


def _slack(n: int, s: int) -> nn.Parameter:
    """s slack columns initialised like ``nn.Linear(s, n)`` weights (thesis Fig. 5.5: randomly initialised)."""
    slack = nn.Parameter(torch.empty(n, s))
    if s:
        nn.init.kaiming_uniform_(slack, a=math.sqrt(5))
    return slack


class DFTSigmoidHead(nn.Module):
    """Multi-label head whose every assignment of at most k active labels is argmaxable (thesis §5.1.2-5.1.3).

    Logits ``z = W (P e + c)`` with ``W = [W^DFT_{n,2k+1}, S]``: a learnable projection ``P e + c`` to
    2k+1+s features, the fixed truncated DFT matrix (a stored product: at the sizes of the thesis it costs less than
    the inverse real FFT of thesis A.10, a tenth of it at n = 527 and the same at n = 20000) and s learnable
    slack columns S, which keep the guarantee (Prop. 5.2) and widen the regions (Fig. 5.5). The projection bias
    starts at ``[sqrt(n) logit(k/n), 0, ..., 0]``: since the DC column is 1/sqrt(n), every label starts with
    probability about k/n (§5.1.3, initialisation trick).

    The guarantee is over the projected features x (thesis Thm 5.4); for the head's inputs e it needs a
    projection that reaches every x (``in_features >= 2k+1+s``, of full rank), which this head does not require:
    the thesis's multi-label setup is narrower, and :mod:`argmaxable.multilabel` checks its encoder space too.
    The module holds the DFT matrix in float64 (a cast of the module rounds it, and :meth:`weights` then shows the
    rounded one) and multiplies it in its features' dtype (float32: its float32 rounding, as any product; float16
    and bfloat16 features in float32, the logits rounded once).

    Parameters
    ----------
    in_features : int
        Width of the features e fed to the head (as in ``nn.Linear(in_features, n)``).
    n : int
        Number of labels.
    k : int
        Most active labels guaranteed (2k+1 <= n).
    slack : int, default 0
        Learnable slack columns s.

    Examples
    --------
    >>> import itertools
    >>> import argmaxable as am
    >>> head = DFTSigmoidHead(32, n=12, k=2, slack=4)
    >>> head(torch.randn(5, 32)).shape
    torch.Size([5, 12])
    >>> W, b = head.weights()
    >>> W.shape, b
    ((12, 9), None)
    >>> Y = [list(s) for r in range(3) for s in itertools.combinations(range(12), r)]  # every set of <= 2 labels
    >>> res = am.check_assignments(W, Y, b, workers=1)
    >>> res.counts()["argmaxable"] == len(Y) == 79
    True
    """

    def __init__(self, in_features: int, n: int, k: int, slack: int = 0):
        super().__init__()
        head = type(self).__name__
        in_features, n, k = (_size(a, v, 1, head) for a, v in (("in_features", in_features), ("n", n), ("k", k)))
        slack = _size("slack", slack, 0, head)
        check_dft_size(n, k)
        self.n, self.k = n, k
        self.projection = nn.Linear(in_features, 2 * k + 1 + slack)
        self.slack = _slack(n, slack)
        self.register_buffer("dft", torch.from_numpy(dft_matrix(n, k)), persistent=False)  # (n, 2k+1) float64
        with torch.no_grad():
            self.projection.bias.zero_()
            self.projection.bias[0] = math.sqrt(n) * math.log(k / (n - k)) if k > 0 else 0.0

    def classify(self, x: torch.Tensor) -> torch.Tensor:
        """Logits ``W x`` (B, 2k+1+s) -> (B, n) of the projected features x."""
        fixed = 2 * self.k + 1
        dtype = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32
        waves = (x[..., :fixed].to(dtype) @ self.dft.to(dtype).T).to(x.dtype)
        return waves + x[..., fixed:] @ self.slack.T  # (B, n)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """Logits (B, in_features) -> (B, n)."""
        return self.classify(self.projection(features))

    def weights(self) -> tuple[np.ndarray, None]:
        """``(W, None)``: W = [W^DFT, S] (n x (2k+1+s), as float64) over the projected features, as the module
        stores them (the DFT exact unless the module was cast to a narrower dtype); no bias."""
        return np.hstack([_numpy(self.dft), _numpy(self.slack)]), None


class SphericalSoftmaxHead(nn.Module):
    """Softmax head with its rows on a sphere: ``z = r (v_i / ||v_i||) . x + b_i`` (thesis §5.2.1).

    Every row is a point of the sphere of radius r (one learnable scale, ``r = exp(log_scale)``), so every row is
    a vertex of their convex hull: without a bias, every category is argmaxable (category i wins at
    ``x = v_i``) unless two rows point the same way. A bias can move that point outside a bounded box, so
    ``bias=False`` is the form that keeps the guarantee; with a bias it holds for unbounded inputs only. The rows
    the module computes with are ``exp(log_scale) * v_i / ||v_i||`` in its dtype: a scale trained so far down that
    they underflow (float32: below about 1e-45) makes them all equal, which :meth:`weights` shows as it is, and a
    check then finds (rows equal in the module's dtype are ties, whatever they were in float64). A sphere in one
    dimension has two points, so ``in_features = 1`` is refused for n > 2.

    Parameters
    ----------
    in_features : int
        Width d of the head's inputs.
    n : int
        Number of categories.
    bias : bool, default True
        Learn a bias b (initialised as ``nn.Linear``'s).

    Examples
    --------
    >>> import argmaxable as am
    >>> head = SphericalSoftmaxHead(3, 200, bias=False)
    >>> head(torch.randn(5, 3)).shape
    torch.Size([5, 200])
    >>> W, b = head.weights()
    >>> bool(np.allclose(np.linalg.norm(W, axis=1), 1.0)), b
    (True, None)
    >>> res = am.check_categories(W, b=b, workers=1)
    >>> res.counts()["argmaxable"], bool(am.verify_certificate(res, W).all())
    (200, True)
    """

    def __init__(self, in_features: int, n: int, bias: bool = True):
        super().__init__()
        in_features, n = _size("in_features", in_features, 1, "SphericalSoftmaxHead"), _size(
            "n", n, 1, "SphericalSoftmaxHead")
        if in_features == 1 and n > 2:
            raise ValueError(f"SphericalSoftmaxHead: a sphere in in_features = 1 dimension has two points; {n} "
                             "categories need in_features >= 2.")
        self.weight = nn.Parameter(torch.empty(n, in_features))
        self.log_scale = nn.Parameter(torch.zeros(()))
        self.bias = nn.Parameter(torch.empty(n)) if bias else None
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))  # as nn.Linear
        if self.bias is not None:
            nn.init.uniform_(self.bias, -1 / math.sqrt(in_features), 1 / math.sqrt(in_features))

    def matrix(self) -> torch.Tensor:
        """The rows the module computes with (n, d), in its dtype: ``exp(log_scale) * v_i / ||v_i||``."""
        return self.log_scale.exp() * F.normalize(self.weight, dim=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits (B, d) -> (B, n)."""
        return F.linear(x, self.matrix(), self.bias)

    def weights(self) -> tuple[np.ndarray, np.ndarray | None]:
        """``(W, b)``: :meth:`matrix` (n x d) and the bias (None without one), their values as float64."""
        with torch.no_grad():
            return _numpy(self.matrix()), None if self.bias is None else _numpy(self.bias)


class DFTSoftmaxHead(nn.Module):
    """Softmax head whose every top-k ranking is argmaxable with 2k features (thesis §5.2.2, Prop. 5.3).

    Logits ``z = W (P e + c)`` with ``W = [sqrt(n/2) W^DFT_{n,2k+1}[:, 1:], S]``: a learnable projection to 2k+s
    features, the truncated DFT matrix without its constant column (rows ``cos(j t_i), sin(j t_i)``, j = 1..k,
    on the trigonometric moment curve) and s learnable slack columns S. Every ordered choice of k categories
    can be the top k of z, so every category can be the argmax. The head has no bias: one would break the
    guarantee.

    Parameters
    ----------
    in_features : int
        Width of the features e fed to the head.
    n : int
        Number of categories.
    k : int
        Length of the rankings guaranteed (k >= 1, 2k+1 <= n); the bottleneck has 2k+s features, and
        ``in_features`` must be at least that (a narrower projection cannot reach every x: refused).
    slack : int, default 0
        Learnable slack columns s.
    order : {"index", "centred"}, default "index"
        Where category i sits on the curve: at angle ``2 pi i / n`` (the thesis's order), or ``centred``: at
        angles 0, -1, +1, -2, +2, ... steps of ``2 pi / n`` for i = 0, 1, 2, 3, 4, ..., so that categories of low
        index (the frequent tokens of a vocabulary sorted by frequency) gather around angle 0 and one cosine
        feature ranks them by index. A permutation of the rows: the guarantee is the same.

    Examples
    --------
    >>> import argmaxable as am
    >>> from argmaxable.core import check_rankings, verify_rankings
    >>> head = DFTSoftmaxHead(16, n=30, k=2)
    >>> head(torch.randn(5, 16)).shape
    torch.Size([5, 30])
    >>> W, b = head.weights()
    >>> W.shape, b
    ((30, 4), None)
    >>> rankings = [[0, 15], [29, 3], [7, 8], [12, 2]]
    >>> res = check_rankings(W, rankings, workers=1)
    >>> res.status.tolist(), bool(verify_rankings(res, W, rankings).all())
    (['argmaxable', 'argmaxable', 'argmaxable', 'argmaxable'], True)
    """

    def __init__(self, in_features: int, n: int, k: int, slack: int = 0, order: str = "index"):
        super().__init__()
        if order not in ("index", "centred"):
            raise ValueError(f"The 'order' parameter of DFTSoftmaxHead must be 'index' or 'centred'. Got {order!r}.")
        in_features, n = _size("in_features", in_features, 1, "DFTSoftmaxHead"), _size("n", n, 1, "DFTSoftmaxHead")
        k, slack = _size("k", k, 1, "DFTSoftmaxHead"), _size("slack", slack, 0, "DFTSoftmaxHead")
        check_dft_size(n, k)
        if in_features < 2 * k + slack:
            raise ValueError(f"DFTSoftmaxHead: in_features = {in_features} < 2k + slack = {2 * k + slack}: the "
                             "projection could not reach every input of the DFT layer, and the guarantee would not "
                             "hold for the model. Lower k or slack, or widen the features.")
        self.n, self.k, self.order = n, k, order
        self.projection = nn.Linear(in_features, 2 * k + slack)
        self.slack = _slack(n, slack)
        self.register_buffer("fixed", torch.from_numpy(self._fixed()).float(), persistent=False)  # (n, 2k)

    def _fixed(self) -> np.ndarray:
        W = math.sqrt(self.n / 2) * dft_matrix(self.n, self.k)[:, 1:]
        if self.order == "centred":  # i -> 0, n-1, 1, n-2, 2, ...: row i at angle -/+ ceil(i/2) 2 pi / n
            i = np.arange(self.n)
            W = W[np.where(i % 2, self.n - (i + 1) // 2, i // 2)]
        return W

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """Logits (B, in_features) -> (B, n)."""
        x = self.projection(features)  # (B, 2k + s)
        fixed = 2 * self.k
        return x[..., :fixed] @ self.fixed.T + x[..., fixed:] @ self.slack.T

    def weights(self) -> tuple[np.ndarray, None]:
        """``(W, None)``: the fixed columns as the module stores them (its dtype's rounding of the DFT values) and
        the slack (n x (2k+s), as float64) over the projected features."""
        return np.hstack([_numpy(self.fixed), _numpy(self.slack)]), None
