"""The fast path of a category system: the products of points with the whole layer, certified by their rounding.

:class:`LayerProducts` holds a softmax layer ``W``, ``b`` (float64, or float32 kept as given) and what its products
need: the row norms rounded up, the dtype of the approximate stage (float32 above :data:`FLOAT32_ABOVE` weights),
and, made on first use and dropped together by :meth:`~LayerProducts.release`, its copies (the float32 layer, the
bfloat16 ``[W, b, 1]`` and logit buffer, the torch tensors on a device). It answers two questions for many points
at once, each with a certified bound: the Gram pass (:meth:`~LayerProducts.start_margins`: every row's margin at its
own row, x = w_t) and a reflection step (:meth:`~LayerProducts.evaluate`: the row to reflect across and each point's
margin, in three tiers). :class:`argmaxable.core.systems.CategorySystem` is the question built on it. How a product
runs (device, bfloat16, Gram kernels, rounding bounds) is :mod:`argmaxable.core.backend`'s.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from argmaxable.core.backend import (
    band_argmax,
    band_maxima,
    bf16_augmented,
    bf16_gemm,
    bf16_rounding_bound,
    exact_float32,
    gram_maxima,
    padded_rows,
    rounding_bound,
    row_candidates,
    row_squares,
    span_maxima_without,
    top_columns,
)
from argmaxable.core.box import start_lift
from argmaxable.core.numerics import U64, gamma, row_norms

# Above this many weights the approximate stage runs in float32 (2x the GEMM rate); acceptance stays rigorous
# through the rounding bound below.
FLOAT32_ABOVE = 200_000
# Above this many weights the Gram pass of a whole vocabulary runs in bfloat16 where the CPU has native bfloat16
# products. Below it the pass is short (0.1 s at 6625 x 120) and importing torch to ask would cost about 1 s.
BF16_ABOVE = 1_000_000
# Reflection steps multiply in bfloat16 too only for rows at least this wide: there the product is most of a step
# (LLM heads: SmolLM2 d = 576, Gemma-3 640, Qwen2.5 896). In a narrower layer a step's product is cheap, and
# bfloat16's argmax (8-bit significands) often reflects across a row other than the most violated one, so more
# items stall into the LP stage: PP-OCRv6 small (d = 120; every 4th row, bfloat16 emulated) sent 679 items to LP
# instead of 351, its whole check 2.1x slower than float32 steps. Such layers step in float32.
BF16_STEPS_D = 256
# Spans of columns, by row norm, each with its own rounding bound in a reflection step's first test.
BANDS = 16
# A row measured again in float64 (a gathered row and its dot product) costs about as much as this many logits of a
# float32 product: measured 0.75 us a row against 13 ns a logit at d = 896. A point bfloat16 steps leave
# open is measured again row by row if at most n / RECHECK_COST rows come within bfloat16's bound, else its item
# steps in float32 (:meth:`LayerProducts.evaluate`).
RECHECK_COST = 64


# The float32 and bfloat16 products hold their relative rounding bounds only where nothing they cast or compute
# leaves the narrower types' normal range (both reach 2^-126 .. 2^128): a bias cast beyond it is -inf, which rules
# every other row out, and a product that falls below it loses bits the relative bound does not count. A layer
# narrows only if its row norms and biases (and each point its norm, :meth:`LayerProducts._evaluate`) lie within
# NARROW_RANGE of 1, zero excepted, so that every logit and its bound stay 2^60 inside that range (a small bias
# beside a row within it: its absolute rounding, at most 2^-150, lies far below that row's bound); any other
# layer's fast path runs in float64.
NARROW_RANGE = 2.0**60


def narrow_fits(norms: np.ndarray, b: np.ndarray) -> bool:
    """Whether a layer with row norms ``norms`` and biases ``b`` (float64) may be multiplied in float32 or
    bfloat16 (:data:`NARROW_RANGE`): every nonzero norm within it, every bias below its top, and a zero row's
    nonzero bias above its floor."""
    lo, hi = 1 / NARROW_RANGE, NARROW_RANGE
    size = np.abs(b)
    return bool(np.all((norms == 0) | ((norms >= lo) & (norms <= hi)))
                and np.all((size <= hi) & ((size >= lo) | (size == 0) | (norms > 0))))


def margin_floor(eps: float) -> float:
    """The margin :meth:`LayerProducts.evaluate` certifies for a point that wins against every row it measured
    when its bound places the rows it did not measure only beyond eps: eps (1 + 4 U64), or just above 0 at eps = 0
    (the rounding of its tests; :meth:`LayerProducts.sharpen`)."""
    return max(eps, 2.0**-1000) * (1 + 4 * U64)


@dataclass(frozen=True)
class GramPass:
    """What one Gram pass (:meth:`GramStart.start_margins`) found, handed on to reflection's first step: every
    item's certified margin at its start point ``lift`` w_t, and for the start points some row certainly beats, the
    first row of the Gram block that beats each (``beaten``, -1: none; None where the pass keeps no blocks) in
    blocks of ``block`` rows, so that the first step measures them against that block alone."""

    margin: np.ndarray
    beaten: np.ndarray | None = None
    block: int = 0
    lift: float = 1.0


@dataclass(frozen=True)
class _Pass:
    """One pass of points through :meth:`LayerProducts._evaluate`, as its tiers 2 and 3 (:meth:`~LayerProducts.
    _recheck`) read it: the computed logits ``L`` (float32, float64 or bfloat16), the row of each column (``cols``,
    None: the rows in order), the spans of ``width`` columns, the largest row norm and each point's largest logit
    in each span, the items and their points in float64, the points' norms rounded up (``xn``), certified lower
    bounds on their own logits (``low``) and the products' relative error (``kappa``)."""

    L: object  # ndarray, or a torch tensor on the torch paths
    cols: np.ndarray | None
    width: int
    span_norm: np.ndarray  # (spans,)
    span_top: np.ndarray  # (points, spans)
    items: np.ndarray
    X64: np.ndarray
    xn: np.ndarray
    low: np.ndarray
    kappa: float


class LayerProducts:
    """A layer's products with many points at once, each with a certified bound (module doc)."""

    def __init__(self, W: np.ndarray, b: np.ndarray | None, device=None):
        self.device = device  # a torch.device for the torch path (Gram pass, reflection's products), or None
        self.Win = W  # the layer as given: float64, or float32 kept as is (no float64 copy of a large layer)
        self.b64 = np.zeros(W.shape[0]) if b is None else b
        self.homogeneous = b is None or not np.any(b)
        self.n_rows, self.d = W.shape
        self.sq = row_squares(W)  # ||w_i||^2 in float64
        # ||w_i|| rounded up (float64 by blocks: no n×d temporary, no overflow/underflow of squares)
        self.norms = row_norms(W, squares=self.sq) * (1 + gamma(self.d + 4))
        self.max_norm = float(self.norms.max())
        self.max_bias = float(np.abs(self.b64).max())
        narrow = W.size > FLOAT32_ABOVE and narrow_fits(self.norms, self.b64)
        self.dtype = np.float32 if narrow else np.float64
        self.b = self.b64.astype(self.dtype)
        self.kappa = rounding_bound(self.dtype, self.d)

    @cached_property
    def W(self) -> np.ndarray:
        """The layer in the approximate stage's dtype (made on first use: a whole vocabulary proved by the
        bfloat16 first step never needs it)."""
        return self.Win if self.Win.dtype == self.dtype else self.Win.astype(self.dtype)

    def start_lift(self, lo: np.ndarray, hi: np.ndarray) -> float:
        """:func:`~argmaxable.core.box.start_lift` of the layer's rows in the box ``lo..hi``, found once per box
        (reflection asks again when it reruns the items bfloat16 left in float32: a pass over the layer each)."""
        key = (np.asarray(lo, dtype=np.float64).tobytes(), np.asarray(hi, dtype=np.float64).tobytes())
        if key not in self._lifts:
            self._lifts[key] = start_lift(self.Win, lo, hi)
        return self._lifts[key]

    @cached_property
    def _lifts(self) -> dict[tuple[bytes, bytes], float]:
        return {}

    @cached_property
    def bf16_start(self) -> bool:
        """Whether :meth:`start_margins` multiplies in bfloat16 (a large float32 system on the numpy path, on a CPU
        that has it; never on a device, whose products are float32 whatever the host's CPU)."""
        return self.device is None and self.dtype == np.float32 and self.Win.size > BF16_ABOVE and bf16_gemm()

    @cached_property
    def bf16_steps(self) -> bool:
        """Whether reflection's steps multiply in bfloat16 too (:data:`BF16_STEPS_D`)."""
        return self.bf16_start and self.d >= BF16_STEPS_D

    @contextmanager
    def float32_steps(self) -> Iterator[None]:
        """Reflection's steps in float32 within this scope, on a layer whose steps are otherwise bfloat16 (the
        items bfloat16 steps leave unproven: :class:`argmaxable.core.stages.Reflect`)."""
        was = self.bf16_steps
        self.__dict__["bf16_steps"] = False
        try:
            yield
        finally:
            self.__dict__["bf16_steps"] = was

    @contextmanager
    def step_threads(self) -> Iterator[None]:
        """The scope of reflection's products. Where its steps multiply in bfloat16 (torch's threads), numpy's BLAS
        keeps one thread here: after each of its calls between two products (working sets, float64 re-measures)
        its idle threads spin for a while on the cores torch's threads need (SmolLM2's head, 2 cores: the same
        bfloat16 product 216 us a point beside two BLAS threads, 161 beside one). The float32 steps of
        the items that left bfloat16 (:attr:`_fine`) get the caller's threads back for their product alone
        (:meth:`_caller_blas_threads`): torch's float32 product there took 83 s of Gemma-3-270M's check (py-spy, 2
        cores) where numpy's had taken 54 s."""
        if not self.bf16_steps:
            yield
            return
        from threadpoolctl import ThreadpoolController

        controller = ThreadpoolController()
        with controller.limit(limits=1, user_api="blas") as held:
            self._blas = (controller, held.get_original_num_threads()["blas"])
            try:
                yield
            finally:
                del self._blas

    def _caller_blas_threads(self):
        """Within :meth:`step_threads`, a scope with the BLAS threads its caller had; elsewhere nothing changes."""
        held = self.__dict__.get("_blas")
        return nullcontext() if held is None else held[0].limit(limits=held[1], user_api="blas")

    def release(self) -> None:
        """Drop the bfloat16 copy of the layer, the logit buffer, the torch copies (made again on use), the items
        that step in float32 (:attr:`_fine`) and the start points' first rows (:meth:`_first_rows`): the end of a
        scope of reflection."""
        for name in ("_bf16_layer", "_logit_buffer", "_torch_layer", "_fine", "_first"):
            self.__dict__.pop(name, None)

    @cached_property
    def _fine(self) -> np.ndarray:
        """The items whose reflection steps have left bfloat16 for float32 (:meth:`evaluate`), by item."""
        return np.zeros(self.n_rows, dtype=bool)

    @cached_property
    def _torch_layer(self):
        """``[W, b, 1]``, ``[W, 1, b]`` and ``b`` as torch tensors of this system's dtype on its device."""
        import torch

        W = torch.from_numpy(self.W).to(self.device)
        b = torch.from_numpy(self.b).to(self.device)
        ones = torch.ones((self.n_rows, 1), dtype=W.dtype, device=self.device)
        if self.homogeneous:
            return W, W, b
        return torch.hstack([W, b[:, None], ones]), torch.hstack([W, ones, b[:, None]]), b

    @cached_property
    def _bf16_layer(self):
        """``[W, b, 1]`` (W without a bias) in bfloat16, made once for the Gram pass and the reflection steps, its
        rows in the order :attr:`_order`."""
        return bf16_augmented(self.Win, None if self.homogeneous else self.b64, self._order)

    @cached_property
    def _order(self) -> np.ndarray:
        """The rows by increasing norm: the bfloat16 logits come in this order, so that bands of columns share a
        rounding bound close to each row's own (norms vary 4x in an LLM head; one bound from the largest would
        leave thousands of points to measure again)."""
        return np.argsort(self.norms, kind="stable")

    def _bands(self, cols) -> tuple[int, np.ndarray]:
        """Width of the column spans of the logits and the largest row norm of each: :data:`BANDS` spans of
        increasing norms for the bfloat16 logits (``cols``: the row of each column), one span otherwise."""
        if cols is None:
            return self.n_rows, np.array([self.max_norm])
        width = -(-self.n_rows // BANDS)
        return width, np.array([self.norms[cols[min(z, self.n_rows) - 1]]
                                for z in range(width, self.n_rows + width, width)])

    def _logits(self, items, X, coarse: bool = False):
        """Computed logits of the points X against every row, each item's own entry at -inf, as a numpy array or a
        torch tensor of shape (b, n); the relative error factor of each entry (times ||x|| ||w_i|| + |b_i|); and the
        row of each column (None: the rows in order).

        ``coarse`` (a large float32 layer of :data:`BF16_STEPS_D` or more columns on a CPU with native bfloat16
        products: :attr:`bf16_steps`) multiplies in bfloat16, about twice float32's rate there; its bound is 2^16
        times looser (:meth:`evaluate` says what it serves for)."""
        rows = np.arange(len(items))
        if self.device is not None:  # the torch path: true float32 on the device
            import torch

            left, _, b = self._torch_layer
            with exact_float32():
                Xt = torch.from_numpy(np.ascontiguousarray(X, dtype=self.dtype)).to(self.device)
                L = Xt @ left[:, : self.d].T + b  # (b, n)
            L[torch.from_numpy(rows).to(self.device), torch.from_numpy(items).to(self.device)] = -torch.inf
            return L, self.kappa, None
        if coarse:
            import torch

            # (b, n) bfloat16, columns in the order of self._order, written into one buffer for the whole check:
            # a new array per pass leaves freed blocks resident (measured: +13 MiB a pass, 220 MiB on SmolLM2)
            m = padded_rows(len(X), len(self._logit_buffer))
            L = torch.matmul(self._bf16_points(X, m), self._bf16_layer.T, out=self._logit_buffer[:m])[: len(X)]
            L[torch.from_numpy(rows), torch.from_numpy(self._rank[items])] = -torch.inf
            return L, bf16_rounding_bound(self.d + 2), self._order
        with self._caller_blas_threads():
            L = X @ self.W.T  # (b, n) in self.dtype
        L += self.b
        L[rows, items] = -np.inf  # the target's own (zero) row
        return L, self.kappa, None

    @cached_property
    def _logit_buffer(self):
        """Room for the bfloat16 logits of one pass of :attr:`_pass_rows` points."""
        import torch

        return torch.empty((min(self._pass_rows, self.n_rows), self.n_rows), dtype=torch.bfloat16)

    def _bf16_points(self, X, rows: int):
        """The points X as the first rows of a bfloat16 tensor of ``rows`` rows (zeros below them:
        :func:`~argmaxable.core.backend.padded_rows`) that multiplies :attr:`_bf16_layer` (``[W, b, 1]``):
        ``[x, 1, 0]`` gets the logits w_i.x + b_i."""
        import torch

        Xa = torch.zeros((rows, self._bf16_layer.shape[1]), dtype=torch.bfloat16)
        Xa[: len(X), : self.d] = torch.from_numpy(np.ascontiguousarray(X))
        if not self.homogeneous:
            Xa[: len(X), self.d] = 1.0
        return Xa

    @cached_property
    def _rank(self) -> np.ndarray:
        """The column of each row in the bfloat16 logits."""
        rank = np.empty(self.n_rows, dtype=np.int64)
        rank[self._order] = np.arange(self.n_rows)
        return rank

    def evaluate(self, items, X, eps, gram: GramPass | None = None, near: np.ndarray | None = None):
        """The row to reflect across next and a certified lower bound on each point's distance to its item's
        nearest hyperplane (:meth:`_evaluate`), :attr:`_pass_rows` points at a time; start points the Gram pass
        ``gram`` showed beaten are not measured again (:meth:`_first_steps`). ``near``, an int array of shape
        (len(items), k): each of its rows that starts with -1 receives the rows of its point's k largest computed
        logits (candidates, not certified, for reflection's working sets), unless the Gram pass stood for the
        point's product; the others are left as they are (points whose candidates are not wanted).

        With :attr:`bf16_steps`, an item steps in bfloat16 while its bfloat16 logits settle its point (some row
        beats it by more than their bound, or none comes near) or leave few rows within their bound (at most n /
        :data:`RECHECK_COST`), which are measured again in float64 as float32 steps measure theirs; from the first
        point that leaves more open it steps in float32, for good (:attr:`_fine`). Which it is varies point by
        point, not head by head: of the points bfloat16 steps leave open, half have 1-2 such rows on
        SmolLM2's and Qwen2.5-Coder-0.5B's heads (9 on the under-trained family's), and a tenth over 1300
        (under-trained, n = 32768) or 5600 (Qwen2.5-Coder, about 4 ms a point in float64 against 2 ms for its float32
        logits), near the edge of its item's region, where bfloat16's argmax often names a row other than the most
        violated one."""
        worst, margin = np.empty(len(items), dtype=np.int64), np.empty(len(items))
        rest = self._first_steps(items, X, worst, margin, gram)
        step = self._pass_rows
        if not self.bf16_steps and len(rest) == len(items) and len(items) <= step:
            return self._evaluate(items, X, eps, near=near)  # (X as given: numpy's BLAS may round a copy differently)
        for coarse in (True, False) if self.bf16_steps else (False,):
            # the float32 passes after the bfloat16 ones: with the items those just left open
            now = rest[self._fine[items[rest]] != coarse] if self.bf16_steps else rest
            for lo in range(0, len(now), step):
                k = now[lo : lo + step]
                part = None if near is None else near[k]
                worst[k], margin[k] = self._evaluate(items[k], X[k], eps, coarse, part)
                if near is not None:
                    near[k] = part
        return worst, margin

    def sharpen(self, items, X, margin, eps) -> int:
        """Where bfloat16 steps proved a point with its margin at the floor (:func:`margin_floor`: rows bfloat16's
        bound, 2^16 looser than float32's, placed only beyond eps), that point's margin measured again in float32
        steps (:meth:`evaluate`), in place: the larger of the two certified lower bounds. Without it, SmolLM2-135M's
        head kept 1072 radius bounds at 1e-8 (1 after it), Qwen2.5-Coder-0.5B's 2509 (625 after it: float32's bound,
        as bfloat16's, divides a logit's gap by ||w_t|| + ||w_i||, so a row near w_t keeps the point at its floor),
        and the token audit flags the smallest bounds. Returns how many points were measured again."""
        if not self.bf16_steps:
            return 0
        low = np.flatnonzero(margin <= margin_floor(eps))
        step = max(1, self._pass_rows // 2)  # float32 logits in the bytes of a bfloat16 pass: no new peak
        with self.float32_steps():
            for lo in range(0, len(low), step):
                k = low[lo : lo + step]
                margin[k] = np.fmax(margin[k], self.evaluate(items[k], X[k], eps)[1])
        return int(low.size)

    @cached_property
    def _pass_rows(self) -> int:
        """Points whose logits one product computes at once on the torch paths: their (points x n) logits take at
        most an eighth of the layer's own size (or 8 MiB for a small layer), so that reflection's pool adds
        little to the layer and its witnesses at the peak (SmolLM2's batch of 1365 points held 128 MiB
        of logits beside its 108 MiB layer). Each row of torch's bfloat16 product on the CPU comes out the same
        whatever the number of rows (measured, bitwise), so cutting a pool's step changes none of those logits there
        (the few rows they leave open for a point are measured again by a float64 product of its group). numpy's
        BLAS rounds by shape: its path keeps the pool's step whole (layers under 1M weights, or CPUs without
        bfloat16). The items that left bfloat16 steps (:meth:`evaluate`) get their float32 logits
        in passes of as many points (a quarter of the layer's size), cut the same way in every run."""
        if self.device is None and not self.bf16_steps:
            return sys.maxsize
        itemsize = 2 if self.device is None else np.dtype(self.dtype).itemsize
        return max(16, max(self.Win.nbytes // 8, 8 << 20) // (itemsize * self.n_rows))

    def _first_steps(self, items, X, worst, margin, gram: GramPass | None) -> np.ndarray:
        """Points that are their item's start point w_t, which some row certainly beats in the Gram pass ``gram``
        of :meth:`start_margins`: most of an LLM head's items (42933 of SmolLM2's 49152 lose at w_t, their norms
        vary 4x). Their margin is the Gram pass's certified one and the row to reflect across is the argmax of
        the Gram block that held their maximum, computed again for that block alone: no product with the whole
        layer. Writes those into ``worst`` and ``margin``; returns the positions of the other points."""
        if gram is None or gram.beaten is None:
            return np.arange(len(items))
        where, gram_margin, block = gram.beaten, gram.margin, gram.block
        k = np.flatnonzero(where[items] >= 0)
        k = k[(X[k] == self.Win[items[k]] * gram.lift).all(axis=1)]
        margin[k], at = gram_margin[items[k]], where[items[k]]
        if self.bf16_start:
            worst[k] = self._first_rows(gram)[items[k]]
        else:  # numpy's BLAS rounds by shape: these points' products as they come
            for lo in np.unique(at):
                worst[k[at == lo]] = self._block_argmax(items[k[at == lo]], X[k[at == lo]], lo, block)
        rest = np.ones(len(items), dtype=bool)
        rest[k] = False
        return np.flatnonzero(rest)

    def _first_rows(self, gram: GramPass) -> np.ndarray:
        """The row each start point that ``gram`` shows beaten reflects across first (:meth:`_block_argmax` of its
        Gram block; -1 for the others), for every such item at the first call, kept to the end of the scope
        (:meth:`release`). A pool's step holds a few new items per block: asked step by step, SmolLM2's took
        many small products. Each row of a bfloat16 product is the same whatever the rows beside it
        (:meth:`_pass_rows`), so the rows are those of the steps."""
        if self.__dict__.get("_first", (None,))[0] is not gram:
            rows = np.full(self.n_rows, -1, dtype=np.int64)
            beaten = np.flatnonzero(gram.beaten >= 0)
            for lo in np.unique(gram.beaten[beaten]):
                k = beaten[gram.beaten[beaten] == lo]
                rows[k] = self._block_argmax(k, self.Win[k] * gram.lift, lo, gram.block)
            self._first = (gram, rows)
        return self._first[1]

    def _block_argmax(self, items, X, lo: int, block: int) -> np.ndarray:
        """The row of each point's largest logit among rows ``lo .. lo + block``, its own row left out: of
        :attr:`_bf16_layer` in bfloat16, :attr:`_pass_rows` points at a time, padded as :meth:`_logits` pads
        them; of the layer on the numpy path."""
        if not self.bf16_start:
            L = X @ self.W[lo : lo + block].T + self.b[lo : lo + block]
            own = items - lo
            mine = np.flatnonzero((own >= 0) & (own < L.shape[1]))
            L[mine, own[mine]] = -np.inf
            return lo + np.argmax(L, axis=1)
        import torch

        out = np.empty(len(items), dtype=np.int64)
        for p in range(0, len(items), self._pass_rows):
            k = slice(p, p + self._pass_rows)
            Xk = X[k]
            P = self._bf16_points(Xk, padded_rows(len(Xk), self._pass_rows))
            L = (P @ self._bf16_layer[lo : lo + block].T)[: len(Xk)]  # (k, block)
            own = self._rank[items[k]] - lo
            mine = np.flatnonzero((own >= 0) & (own < L.shape[1]))
            L[torch.from_numpy(mine), torch.from_numpy(own[mine])] = -torch.inf
            out[k] = self._order[lo + L.max(dim=1).indices.numpy()]
        return out

    def _evaluate(self, items, X, eps, coarse: bool = False, near: np.ndarray | None = None):
        """:meth:`evaluate` for one pass of points, in three tiers; each settles what it can and passes on the rest
        (``coarse``: bfloat16 logits, and the points the first tier leaves open with more than n /
        :data:`RECHECK_COST` rows to measure are not measured but marked to step in float32, :attr:`_fine`):

        1. the computed logits with one bound per point (from the largest row norm): most points win, or lose, by
           far more than the rounding;
        2. for the others, the bound per row, kappa (||x|| ||w_i|| + |b_i|): only the rows that may come within
           eps of the point's own logit stay (a few, or a cluster of near-duplicates), measured in float64 by one
           blocked product for a group of points;
        3. the pairs float64 cannot separate either (near-equal rows) are checked on their differences
           ``w_i - w_t``, formed exactly as the LP would form them.

        No tier reads more rows than it keeps: there is no pass over the whole layer per point. ``near``: as in
        :meth:`evaluate`.
        """
        L, kappa, cols = self._logits(items, X, coarse)
        want = np.flatnonzero(near[:, 0] == -1) if near is not None and near.shape[1] else []
        if len(want):
            top = top_columns(L, want, near.shape[1])
            near[want, : top.shape[1]] = top if cols is None else cols[top]
        width, band_norm = self._bands(cols)
        rows = np.arange(len(items))
        if len(band_norm) > 1:  # the argmax (002 Fig. 5 line 1) within the span that holds the maximum
            band_top = band_maxima(L, width)  # (b, bands)
            best = np.argmax(band_top, axis=1)
            top = band_top[rows, best]
            worst = band_argmax(L, best, width)
        elif isinstance(L, np.ndarray):
            worst = np.argmax(L, axis=1)  # the current argmax among the others (002 Fig. 5 line 1)
            top = L[rows, worst].astype(np.float64)
        else:
            top, w = L.max(dim=1)  # (torch's argmax of bfloat16 is 4x slower on the CPU)
            top, worst = top.double().cpu().numpy(), w.cpu().numpy()
        if len(band_norm) == 1:
            band_top = top[:, None]
        worst = worst if cols is None else cols[worst]
        d = self.d
        X64 = np.asarray(X, dtype=np.float64)
        xn = np.sqrt(row_squares(X64)) * (1 + gamma(d + 4))  # ||x|| rounded up
        own = np.einsum("bd,bd->b", X64, np.asarray(self.Win[items], dtype=np.float64)) + self.b64[items]
        low = own - gamma(d + 6) * (xn * self.norms[items] + np.abs(self.b64[items]))  # <= the exact own logit
        # Tier 1: each computed logit of a band is within kappa (||x|| max ||w_i|| + max |b_i|) of the exact one,
        # the norms' maximum taken over the band.
        band_up = band_top + kappa * (np.multiply.outer(xn, band_norm) + self.max_bias)  # (b, bands) >= l_i
        with np.errstate(invalid="ignore"):  # an all-zero layer: 0 / 0, a NaN margin that proves nothing
            margin = (low - band_up.max(axis=1)) / (self.norms[items] + self.max_norm)
        # l_worst > l_t for sure: reflect across the computed argmax, no measuring needed.
        beaten = top - kappa * (xn * self.norms[worst] + np.abs(self.b64[worst])) > 2 * own - low
        open_ = np.flatnonzero(~(margin > eps) & ~beaten)
        if open_.size:
            limit = self.n_rows // RECHECK_COST if coarse else None
            p = _Pass(L, cols, width, band_norm, band_top, items, X64, xn, low, kappa)
            with self._one_torch_thread(L):
                fine = self._recheck(p, open_, eps, margin, worst, limit)
            self._fine[items[fine]] = True
        if self.dtype != np.float64 or coarse:  # a point beyond the narrow range proves nothing here (NARROW_RANGE)
            margin[(xn != 0) & ~((xn >= 1 / NARROW_RANGE) & (xn <= NARROW_RANGE))] = np.nan
        return worst, margin

    @staticmethod
    @contextmanager
    def _one_torch_thread(L) -> Iterator[None]:
        """Torch on one thread for tiers 2 and 3 on logits held in torch (CPU): their torch work is small
        gathers, comparisons and maxima over a group's rows (exact, so the same on any number of threads), each a
        fraction of a millisecond, where a second thread costs more to wake than it saves; on a busy 2-core
        machine each of them waited for it (a Bergamot-sized replica's tier 2, 64 points: 52 ms on one thread,
        1.2 s on two, measured beside other jobs)."""
        if isinstance(L, np.ndarray) or L.device.type != "cpu":
            yield
            return
        import torch

        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            yield
        finally:
            torch.set_num_threads(threads)

    def _recheck(self, p: _Pass, open_, eps, margin, worst, limit: int | None = None, group=64) -> np.ndarray:
        """Tiers 2 and 3 of :meth:`evaluate` for the points ``open_`` of the pass ``p``, ``group`` points at a time;
        writes their margins and the rows to reflect across into ``margin`` and ``worst``. A row that is not
        measured has a distance above eps (1 + 4 U64), which is their margin. Points with more than ``limit`` rows
        to measure are left as they are and returned (their items step in float32: :meth:`evaluate`)."""
        L, X64, xn, low, kappa = p.L, p.X64, p.xn, p.low, p.kappa
        d, t, absb, norms = self.d, p.items, np.abs(self.b64), self.norms
        left = []
        # The float64 arithmetic of the tests below errs by a few units of U64 times the same magnitudes; a row
        # ruled out is at a distance above eps_ > eps (also at eps = 0).
        kap, eps_ = kappa + 8 * U64, margin_floor(eps)
        for lo in range(0, len(open_), group):
            ks = open_[lo : lo + group]
            thr = low[ks] - eps_ * norms[t[ks]]  # a row is far if l_i + eps ||w_i|| < thr, rounding included
            # Tier 2: the rows whose exact logit may come within eps ||w_t - w_i|| of the own one. First a bound
            # from each span's largest norm (one comparison per entry of the spans that may hold one), then each
            # candidate's own bound in float64.
            floor = thr[:, None] - kap * (np.multiply.outer(xn[ks], p.span_norm) + self.max_bias) - eps_ * p.span_norm
            lt = L.dtype.type if isinstance(L, np.ndarray) else np.float32  # compared in the logits' own format
            with np.errstate(over="ignore"):  # beyond float32: inf rounds down to its largest, -inf keeps every row
                floor = np.nextafter(floor.astype(lt), lt(-np.inf))  # rounded down
            kk, cc, val = row_candidates(L, ks, floor, p.width, p.span_top[ks])
            ii = cc if p.cols is None else p.cols[cc]
            near = val + kap * (xn[ks][kk] * norms[ii] + absb[ii]) + eps_ * norms[ii] >= thr[kk]
            kk, ii, cc = kk[near], ii[near], cc[near]
            if limit is not None:
                many = np.bincount(kk, minlength=len(ks)) > limit
                left.append(ks[many])
                keep = ~many[kk]
                kk, ii, cc, ks, thr = (np.cumsum(~many) - 1)[kk[keep]], ii[keep], cc[keep], ks[~many], thr[~many]
            union, col = np.unique(ii, return_inverse=True)
            G = X64[ks] @ np.asarray(self.Win[union], dtype=np.float64).T  # (k, |union|): one blocked product
            g = G[kk, col] + self.b64[ii]
            gap = low[ks][kk] - g - gamma(d + 6) * (xn[ks][kk] * norms[ii] + absb[ii])  # <= l_t - l_i
            den = norms[t[ks][kk]] + norms[ii]  # >= ||w_t - w_i||
            with np.errstate(divide="ignore", invalid="ignore"):  # zero rows: left to tier 3
                dist = np.where(gap > eps_ * den, gap / den, np.nan)
            # Tier 3: the pairs left, on their exact differences.
            hard = np.flatnonzero(np.isnan(dist))
            for lo3 in range(0, len(hard), 512):  # 512 pairs: a few MB of float64 differences at a time
                h = hard[lo3 : lo3 + 512]
                k3, i3 = ks[kk[h]], ii[h]
                dist[h] = self._exact_distances(t[k3], i3, X64[k3])
            nearest = np.full(len(ks), np.inf)
            np.minimum.at(nearest, kk, dist)
            # The rows left unmeasured bound the margin only of a point that wins against the measured ones.
            rest = np.full(len(ks), eps_)
            wins = np.flatnonzero(nearest > eps_)
            if wins.size:
                sub = np.isin(kk, wins)
                rest[wins] = self._unmeasured_margin(p, ks[wins], np.searchsorted(wins, kk[sub]), cc[sub], kap, eps_)
            bounds = np.searchsorted(kk, np.arange(len(ks) + 1))  # kk is sorted: each point's pairs in a run
            for j, k in enumerate(ks):
                mine = np.arange(bounds[j], bounds[j + 1])
                margin[k] = min(rest[j], nearest[j])
                if mine.size:  # reflect across the float64 argmax, or across a duplicate that always wins
                    lost = mine[dist[mine] == -np.inf]
                    worst[k] = ii[lost[0]] if lost.size else ii[mine[np.argmax(g[mine])]]
        return np.concatenate(left) if left else np.zeros(0, dtype=np.int64)

    def _unmeasured_margin(self, p: _Pass, ks, kk, cc, kap: float, eps_: float) -> np.ndarray:
        """For each point ``ks`` of the pass ``p``, a certified lower bound on its distance to the hyperplanes of the
        rows tier 2 did not measure (the pairs ``kk``, ``cc``, positions in ``ks`` and columns of ``p.L``, are those
        it did): above eps_ (they were ruled out by it), and as tier 1 bounds them, each span's largest computed
        logit among them within kappa (||x|| times the span's largest norm + max |b_i|). Without the second, a point
        tier 2 settles would keep eps as its margin where its computed logits show far more (SmolLM2's head: 6270
        radius bounds at 1e-8). Asked only for points that win against the rows tier 2 measured."""
        top = span_maxima_without(p.L, ks, p.width, p.span_top[ks], kk, cc)
        up = top + kap * (np.multiply.outer(p.xn[ks], p.span_norm) + self.max_bias)
        with np.errstate(invalid="ignore"):  # an all-zero layer: 0 / 0, a NaN bound that proves nothing
            bound = ((p.low[ks, None] - up) / np.add.outer(self.norms[p.items[ks]], p.span_norm)).min(axis=1)
        return np.fmax(eps_, bound)

    def _exact_distances(self, t, i, X):
        """Certified distance of each point ``X[p]`` to the hyperplane of the pair (t[p], i[p]), in float64 on
        the difference ``w_i - w_t`` (less gamma_(d+3) of the absolute terms); -inf for a duplicate row whose
        offset is at least as high."""
        A = np.asarray(self.Win[i], dtype=np.float64) - np.asarray(self.Win[t], dtype=np.float64)
        c = self.b64[i] - self.b64[t]
        err = gamma(self.d + 3) * (np.einsum("pd,pd->p", np.abs(A), np.abs(X)) + np.abs(c))
        with np.errstate(divide="ignore", invalid="ignore"):  # a zero row (duplicate): +-inf by its offset
            dist = (-(np.einsum("pd,pd->p", A, X) + c) - err) / (row_norms(A) * (1 + gamma(self.d + 4)))
        return np.where(np.isnan(dist), -np.inf, dist)

    def start_margins(self, eps: float, block: int = 2048, lift: float = 1.0) -> GramPass:
        """Certified margin of every category at its own start point x = lift w_t, for all n categories at once
        (``lift`` a power of two: :func:`~argmaxable.core.box.start_lift`).

        The logits of all start points form the Gram matrix W Wᵀ (+ b), which is symmetric: it is computed block
        by block over its upper triangle only, each block serving the targets of its rows and of its columns,
        which halves the dominant cost of checking a whole vocabulary. With a bias, each block is one product
        of ``[w_i, b_i, 1]`` with ``[lift w_j, 1, b_j]``, i.e. ``lift w_i.w_j + b_i + b_j``: the row and column
        targets' logits are its row and column maxima less one bias, with no extra pass over the block (the lift
        multiplies both targets' products alike). Only running
        maxima are kept (never an n×n matrix); items that do not win here go through :meth:`evaluate`. The start
        points some row certainly beats are returned with the Gram block that beats them, so that :meth:`evaluate`
        given the pass does not measure them against the whole layer again (:meth:`_first_steps`): layers over
        :data:`BF16_ABOVE` weights on the numpy path, in float32 or with bfloat16 steps (a bfloat16 pass followed
        by float32 steps would name its first rows in bfloat16, see :data:`BF16_STEPS_D`). Below that the first
        step's product is short (PP-OCRv4, 6625 x 120: no faster).
        """
        n = self.n_rows
        own = lift * self.sq + self.b64
        top, where, kappa = self._gram_top(block, lift)
        top -= self.b64  # each maximum holds the target's own bias once
        # What the bound cannot certify is not measured again here: those items go to reflection's pool, whose
        # first step evaluates the same start points row by row (:meth:`evaluate`).
        margin = self._certified_margin(np.arange(n), self.Win, own, top, eps, kappa, lift)
        if where is None or self.Win.size <= BF16_ABOVE or (self.bf16_start and not self.bf16_steps):
            return GramPass(margin, lift=lift)
        kappa = self.kappa if kappa is None else kappa
        err = kappa * (lift * np.sqrt(self.sq) * self.max_norm + 2 * self.max_bias)  # as in _certified_margin
        return GramPass(margin, np.where(top - err > own + err, where, -1), block, lift)

    def _gram_top(self, block: int, lift: float = 1.0):
        """The Gram pass of :meth:`start_margins`: each target's largest computed logit (plus its own bias) over the
        other rows at its start point ``lift`` w_t; the first row of the block of ``block`` rows that holds it (of
        :attr:`_bf16_layer` in bfloat16, of the layer on the numpy path, None on the torch path); and the logits'
        relative error factor (None: this system's float rounding). A biased layer's lift multiplies the weights of
        the right factor (a copy already: its bias and ones columns swapped), exactly."""
        n = self.n_rows
        if self.device is not None:  # the torch path: products in this system's dtype on the device
            left, right, _ = self._torch_layer
            if lift != 1:
                right = right.clone()
                right[:, : self.d] *= lift
            with exact_float32():
                top, _ = gram_maxima(n, block, left, right)
            return top, None, None
        if self.bf16_start:
            # bfloat16 products on a CPU that has them: twice the float32 rate, with a bound 2^16 times looser.
            L = R = self._bf16_layer
            if not self.homogeneous:  # [lift W, 1, b], for this pass only
                R = L.clone()
                R[:, self.d], R[:, self.d + 1] = L[:, self.d + 1], L[:, self.d]
                if lift != 1:
                    R[:, : self.d] *= lift
            top, where = np.empty(n), np.empty(n, dtype=np.int64)
            top[self._order], where[self._order] = gram_maxima(n, block, L, R)
            return top, where, bf16_rounding_bound(self.d + 2)
        if self.homogeneous:
            left = right = self.W
        else:
            ones, b = np.ones((n, 1), dtype=self.dtype), self.b[:, None]
            left, right = np.hstack([self.W, b, ones]), np.hstack([self.W * self.dtype(lift), ones, b])
        return (*gram_maxima(n, block, left, right), None)

    def _certified_margin(self, items, X, own, top, eps, kappa=None, lift: float = 1.0):
        """Lower bound on each point's distance to its item's nearest hyperplane, the points ``lift`` X, from
        computed logits whose relative error is at most ``kappa`` (default: this system's float rounding)."""
        kappa = self.kappa if kappa is None else kappa
        # Each computed logit is within kappa (||w_i|| ||x|| + 2 max|b|) of the exact one (twice the bias: the
        # Gram blocks of start_margins add two), and ||w_i - w_t|| <= ||w_t|| + max_i ||w_i||: a certified
        # distance bound from two numbers per point.
        xn = lift * np.sqrt(row_squares(X))
        err = kappa * (xn * self.max_norm + 2 * self.max_bias)
        return (own - top - 2 * err) / (self.norms[items] + self.max_norm)
