"""Adapters from the papers' questions to halfspace systems ``A x + c < 0`` (GUIDE §1 table).

A :class:`System` describes many items at once (one per category or label assignment). It gives the
approximate stage batched residuals and reflection rows, and the exact stage one dense system per item.
Rows are never materialised for all items at once: an n×n matrix would not fit for a real vocabulary.
"""

from __future__ import annotations

import os
import sys
from functools import cached_property
from typing import Protocol

import numpy as np

from argmaxable.core.gordan import gordan_certificates
from argmaxable.core.numerics import gamma, row_norms
from argmaxable.core.supports import SupportPool

# What a machine with a CUDA (NVIDIA) or ROCm (AMD) GPU that torch could use exposes: without them, "auto" is the CPU.
GPU_DRIVER_FILES = ("/proc/driver/nvidia/version", "/dev/nvidiactl", "/dev/kfd")

# Above this many weights the approximate stage runs in float32 (2x the GEMM rate); acceptance stays rigorous
# through the rounding bound below.
FLOAT32_ABOVE = 200_000
# Above this many weights the Gram pass of a whole vocabulary runs in bfloat16 where the CPU has native bfloat16
# products. Below it the pass is short (0.1 s at 6625 x 120) and importing torch to ask would cost about 1 s.
BF16_ABOVE = 1_000_000


def rounding_bound(dtype, d: int) -> float:
    """Relative error factor of a length-d dot product plus an offset in ``dtype`` (Higham's gamma_{d+2},
    doubled for the float64->dtype rounding of the inputs and the final subtraction)."""
    u = np.finfo(dtype).eps / 2
    return 2.0 * (d + 4) * u / (1.0 - (d + 4) * u)


def bf16_rounding_bound(d: int) -> float:
    """Relative error factor of one entry of the bfloat16 Gram product in :meth:`CategorySystem.start_margins`.

    Inputs are rounded to bfloat16 (unit roundoff u = 2^-8), their products are exact
    in float32, the length-d sum accumulates in float32 (gamma_d at 2^-24) and the result is rounded to
    bfloat16 again: at most (3u + gamma_d)(1 + O(u)) times the sum of the absolute terms; 4u + 2 gamma_d bounds it.
    """
    u, v = 2.0**-8, 2.0**-24
    return 4 * u + 2 * d * v / (1 - d * v)


def bf16_gemm() -> bool:
    """Whether this CPU multiplies bfloat16 matrices natively (AVX512-BF16 or AMX): about twice float32 there,
    far slower where emulated."""
    try:
        import torch

        return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())
    except (ImportError, AttributeError):
        return False


def row_squares(X: np.ndarray, block: int = 1024) -> np.ndarray:
    """``||x_k||^2`` per row in float64, a block of rows at a time (no float64 copy of a float32 X; blocks of a few
    MB stay in cache, where a 50 MB block costs page faults on every pass)."""
    out = np.empty(len(X))
    for lo in range(0, len(X), block):
        Xb = np.asarray(X[lo : lo + block], dtype=np.float64)
        out[lo : lo + block] = np.einsum("nd,nd->n", Xb, Xb)
    return out


def _bf16_augmented(W: np.ndarray, b: np.ndarray | None):
    """``[W, b, 1]`` and ``[W, 1, b]`` (or W twice without a bias) as bfloat16 torch tensors, rounded once on the
    copy from float64 or float32."""
    import torch

    n, d = W.shape
    L = torch.empty((n, d if b is None else d + 2), dtype=torch.bfloat16)
    L[:, :d] = torch.from_numpy(W)
    if b is None:
        return L, L
    R = torch.empty_like(L)
    R[:, :d] = L[:, :d]
    L[:, d], L[:, d + 1] = torch.from_numpy(b), 1.0
    R[:, d], R[:, d + 1] = 1.0, torch.from_numpy(b)
    return L, R


def _block_maxima(G, diagonal: bool) -> tuple[np.ndarray, np.ndarray]:
    """Column and row maxima, as float64 numpy arrays, of one Gram block: a numpy array (numpy's BLAS: no torch
    import on that path, a second per process) or a torch tensor on any device. A diagonal block first drops
    each target's own (zero) entry."""
    if isinstance(G, np.ndarray):
        if diagonal:
            np.fill_diagonal(G, -np.inf)
        return G.max(axis=0), G.max(axis=1)
    if diagonal:
        G.fill_diagonal_(-np.inf)
    return G.amax(dim=0).double().cpu().numpy(), G.amax(dim=1).double().cpu().numpy()


def _gram_maxima(n: int, block: int, product) -> np.ndarray:
    """Row maxima, without the diagonal, of the symmetric n×n matrix whose block ``product(rows, cols)`` returns,
    visiting the upper triangle of blocks only: each block serves the targets of its rows and of its columns.
    Only the running maxima are kept, never the matrix."""
    top = np.full(n, -np.inf)
    for lo in range(0, n, block):
        rows = slice(lo, min(lo + block, n))
        for lo2 in range(lo, n, block):
            cols = slice(lo2, min(lo2 + block, n))
            col_max, row_max = _block_maxima(product(rows, cols), diagonal=lo2 == lo)
            if lo2 != lo:  # a diagonal block's columns are its rows
                np.maximum(top[cols], col_max, out=top[cols])
            np.maximum(top[rows], row_max, out=top[rows])
    return top


def resolve_device(device: str | None):
    """``"auto"``: a CUDA GPU where torch sees one, else None (the CPU path: numpy's BLAS, bfloat16 torch products
    where the CPU has them); ``"cpu"``/``"cuda"``/``"cuda:1"``...: the torch path on that device."""
    if device is None:
        return None
    if device == "auto" and "torch" not in sys.modules and not any(map(os.path.exists, GPU_DRIVER_FILES)):
        return None  # no GPU driver: the CPU path, without the second it takes to import torch
    import torch

    if device == "auto":
        return torch.device("cuda") if torch.cuda.is_available() else None
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        dev = None
    if dev is None or dev.type not in ("cpu", "cuda"):  # "meta" holds no values; other backends are untested
        raise ValueError(f"The 'device' parameter must be 'auto', 'cpu' or 'cuda[:k]'. Got {device!r}.") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"The 'device' parameter asks for {device!r} but torch sees no CUDA GPU: use 'auto' or 'cpu'.")
    return dev


class exact_float32:
    """Context in which torch's float32 products on CUDA are true float32 (no TF32 inputs, no reduced-precision
    reductions), so that :func:`rounding_bound` holds for them as for numpy's."""

    def __enter__(self):
        import torch

        m = torch.backends.cuda.matmul
        self._saved = (m.allow_tf32, torch.backends.cudnn.allow_tf32, m.allow_fp16_reduced_precision_reduction,
                       m.allow_bf16_reduced_precision_reduction)
        m.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
        m.allow_fp16_reduced_precision_reduction = m.allow_bf16_reduced_precision_reduction = False

    def __exit__(self, *exc):
        import torch

        m = torch.backends.cuda.matmul
        (m.allow_tf32, torch.backends.cudnn.allow_tf32, m.allow_fp16_reduced_precision_reduction,
         m.allow_bf16_reduced_precision_reduction) = self._saved


class System(Protocol):
    """What the stages read from an adapter. Optional stages are declared by flags, never probed for."""

    n_rows: int  # constraints per item
    d: int
    dtype: type
    homogeneous: bool  # all offsets are zero
    has_gram_start: bool  # start_margins(eps): certified margins of every item at its start point at once
    has_dual_stage: bool  # gordan(items, box=, eps=, progress=): Gordan certificates before reflection

    def start(self, items: np.ndarray) -> np.ndarray: ...

    def evaluate(self, items: np.ndarray, X: np.ndarray, eps: float) -> tuple[np.ndarray, np.ndarray]:
        """For each (item, point): the row to reflect across next, and a certified lower bound on the point's
        distance to the item's nearest hyperplane (> 0 means every constraint holds; exact arithmetic)."""
        ...

    def rows(self, items: np.ndarray, j: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...
    def dense(self, item: int) -> tuple[np.ndarray, np.ndarray]: ...


class CategorySystem:
    """Category t of softmax(Wx + b) wins iff (w_i - w_t).x + (b_i - b_t) < 0 for all i != t (002 §3.3)."""

    has_gram_start = True
    has_dual_stage = False
    has_shared_certificates = True  # :meth:`certificate_pool`

    def __init__(self, W: np.ndarray, b: np.ndarray | None, device=None):
        self.device = device  # a torch.device for the torch path (Gram pass, reflection's products), or None
        self.Win = W  # the layer as given: float64, or float32 kept as is (no float64 copy of a large layer)
        self.b64 = np.zeros(W.shape[0]) if b is None else b
        self.homogeneous = b is None or not np.any(b)
        self.n_rows, self.d = W.shape
        self.dtype = np.float32 if W.size > FLOAT32_ABOVE else np.float64
        self.b = self.b64.astype(self.dtype)
        self.sq = row_squares(W)  # ||w_i||^2 in float64
        # ||w_i|| rounded up (float64 by blocks: no n×d temporary, no overflow/underflow of squares)
        self.norms = row_norms(W, squares=self.sq) * (1 + gamma(self.d + 4))
        self.max_norm = float(self.norms.max())
        self.max_bias = float(np.abs(self.b64).max())
        self.kappa = rounding_bound(self.dtype, self.d)

    @cached_property
    def W(self) -> np.ndarray:
        """The layer in the approximate stage's dtype (made on first use: a whole vocabulary proved by the
        bfloat16 first step never needs it)."""
        return self.Win if self.Win.dtype == self.dtype else self.Win.astype(self.dtype)

    @cached_property
    def bf16_start(self) -> bool:
        """Whether :meth:`start_margins` multiplies in bfloat16 (a large float32 system on a CPU that has it)."""
        return self.dtype == np.float32 and self.Win.size > BF16_ABOVE and bf16_gemm()

    def start(self, items):
        return self.Win[items]  # x = w_t: "the dot product is largest when the vectors align" (002 §3.4.1)

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

    def evaluate(self, items, X, eps):
        rows = np.arange(len(items))
        if self.device is not None:
            return self._evaluate_torch(items, X, eps, rows)
        logits = X @ self.W.T  # (b, n) in self.dtype
        logits += self.b
        own = logits[rows, items].astype(np.float64)
        logits[rows, items] = -np.inf  # the target's own (zero) row
        worst = np.argmax(logits, axis=1)  # the current argmax among the others (002 Fig. 5 line 1)
        top = logits[rows, worst].astype(np.float64)
        return worst, self._certified_margin(items, X, own, top, eps)

    def _evaluate_torch(self, items, X, eps, rows):
        """:meth:`evaluate` on the torch device, in this system's dtype (true float32: no TF32)."""
        import torch

        left, _, b = self._torch_layer
        with exact_float32():
            Xt = torch.from_numpy(np.ascontiguousarray(X, dtype=self.dtype)).to(self.device)
            logits = Xt @ left[:, : self.d].T + b  # (b, n)
        it, rt = torch.from_numpy(items).to(self.device), torch.from_numpy(rows).to(self.device)
        own = logits[rt, it].double().cpu().numpy()
        logits[rt, it] = -torch.inf  # the target's own (zero) row
        worst = logits.argmax(dim=1)
        top = logits[rt, worst].double().cpu().numpy()
        return worst.cpu().numpy(), self._certified_margin(items, X, own, top, eps)

    def start_margins(self, eps: float, block: int = 2048) -> np.ndarray:
        """Certified margin of every category at its own start point x = w_t, for all n categories at once.

        The logits of all start points form the Gram matrix W Wᵀ (+ b), which is symmetric: it is computed block
        by block over its upper triangle only, each block serving the targets of its rows and of its columns,
        which halves the dominant cost of checking a whole vocabulary. With a bias, each block is one product
        of ``[w_i, b_i, 1]`` with ``[w_j, 1, b_j]``, i.e. ``w_i.w_j + b_i + b_j``: the row and column targets'
        logits are its row and column maxima less one bias, with no extra pass over the block. Only running
        maxima are kept (never an n×n matrix); items that do not win here go through :meth:`evaluate`.
        """
        n = self.n_rows
        items = np.arange(n)
        own = self.sq + self.b64
        if self.device is not None:  # the torch path: products in this system's dtype on the device
            left, right, _ = self._torch_layer
            with exact_float32():
                top = _gram_maxima(n, block, lambda rows, cols: left[rows] @ right[cols].T)
            kappa, recheck = None, True
        elif self.bf16_start:
            # bfloat16 products on a CPU that has them: twice the float32 rate, with a bound 2^16 times looser.
            # What that bound cannot certify is not re-checked here but goes through the float32 batches.
            L, R = _bf16_augmented(self.Win, None if self.homogeneous else self.b64)
            top = _gram_maxima(n, block, lambda rows, cols: L[rows] @ R[cols].T)
            kappa, recheck = bf16_rounding_bound(self.d + 2), False
        else:
            if self.homogeneous:
                left = right = self.W
            else:
                ones, b = np.ones((n, 1), dtype=self.dtype), self.b[:, None]
                left, right = np.hstack([self.W, b, ones]), np.hstack([self.W, ones, b])
            top = _gram_maxima(n, block, lambda rows, cols: left[rows] @ right[cols].T)
            kappa, recheck = None, True
        top -= self.b64  # each maximum holds the target's own bias once
        return self._certified_margin(items, self.Win, own, top, eps, kappa, recheck)

    def _certified_margin(self, items, X, own, top, eps, kappa=None, recheck=True):
        """Lower bound on each point's distance to its item's nearest hyperplane, from computed logits whose
        relative error is at most ``kappa`` (default: this system's float rounding); with ``recheck``, points
        that win only within that error are measured exactly in float64."""
        kappa = self.kappa if kappa is None else kappa
        # Each computed logit is within kappa (||w_i|| ||x|| + 2 max|b|) of the exact one (twice the bias: the
        # Gram blocks of start_margins add two), and ||w_i - w_t|| <= ||w_t|| + max_i ||w_i||: a certified
        # distance bound from two numbers per point.
        xn = np.sqrt(row_squares(X))
        err = kappa * (xn * self.max_norm + 2 * self.max_bias)
        margin = (own - top - 2 * err) / (self.norms[items] + self.max_norm)
        # Points that win in floating point but not by the bound's margin: measure them exactly.
        for k in np.flatnonzero((margin <= eps) & (own > top) & recheck):
            A, c = self.dense(int(items[k]))
            x = X[k].astype(np.float64)
            # The float64 check itself, less its rounding: gamma_(d+3) (|a_i|.|x| + |c_i|), norms rounded up.
            err = gamma(self.d + 3) * (np.abs(A) @ np.abs(x) + np.abs(c))
            with np.errstate(divide="ignore", invalid="ignore"):  # a zero row (duplicate): +-inf by its offset
                dist = (-(A @ x + c) - err) / (row_norms(A) * (1 + gamma(self.d + 4)))
            margin[k] = np.min(np.where(np.isnan(dist), -np.inf, dist))
        return margin

    def rows(self, items, j):
        return self.W[j] - self.W[items], self.b[j] - self.b[items]

    def dense(self, item):
        # Differences written straight into one float64 array (no copy of the layer without its row first).
        w, A = self.Win[item].astype(np.float64), np.empty((self.n_rows - 1, self.d))
        np.subtract(self.Win[:item], w, out=A[:item])
        np.subtract(self.Win[item + 1 :], w, out=A[item:])
        c = np.delete(self.b64, item) - self.b64[item]
        return A, c

    def row_index(self, item, rows):
        """Map row positions of ``dense(item)`` back to category indices."""
        rows = np.asarray(rows)
        return rows + (rows >= item)

    def certificate_pool(self, box, eps):
        """The dual stage (:mod:`supports`): certificates' supports serve every category."""
        return SupportPool(self.Win, self.b64, box, eps)

    def dense_rows(self, item, categories):
        """Map category indices to row positions of ``dense(item)`` (the item's own row has none)."""
        categories = np.asarray(categories, dtype=np.int64)
        categories = categories[categories != item]
        return categories - (categories > item)


class AssignmentSystem:
    """Assignment y of sigmoid(Wx + b) holds iff y_i (w_i.x + b_i) > 0 for all i (thesis eq. 4.2):
    rows a_i = -y_i w_i, offsets c_i = -y_i b_i."""

    has_gram_start = False
    has_dual_stage = True
    has_shared_certificates = False

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
        R = -self.signs[items] * (X @ self.W.T + self.b)  # (b, n): a_i.x + c_i
        R += self.kappa * (np.linalg.norm(X, axis=1)[:, None] * self.norms + np.abs(self.b64))  # rounding
        with np.errstate(divide="ignore", invalid="ignore"):
            dist = np.where(self.norms > 0, R / self.norms, np.where(R < 0, -np.inf, np.inf))  # (b, n)
        worst = np.argmax(dist, axis=1)  # the most violated row, in distance
        return worst, -dist[np.arange(len(items)), worst]

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

    def dense_rows(self, item, labels):
        """Row positions of ``dense(item)`` are label indices."""
        return np.asarray(labels, dtype=np.int64)
