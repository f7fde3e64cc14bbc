"""The arithmetic backend of the approximate stage: which device and precision run the products, the Gram kernels
of a whole vocabulary, the span maxima of a batch of logits, and the rounding bounds that make their float32 and
bfloat16 results rigorous. The adapters (:mod:`argmaxable.core.systems`) decide what to compute; this module
computes it. Exact float64 error factors live beside it in :mod:`argmaxable.core.numerics`.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import sys

import numpy as np

# What a machine with a CUDA (NVIDIA) or ROCm (AMD) GPU that torch could use exposes: without them, "auto" is the CPU.
GPU_DRIVER_FILES = ("/proc/driver/nvidia/version", "/dev/nvidiactl", "/dev/kfd")



@functools.cache
def _malloc_trim():
    """glibc's ``malloc_trim``, or None where the C library has none (musl, macOS, Windows)."""
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError, TypeError):
        return None


def release_free_heap() -> None:
    """Hand the C heap's free pages back to the system (glibc's ``malloc_trim``; nothing where the C library is
    another). glibc keeps resident the blocks that numpy's and torch's temporaries freed: 40-58 MiB after SmolLM2's
    reflection, which the whole vocabulary's witnesses, written next, would find still counted."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def rounding_bound(dtype, d: int) -> float:
    """Relative error factor of a length-d dot product plus an offset in ``dtype`` (Higham's gamma_{d+2},
    doubled for the float64->dtype rounding of the inputs and the final subtraction)."""
    u = np.finfo(dtype).eps / 2
    return 2.0 * (d + 4) * u / (1.0 - (d + 4) * u)


def bf16_rounding_bound(d: int) -> float:
    """Relative error factor of one entry of the bfloat16 Gram product in
    :meth:`~argmaxable.core.fastpath.LayerProducts.start_margins`.

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


# The fewest rows a bfloat16 product on the CPU is padded to (:func:`padded_rows`).
MIN_PRODUCT_ROWS = 16


def padded_rows(k: int, cap: int) -> int:
    """Rows a bfloat16 CPU product of ``k`` points is computed with: the next power of two from
    :data:`MIN_PRODUCT_ROWS`, at most ``cap``. oneDNN compiles a kernel for every shape it multiplies and keeps it
    for the life of the process (measured on torch 2.13: 0.6 MiB per new shape, never freed; still 0.3 MiB with
    ``ONEDNN_PRIMITIVE_CACHE_CAPACITY=0``): reflection's passes, whose point counts shrink as items are proven,
    met hundreds of shapes and grew SmolLM2's check by 1.7 MiB a batch, 60 MiB in all. Padded with zero points, a
    check meets a handful of shapes; each row of the product is the same whatever the number of rows (measured,
    bitwise), so the padding changes no logit."""
    return min(cap, max(MIN_PRODUCT_ROWS, 1 << max(k - 1, 0).bit_length()))


def row_squares(X: np.ndarray, block: int = 1024) -> np.ndarray:
    """``||x_k||^2`` per row in float64, a block of rows at a time (no float64 copy of a float32 X; blocks of a few
    MB stay in cache, where a 50 MB block costs page faults on every pass)."""
    out = np.empty(len(X))
    for lo in range(0, len(X), block):
        Xb = np.asarray(X[lo : lo + block], dtype=np.float64)
        out[lo : lo + block] = np.einsum("nd,nd->n", Xb, Xb)
    return out


# The largest |entry| whose products and their sums over a block stay well inside float32's normal range (2^-126
# .. 2^128) and float64's: inside, row_moments multiplies the layer as it is; outside, scaled by a power of two.
MOMENTS_RANGE = {np.dtype(np.float32): 2.0**30, np.dtype(np.float64): 2.0**200}


def row_moments(W: np.ndarray, block: int = 8192) -> tuple[np.ndarray, np.ndarray, float]:
    """The mean row and the mean of w wᵀ over the rows of ``W * s``, float64, and the power of two s: 1 when W's
    largest |entry| lies within :data:`MOMENTS_RANGE` of 1 (products in W's own dtype, summed in float64: a float32
    layer needs no float64 copy), else the power that brings it into [0.5, 1) (products in float64), so that no
    square overflows or underflows. A block of rows at a time."""
    n, d = W.shape
    top = float(np.abs(W).max()) if W.size else 0.0
    reach = MOMENTS_RANGE.get(W.dtype)  # another dtype: scaled, in float64
    inside = top == 0.0 or (reach is not None and 1 / reach <= top <= reach)
    scale = 1.0 if inside else float(np.ldexp(1.0, -int(np.frexp(top)[1])))
    total, second = np.zeros(d), np.zeros((d, d))
    for lo in range(0, n, block):
        Wb = W[lo : lo + block] if inside else W[lo : lo + block].astype(np.float64) * scale
        total += Wb.sum(axis=0, dtype=np.float64)
        second += Wb.T @ Wb
    return total / n, second / n, scale


def bf16_augmented(W: np.ndarray, b: np.ndarray | None, order: np.ndarray, block_bytes: int = 4 << 20):
    """``[W, b, 1]`` (or W without a bias) as a bfloat16 torch tensor, its rows in the order ``order``, rounded once
    on the copy from float64 or float32, ``block_bytes`` of rows at a time (no reordered copy of the layer, and
    temporaries small enough that the heap does not keep them: 8192 rows of Gemma-2 were 72 MiB)."""
    import torch

    n, d = W.shape
    block = max(1, block_bytes // W[:1].nbytes)
    L = torch.empty((n, d if b is None else d + 2), dtype=torch.bfloat16)
    for lo in range(0, n, block):
        L[lo : lo + block, :d] = torch.from_numpy(W[order[lo : lo + block]])
    if b is not None:
        L[:, d], L[:, d + 1] = torch.from_numpy(b[order]), 1.0
    return L


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
    if str(G.dtype) == "torch.bfloat16" and G.device.type == "cpu":
        return bf16_max(G, 0), bf16_max(G, 1)
    return G.amax(dim=0).double().cpu().numpy(), G.amax(dim=1).double().cpu().numpy()


def bf16_max(T, axis: int) -> np.ndarray:
    """Maxima along ``axis`` of a bfloat16 CPU tensor, as float64 numpy, read through its bits as int16: numpy's
    integer reductions take a tenth of the CPU time of torch's bfloat16 ones here (1.6 against 16 ms for both
    maxima of a 2048 x 2048 Gram block), which was 40% of the Gram pass. Non-negative values order as their bit
    patterns and negative ones in reverse, so the maximum is the largest pattern where one is >= 0, else the
    smallest."""
    import torch

    bits = T.view(torch.int16).numpy()
    hi, lo = bits.max(axis=axis), bits.min(axis=axis)
    return torch.from_numpy(np.where(hi >= 0, hi, lo)).view(torch.bfloat16).double().numpy()


def gram_maxima(n: int, block: int, left, right) -> tuple[np.ndarray, np.ndarray]:
    """Row maxima, without the diagonal, of the symmetric n×n matrix ``left @ right.T`` (numpy arrays or torch
    tensors), visiting the upper triangle of blocks only: each block serves the targets of its rows and of its
    columns. Only the running maxima are kept, never the matrix; and for each row, the first index of the block of
    ``block`` columns that holds its maximum (where its argmax can be found again). Every block is written into one
    buffer, not a new 8 MiB (bfloat16) temporary per product for the heap to keep."""
    top, where = np.full(n, -np.inf), np.zeros(n, dtype=np.int64)
    size = min(n, block) ** 2
    if isinstance(left, np.ndarray):
        buffer, matmul = np.empty(size, dtype=left.dtype), np.matmul
    else:
        import torch

        buffer, matmul = torch.empty(size, dtype=left.dtype, device=left.device), torch.matmul
    for lo in range(0, n, block):
        rows = slice(lo, min(lo + block, n))
        for lo2 in range(lo, n, block):
            cols = slice(lo2, min(lo2 + block, n))
            A, B = left[rows], right[cols]
            G = matmul(A, B.T, out=buffer[: len(A) * len(B)].reshape(len(A), len(B)))
            col_max, row_max = _block_maxima(G, diagonal=lo2 == lo)
            if lo2 != lo:  # a diagonal block's columns are its rows
                _raise(top[cols], where[cols], col_max, lo)
            _raise(top[rows], where[rows], row_max, lo2)
    return top, where


def _raise(top: np.ndarray, where: np.ndarray, values: np.ndarray, at: int) -> None:
    """Running maxima ``top`` (views) raised to ``values`` where those are higher, ``where`` set to ``at`` there:
    blocks come in increasing order, so a tie keeps the first."""
    higher = values > top
    top[higher], where[higher] = values[higher], at


def band_maxima(L, width: int) -> np.ndarray:
    """Maximum of each row of L (numpy or torch, (b, n)) over consecutive spans of ``width`` columns (the last one
    shorter), as float64 numpy (b, spans): one reduction over a reshaped view, not one per strided span."""
    b, n = L.shape
    full = n // width * width
    if isinstance(L, np.ndarray):
        tail = [L[:, full:].max(axis=1)[:, None]] if n > full else []
        return np.hstack([L[:, :full].reshape(b, -1, width).max(axis=2), *tail]).astype(np.float64)
    import torch

    tail = [L[:, full:].amax(dim=1)[:, None]] if n > full else []
    return torch.cat([L[:, :full].reshape(b, -1, width).amax(dim=2), *tail], dim=1).double().cpu().numpy()


def band_argmax(L, span: np.ndarray, width: int) -> np.ndarray:
    """Column of each row's maximum of L (numpy or torch, (b, n)) within its span ``span[r]`` of ``width`` columns
    (the first, on ties): one gather of whole spans through a reshaped view, no (b, width) index arrays."""
    b, n = L.shape
    full = n // width  # spans of full width; a last, shorter one holds the rest
    out = np.empty(b, dtype=np.int64)
    inner, last = np.flatnonzero(span < full), np.flatnonzero(span >= full)
    if isinstance(L, np.ndarray):
        if inner.size:
            seg = L[:, : full * width].reshape(b, full, width)[inner, span[inner]]  # (k, width)
            out[inner] = span[inner] * width + seg.argmax(axis=1)
        if last.size:
            out[last] = full * width + L[last, full * width :].argmax(axis=1)
        return out
    import torch

    dev = L.device
    pick = lambda rows: torch.from_numpy(rows).to(dev)  # noqa: E731
    if inner.size:  # (torch's argmax of bfloat16 is 4x slower on the CPU than max's indices)
        seg = L[:, : full * width].reshape(b, full, width)[pick(inner), pick(span[inner])]  # (k, width)
        out[inner] = span[inner] * width + seg.max(dim=1).indices.cpu().numpy()
    if last.size:
        out[last] = full * width + L[pick(last), full * width :].max(dim=1).indices.cpu().numpy()
    return out


def row_candidates(L, rows: np.ndarray, floor: np.ndarray, width: int, span_top: np.ndarray, entries: int = 1 << 18
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Entries of the rows ``rows`` of L (numpy or torch) at or above ``floor`` (float32 or L's dtype, shape
    (len(rows), spans): one threshold per span of ``width`` columns), as (row position, column, float64 value),
    sorted by row position and column. Only the spans whose maximum (``span_top``, the same shape) reaches their
    threshold are read, about ``entries`` at a time (64 points of Qwen2.5-Coder's 151936 columns would be 78 MB of
    float64 at once; 2^18 entries: 2 MB); entries are compared in the logits' own format, so no comparison rounds,
    and only those kept are made float64."""
    pk, pb = np.nonzero(span_top >= floor)  # (row position, span) pairs that may hold an entry
    step, spans = max(1, entries // width), np.unique(pb)
    parts = []
    for span in spans:
        k = pk[pb == span]
        lo, hi = span * width, min((span + 1) * width, L.shape[1])
        parts += [_span_entries(L, rows, k[a : a + step], lo, hi, floor[k[a : a + step], span])
                  for a in range(0, len(k), step)]
    if not parts:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0)
    p, j, v = (np.concatenate(part) for part in zip(*parts, strict=True))
    if len(spans) > 1:
        order = np.lexsort((j, p))
        p, j, v = p[order], j[order], v[order]
    return p, j, v


def span_maxima_without(L, rows: np.ndarray, width: int, span_top: np.ndarray, k: np.ndarray, cols: np.ndarray
                        ) -> np.ndarray:
    """``span_top`` (the maximum of each of the rows ``rows`` of L over each span of ``width`` columns, float64
    (len(rows), spans)) with the spans that hold a listed entry (row position ``k[i]``, column ``cols[i]``) taken
    again without the listed entries (-inf where nothing is left): the largest logits of the rows not listed."""
    out = np.array(span_top, dtype=np.float64)
    span = cols // width
    for s in np.unique(span):
        sel = span == s
        pos, local = np.unique(k[sel], return_inverse=True)
        lo, hi = s * width, min((s + 1) * width, L.shape[1])
        if isinstance(L, np.ndarray):
            seg = L[rows[pos], lo:hi]  # a copy
            seg[local, cols[sel] - lo] = -np.inf
            out[pos, s] = seg.max(axis=1)
        else:
            import torch

            seg = L[torch.from_numpy(rows[pos]).to(L.device), lo:hi]  # a copy
            seg[torch.from_numpy(local).to(L.device), torch.from_numpy(cols[sel] - lo).to(L.device)] = -torch.inf
            out[pos, s] = seg.amax(dim=1).double().cpu().numpy()
    return out


def top_columns(L, rows: np.ndarray, k: int) -> np.ndarray:
    """The columns of the ``k`` largest entries of the rows ``rows`` of L (numpy or torch), as an int64 array
    (len(rows), k), in no particular order: torch's top-k on the CPU costs about one pass over the row, numpy's
    partition 25 of them (reflection asks only on layers over 1e6 weights, whose checks import torch anyway)."""
    import torch

    T = torch.from_numpy(L[rows]) if isinstance(L, np.ndarray) else L[torch.from_numpy(rows).to(L.device)]
    return T.topk(min(k, T.shape[1]), dim=1).indices.cpu().numpy().astype(np.int64, copy=False)


def _span_entries(L, rows, k, lo: int, hi: int, floor):
    """:func:`row_candidates` in the columns ``lo .. hi`` of the rows ``rows[k]`` (row positions ``k``)."""
    if isinstance(L, np.ndarray):
        seg = L[rows[k], lo:hi]
        p, j = np.nonzero(seg >= floor[:, None])
        return k[p], lo + j, seg[p, j].astype(np.float64)
    import torch

    seg = L[torch.from_numpy(rows[k]).to(L.device), lo:hi]
    p, j = torch.nonzero(seg >= torch.from_numpy(floor[:, None]).to(L.device), as_tuple=True)
    return k[p.cpu().numpy()], lo + j.cpu().numpy(), seg[p, j].double().cpu().numpy()


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
    """Context in which torch's float32 products are true float32 (on CUDA no TF32 inputs, no reduced-precision
    reductions; on the CPU too, no bfloat16 passes that a caller's ``torch.set_float32_matmul_precision`` would
    allow), so that :func:`rounding_bound` holds for them as for numpy's."""

    def __enter__(self):
        import torch

        m = torch.backends.cuda.matmul
        self._saved = (m.allow_tf32, torch.backends.cudnn.allow_tf32, m.allow_fp16_reduced_precision_reduction,
                       m.allow_bf16_reduced_precision_reduction, torch.get_float32_matmul_precision())
        m.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
        m.allow_fp16_reduced_precision_reduction = m.allow_bf16_reduced_precision_reduction = False
        torch.set_float32_matmul_precision("highest")

    def __exit__(self, *exc):
        import torch

        m = torch.backends.cuda.matmul
        (m.allow_tf32, torch.backends.cudnn.allow_tf32, m.allow_fp16_reduced_precision_reduction,
         m.allow_bf16_reduced_precision_reduction, precision) = self._saved
        torch.set_float32_matmul_precision(precision)
