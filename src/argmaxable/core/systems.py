"""Adapters from the papers' questions to halfspace systems ``A x + c < 0`` (docs/method.md).

A :class:`System` describes many items at once (one per category or label assignment). It gives the
approximate stage batched residuals and reflection rows, and the exact stage one dense system per item.
Rows are never materialised for all items at once: an n×n matrix would not fit for a real vocabulary. How the
products run is :mod:`argmaxable.core.fastpath`'s (a category system's products with the whole layer) and
:mod:`argmaxable.core.backend`'s (device, precision, Gram kernels, rounding bounds).
"""

from __future__ import annotations

import threading
from contextlib import AbstractContextManager
from functools import cached_property
from typing import Protocol, runtime_checkable

import numpy as np

from argmaxable.core.backend import rounding_bound, row_moments
from argmaxable.core.fastpath import GramPass, LayerProducts
from argmaxable.core.gordan import GordanOutcome, gordan_certificates
from argmaxable.core.numerics import gamma, row_norms
from argmaxable.core.supports import SupportPool

# The covariance's eigenvalues below this fraction of the largest are raised to it in the whitening metric
# (:meth:`CategorySystem.restart`): any positive definite metric is valid, and this one stays finite for rows that
# span fewer than d dimensions.
WHITENING_FLOOR = 1e-9


class RowsBuffer:
    """One float64 array per thread for the exact stage's dense systems, written over by each item the thread
    solves. A fresh (n - 1) x d array costs its pages on first touch: at 62000 x 512 (254 MB) writing the
    differences took 0.80 s into a new array and 0.05 s into a reused one. Safe because an LP reads its rows only
    while it runs (its outcome keeps indices, weights and points of its own); a thread's array goes with it."""

    def __init__(self) -> None:
        self._local = threading.local()

    def get(self, shape: tuple[int, int]) -> np.ndarray:
        buf = getattr(self._local, "array", None)
        if buf is None or buf.shape != shape:
            buf = self._local.array = np.empty(shape)
        return buf


class System(Protocol):
    """What the stages read from an adapter. Optional stages are the protocols below (:class:`GramStart`,
    :class:`DualStage`, :class:`SharedCertificates`): a stage asks ``isinstance``, never for an attribute."""

    n_rows: int  # constraints per item
    d: int
    dtype: type
    homogeneous: bool  # all offsets are zero

    def start(self, items: np.ndarray) -> np.ndarray: ...

    def evaluate(self, items: np.ndarray, X: np.ndarray, eps: float) -> tuple[np.ndarray, np.ndarray]:
        """For each (item, point): the row to reflect across next, and a certified lower bound on the point's
        distance to the item's nearest hyperplane (> 0 means every constraint holds; exact arithmetic)."""
        ...

    def rows(self, items: np.ndarray, j: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...
    def dense(self, item: int) -> tuple[np.ndarray, np.ndarray]: ...
    def dense_rows(self, item: int, rows: np.ndarray) -> np.ndarray:
        """Row positions of ``dense(item)`` for the rows ``rows`` named as :meth:`evaluate` names them."""
        ...

    def dense_terms(self, item: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
        """``dense(item)``'s rows as exact differences of float rows, ``a_i = P_i - q`` and ``c_i = p_i - r``, as
        ``(P, p, q, r)`` (``dense`` rounds the differences; the exact stage needs them as they are)."""
        ...
@runtime_checkable
class GramStart(Protocol):
    """Items whose start points are the layer's own rows (categories: x = w_t): one Gram pass gives every
    item's margin at its start point, and its :class:`GramPass` spares reflection's first step the products it
    already made (``evaluate(items, X, eps, gram)``)."""

    bf16_start: bool  # whether start_margins multiplies in bfloat16
    bf16_steps: bool  # whether reflection's steps do too

    def start_margins(self, eps: float) -> GramPass: ...

    def start_lift(self, lo: np.ndarray, hi: np.ndarray) -> float:
        """The start points' lift into the box (:func:`~argmaxable.core.box.start_lift`)."""
        ...

    def float32_steps(self) -> AbstractContextManager:
        """A scope whose reflection steps multiply in float32."""
        ...

    def evaluate(self, items: np.ndarray, X: np.ndarray, eps: float, gram: GramPass | None = None
                 ) -> tuple[np.ndarray, np.ndarray]: ...

    def step_threads(self) -> AbstractContextManager:
        """The scope of reflection's products, with numpy's BLAS threads as the steps need them."""
        ...

    def sharpen(self, items: np.ndarray, X: np.ndarray, margin: np.ndarray, eps: float) -> int:
        """The certified margins, in place, of points whose bfloat16 steps left them at their floor, measured again
        in float32; how many."""
        ...

    def release(self) -> None:
        """Drop what the products keep (made again if used later): reflection releases it when its products are
        over (:func:`~argmaxable.core.reflect.reflect`), before a whole vocabulary's witnesses are written."""
        ...


@runtime_checkable
class Whitening(Protocol):
    """Items whose reflection, once its first step has not proven them, restarts from the first Newton step of the
    dual and reflects in the metric of that step (categories without a bias: :meth:`CategorySystem.restart`)."""

    whitens: bool  # whether a restart applies to this system

    def restart(self, items: np.ndarray, box) -> np.ndarray: ...

    def metric(self, a: np.ndarray) -> np.ndarray:
        """The reflection direction of rows ``a`` in the metric (``P a``)."""
        ...

    def whitened(self, a: np.ndarray) -> np.ndarray:
        """Rows ``a`` in coordinates where the metric is Euclidean, ``a L`` with P = L Lᵀ: (a L).(L⁻¹ x) = a.x,
        and a reflection in the metric is a Euclidean one there."""
        ...

    def to_whitened(self, X: np.ndarray) -> np.ndarray:
        """Points in those coordinates, ``L⁻¹ x``."""
        ...

    def from_whitened(self, Y: np.ndarray) -> np.ndarray:
        """Points back from them, ``L y``."""
        ...

    def evaluate(self, items: np.ndarray, X: np.ndarray, eps: float, gram: GramPass | None = None,
                 near: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """As :class:`GramStart`'s; ``near`` (len(items), k) receives the rows of each point's k largest computed
        logits (uncertified candidates), left as it is where the Gram pass stood for the product."""
        ...


@runtime_checkable
class Ties(Protocol):
    """Items that no point makes win strictly, known from the rows alone (categories: a duplicate row whose offset
    is at least as high). Reflection leaves them to the LP stage, which stops at that one row: reflecting them
    finds no witness, only spends the stall window and a restart (Qwen2.5-Coder-0.5B's 2054 tied tokens
    took 70% of a sample's reflections, about 90 steps each)."""

    def tied(self, items: np.ndarray) -> np.ndarray:
        """(len(items),) bool: whether each item is tied."""
        ...


@runtime_checkable
class DualStage(Protocol):
    """Items proven unargmaxable in batches before reflection (label assignments: :mod:`gordan`)."""

    def gordan(self, items: np.ndarray, *, box, eps: float, progress=None) -> GordanOutcome: ...


@runtime_checkable
class SharedCertificates(Protocol):
    """Items whose certificates carry over to other items (categories: :mod:`supports`)."""

    def certificate_pool(self, box, eps: float) -> SupportPool: ...

class CategorySystem(LayerProducts):
    """Category t of softmax(Wx + b) wins iff (w_i - w_t).x + (b_i - b_t) < 0 for all i != t (002 §3.3): the
    question's rows, dense systems, ties, whitening and shared supports over the layer's products
    (:class:`~argmaxable.core.fastpath.LayerProducts`: the Gram pass and reflection's steps)."""

    def start(self, items):
        return self.Win[items]  # x = w_t: "the dot product is largest when the vectors align" (002 §3.4.1)

    def rows(self, items, j):
        return self.W[j] - self.W[items], self.b[j] - self.b[items]

    def dense(self, item):
        dup = self._blocking_duplicate(item)
        if dup is not None:  # its one row 0.x + (b_dup - b_item) < 0 holds no point: the LP stops at it anyway
            return np.zeros((1, self.d)), np.array([self.b64[dup] - self.b64[item]])
        # Differences written straight into one float64 array (no copy of the layer without its row first).
        w, A = self.Win[item].astype(np.float64), self._rows_buffer.get((self.n_rows - 1, self.d))
        np.subtract(self.Win[:item], w, out=A[:item])
        np.subtract(self.Win[item + 1 :], w, out=A[item:])
        c = np.delete(self.b64, item) - self.b64[item]
        return A, c

    @cached_property
    def _rows_buffer(self) -> RowsBuffer:
        return RowsBuffer()

    def dense_terms(self, item):
        dup = self._blocking_duplicate(item)
        if dup is not None:
            return np.zeros((1, self.d)), self.b64[[dup]], np.zeros(self.d), float(self.b64[item])
        return np.delete(self.Win, item, axis=0), np.delete(self.b64, item), self.Win[item], float(self.b64[item])

    def row_index(self, item, rows):
        """Map row positions of ``dense(item)`` back to category indices."""
        rows = np.asarray(rows)
        dup = self._blocking_duplicate(item)
        return rows + (rows >= item) if dup is None else np.full(rows.shape, dup)

    def _blocking_duplicate(self, item) -> int | None:
        """The first category other than ``item`` whose row equals its own and whose bias is at least as high (the
        first zero row with offset >= 0 of ``dense(item)``, where the LP stops: the item cannot win strictly), or
        None. Such an item's LP gets that row alone instead of an (n - 1) x d float64 system: SmolLM2's 15 tied
        tokens held 216 MB each, two at a time. Only rows of the same squared norm (to rounding) are compared."""
        lo, hi = self._same_square(self.sq[item])
        same = np.sort(self._by_square[1][lo:hi])
        same = same[same != item]
        same = same[(self.b64[same] - self.b64[item] >= 0) & (self.Win[same] == self.Win[item]).all(axis=1)]
        return int(same[0]) if same.size else None

    def tied(self, items):
        """Whether each item has a blocking duplicate (:attr:`_tied`)."""
        return self._tied[items]

    @cached_property
    def _tied(self) -> np.ndarray:
        """Whether each category has a blocking duplicate (:meth:`_blocking_duplicate`), found once for reflection
        and the LP stage. Only rows whose squared norm has another within rounding are compared: a few, and none in
        a layer without ties."""
        lo, hi = self._same_square(self.sq)
        out = np.zeros(self.n_rows, dtype=bool)
        for item in np.flatnonzero(hi - lo > 1):
            out[item] = self._blocking_duplicate(int(item)) is not None
        return out

    def _same_square(self, s):
        """The span ``lo:hi`` of :attr:`_by_square` whose squared norms equal ``s`` to rounding (arrays for arrays)."""
        sq = self._by_square[0]
        return (np.searchsorted(sq, s * (1 - 4 * gamma(self.d)), side="left"),
                np.searchsorted(sq, s * (1 + 4 * gamma(self.d)), side="right"))

    @cached_property
    def _by_square(self) -> tuple[np.ndarray, np.ndarray]:
        """The rows' squared norms in increasing order, and the rows in that order."""
        order = np.argsort(self.sq, kind="stable")
        return self.sq[order], order

    @property
    def whitens(self) -> bool:
        """Whether :meth:`restart` applies: a system without a bias, whose regions are cones (the restart point's
        scale is free)."""
        return self.homogeneous

    @cached_property
    def _whitening(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The rows' mean mu, the inverse P of their covariance and a factor L of it with its inverse, P = L Lᵀ
        (float64; eigenvalues floored at :data:`WHITENING_FLOOR` of the largest, so that P is positive definite for
        any layer). P is that of the rows scaled by :func:`row_moments`' power of two, a positive multiple of the
        layer's own, which changes neither :meth:`restart`'s directions nor a reflection in its metric (both are
        invariant to P's scale), and keeps a layer far from 1 in range."""
        mean, second, scale = row_moments(self.Win)
        cov = second - np.outer(mean, mean)
        values, vectors = np.linalg.eigh((cov + cov.T) / 2)
        values = np.maximum(values, WHITENING_FLOOR * max(float(values[-1]), np.finfo(np.float64).tiny))
        return mean / scale, (vectors / values) @ vectors.T, vectors / np.sqrt(values), (vectors * np.sqrt(values)).T

    def restart(self, items, box):
        """Points to restart reflection from: x = P (w_t - mu), the first Newton step, from uniform weights, of the
        dual problem min_theta log sum_i exp(w_i.theta) - w_t.theta (whose minimum exists iff w_t lies inside the
        hull). It is the direction in which w_t stands out most from the rows in the metric of their spread: an LLM
        head whose rows share a direction and spread unevenly (Qwen2.5's under-trained tokens: low norms near the
        mean) has most of its items beaten at x = w_t won at this point, the rest in a few reflections in the
        metric P (:meth:`metric`). Scaled to twice the box's reach: the next step scales it onto the box."""
        mean, P, _, _ = self._whitening
        X = (np.asarray(self.Win[items], dtype=np.float64) - mean) @ P
        top = np.abs(X).max(axis=1, keepdims=True)
        reach = 2 * float(np.maximum(np.abs(box[0]), np.abs(box[1])).max())
        return (X * (reach / np.where(top > 0, top, 1.0))).astype(self.dtype)

    def metric(self, a):
        """Reflection directions in the metric P of :meth:`restart`: ``a P`` (rows ``a``), in ``a``'s dtype."""
        return a @ self._whitening[1].astype(a.dtype)

    def whitened(self, a):
        """Rows ``a`` as ``a L`` (P = L Lᵀ), in ``a``'s dtype."""
        return a @ self._whitening[2].astype(a.dtype)

    def to_whitened(self, X):
        """Points ``X`` as ``L⁻¹ x``, in ``X``'s dtype."""
        return X @ self._whitening[3].T.astype(X.dtype)

    def from_whitened(self, Y):
        """Points ``L y`` back from :meth:`to_whitened`'s coordinates, in ``Y``'s dtype."""
        return Y @ self._whitening[2].T.astype(Y.dtype)

    def certificate_pool(self, box, eps):
        """The dual stage (:mod:`supports`): certificates' supports serve every category."""
        return SupportPool(self.Win, self.b64, box, eps)

    def dense_rows(self, item, categories):
        """Map category indices to row positions of ``dense(item)`` (the item's own row has none)."""
        categories = np.asarray(categories, dtype=np.int64)
        dup = self._blocking_duplicate(item)
        if dup is not None:  # dense(item) holds that one row
            return np.zeros(int((categories == dup).any()), dtype=np.int64)
        categories = categories[categories != item]
        return categories - (categories > item)


# Bytes of one (items, n) float64 temporary of :meth:`AssignmentSystem.evaluate`: larger blocks are mapped afresh by
# the allocator at every call (above glibc's largest mmap threshold, 32 MiB) and each of their pages faults in.
# Measured on 1000 label sets at n = 20,000 (one block of 160 MB a temporary): 28.8 s of system time beside 25.5 s
# of user time.
EVALUATE_BYTES = 16 << 20


class AssignmentSystem:
    """Assignment y of sigmoid(Wx + b) holds iff y_i (w_i.x + b_i) > 0 for all i (thesis eq. 4.2):
    rows a_i = -y_i w_i, offsets c_i = -y_i b_i."""

    def __init__(self, W: np.ndarray, b: np.ndarray | None, signs: np.ndarray):
        self.W64 = W
        self.b64 = np.zeros(W.shape[0]) if b is None else b
        self.homogeneous = b is None or not np.any(b)
        self.signs = signs  # (m, n) int8 in {+1, -1}
        self.n_rows, self.d = W.shape
        self.dtype = np.float64
        self.W = W
        self.b = self.b64
        self.norms = row_norms(W) * (1 + gamma(self.d + 4))  # rounded up
        self.kappa = rounding_bound(self.dtype, self.d)

    def start(self, items):
        # Mean direction of the active rows minus that of the inactive ones.
        S = self.signs[items].astype(np.float64)  # (b, n)
        pos = np.maximum(S, 0.0)
        neg = np.maximum(-S, 0.0)
        X = pos @ self.W / np.maximum(pos.sum(1, keepdims=True), 1) - neg @ self.W / np.maximum(
            neg.sum(1, keepdims=True), 1)
        return X

    def evaluate(self, items, X, eps):
        """The most violated row of each point and its certified margin, a block of items at a time: each
        block's (b, n) temporaries stay below :data:`EVALUATE_BYTES`, which the allocator reuses."""
        worst, margin = np.empty(len(items), dtype=np.int64), np.empty(len(items))
        step = max(1, EVALUATE_BYTES // (8 * max(self.n_rows, 1)))
        for s in range(0, len(items), step):
            worst[s : s + step], margin[s : s + step] = self._evaluate(items[s : s + step], X[s : s + step])
        return worst, margin

    def _evaluate(self, items, X):
        """:meth:`evaluate` of one block, its operations in place (the values of -s_i (w_i.x + b_i) + kappa
        (||x|| ||w_i|| + |b_i|), divided by ||w_i||, as written out)."""
        R = X @ self.W.T  # (b, n): a_i.x + c_i = -s_i (w_i.x + b_i), the negation exact
        R += self.b
        R *= -self.signs[items]
        rounding = np.multiply.outer(np.linalg.norm(X, axis=1), self.norms)
        rounding += np.abs(self.b64)
        rounding *= self.kappa
        R += rounding
        if self.norms.all():
            R /= self.norms
        else:
            with np.errstate(divide="ignore", invalid="ignore"):
                R = np.where(self.norms > 0, R / self.norms, np.where(R < 0, -np.inf, np.inf))
        worst = np.argmax(R, axis=1)  # the most violated row, in distance
        return worst, -R[np.arange(len(items)), worst]

    def gordan(self, items, *, box, eps, progress=None):
        """The dual stage (:mod:`gordan`): the rows are ``-y_i [w_i, b_i]``, one matrix with signs."""
        return gordan_certificates(self.W64, None if self.homogeneous else self.b64, -self.signs[items],
                                   box=box, eps=eps, progress=progress)

    def rows(self, items, j):
        s = self.signs[items, j].astype(np.float64)
        return -s[:, None] * self.W[j], -s * self.b[j]

    def dense(self, item):
        s = self.signs[item].astype(np.float64)
        return -s[:, None] * self.W64, -s * self.b64

    def dense_terms(self, item):
        A, c = self.dense(item)  # negations: exact
        return A, c, np.zeros(self.d), 0.0

    def dense_rows(self, item, labels):
        """Row positions of ``dense(item)`` are label indices."""
        return np.asarray(labels, dtype=np.int64)
