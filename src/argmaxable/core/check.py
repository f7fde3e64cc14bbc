"""What every question's check shares (each question is a module of :mod:`argmaxable.core.questions`): the layer
validated where it enters (the settings in :mod:`settings`), scaled into the safe range and its masked rows set
aside; the question's :mod:`systems` adapter run through its stages (:mod:`stages`) over a :mod:`ledger`, from
which the result is built once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from argmaxable.core.box import make_box
from argmaxable.core.fastpath import NARROW_RANGE
from argmaxable.core.ledger import Ledger
from argmaxable.core.numerics import gamma, range_scale
from argmaxable.core.result import CheckResult
from argmaxable.core.settings import Settings
from argmaxable.core.stages import stages_for


def _real_array(a, name: str, keep_float32: bool = False) -> np.ndarray:
    """float64 array of real numbers (ints, floats, bools are not silently cast from complex/objects/strings);
    with ``keep_float32`` a float32 array stays as given (every float32 is a float64)."""
    arr = np.asarray(a)
    if arr.dtype.kind not in "iuf":
        kind = {"c": "complex", "b": "boolean", "U": "string", "S": "bytes", "O": "object"}.get(arr.dtype.kind,
                                                                                            str(arr.dtype))
        raise ValueError(f"The {name!r} parameter must hold real numbers. Got {kind} values (dtype {arr.dtype}).")
    return arr if keep_float32 and arr.dtype == np.float32 else arr.astype(np.float64, copy=False)


def as_matrix(W, name: str = "W", keep_float32: bool = False) -> np.ndarray:
    """Accept numpy/torch/array-like of any float dtype; return a finite float64 (n, d) array, or with
    ``keep_float32`` a float32 one as given (a large layer needs no float64 copy)."""
    if hasattr(W, "detach"):  # torch.Tensor
        if W.is_complex():
            raise ValueError(f"The {name!r} parameter must be real. Got a complex tensor ({W.dtype}).")
        W = W.detach().cpu()
        # a bool tensor stays bool (refused below, as a numpy bool array is); float32 kept when asked
        W = W.numpy() if str(W.dtype) == "torch.bool" or (keep_float32 and str(W.dtype) == "torch.float32") \
            else W.double().numpy()
    W = _real_array(W, name, keep_float32)
    if W.ndim != 2 or W.shape[0] == 0 or W.shape[1] == 0:
        raise ValueError(f"The {name!r} parameter must be a non-empty 2-D array (n, d). Got shape {W.shape}.")
    for lo in range(0, len(W), 8192):  # blocks of rows: no n×d temporary
        block = W[lo : lo + 8192]
        if not np.isfinite(block).all():
            bad = np.argwhere(~np.isfinite(block))[0]
            raise ValueError(f"The {name!r} parameter must be finite. Got {float(block[tuple(bad)])} at index "
                             f"{(lo + int(bad[0]), int(bad[1]))}.")
    return W


def _as_bias(b, n: int, masks: bool = False) -> np.ndarray | None:
    """float64 bias of shape (n,): finite, or with ``masks`` (categories) finite or -inf (a masked token)."""
    if b is None:
        return None
    if hasattr(b, "detach"):
        if b.is_complex():
            raise ValueError(f"The 'b' parameter must be real. Got a complex tensor ({b.dtype}).")
        b = b.detach().cpu()
        b = b.numpy() if str(b.dtype) == "torch.bool" else b.double().numpy()  # bool: refused as numpy's is
    b = _real_array(b, "b")
    if b.shape != (n,):
        raise ValueError(f"The 'b' parameter must have shape ({n},) to match W. Got shape {b.shape}.")
    bad = ~np.isfinite(b) & ~(masks & (b == -np.inf))
    if bad.any():
        rule = "finite or -inf (a masked category)" if masks else "finite"
        raise ValueError(f"The 'b' parameter must be {rule}. Got {b[bad][0]} at index {int(np.flatnonzero(bad)[0])}.")
    if masks and not np.isfinite(b).any():
        raise ValueError("The 'b' parameter is -inf everywhere: every category is masked, none can win.")
    return b


def run_stages(system, items: np.ndarray, settings: Settings, box, *, kind: str, threshold: float | None = None,
         map_rows=None, shown_box=None, starts: dict | None = None) -> Ledger:
    """Check ``items`` of ``system``: each of its stages in turn, on the items the previous ones left open.
    ``threshold``: a second radius to answer about (label sets: 1); ``shown_box``: the box the result records
    (default: ``box``); ``starts``: position -> :class:`WarmStart`, where the exact LP of those items starts
    (default: reflection's iterate and the rows it saw beat it)."""
    record = settings.record(box if shown_box is None else shown_box)
    ledger = Ledger(np.asarray(items), kind=kind, eps=settings.eps, threshold=threshold, settings=record)
    if starts is not None:
        ledger.start_from(starts)
    open_ = np.arange(len(items))
    for stage in stages_for(system, box, settings, map_rows):
        open_ = stage.run(system, ledger, open_)
    return ledger


# A layer whose largest entry lies outside [2^-500, 2^500] is scaled by a power of two first (numerics.range_scale):
# squares of its entries would overflow or underflow. Scaling every row and offset by one positive number changes
# no region, witness, radius or certificate, and a power of two scales exactly unless an entry underflows below
# 2^-1022 (a layer spanning more than 2^1500); inside the range no copy is made.
NORMAL_MIN = 2.0**-1022  # smallest normal float64: below it a scaled entry loses bits


@dataclass
class Prepared:
    """A validated layer and box: ``W0``, ``b0`` as given (validated), ``W`` (float64, or float32 as given) and
    ``b`` as checked (scaled, masked rows left out), the box; ``keep``: the rows left after masked categories were
    set aside (None: all); ``lossy``: whether the scaling turned a nonzero entry subnormal or zero (the verdicts
    are then re-verified on the layer as given)."""

    W0: np.ndarray
    b0: np.ndarray | None
    box: tuple[np.ndarray, np.ndarray]
    W: np.ndarray | None = None
    b: np.ndarray | None = None
    keep: np.ndarray | None = None
    lossy: bool = False


def masked_rows(W: np.ndarray, b: np.ndarray, box, eps: float) -> np.ndarray:
    """Masked categories: a bias of -inf, or one so far below the largest b_j that category i loses to j by more
    than eps ||w_t - w_i|| everywhere in the box, for any t: b_j - b_i > |w_j|.r + |w_i|.r + eps (d max|W| +
    |w_i|_1) with r = max(|lo|, |hi|), all rounding bounded. Such a category never wins (category j's row alone is
    its certificate), and its row holds at every witness of another by more than eps, so it is left out of the
    others' systems (their verdicts are those of the layer without it). O(n) unless some bias is that far below."""
    out = b == -np.inf
    j = int(np.argmax(b))
    r = np.maximum(np.abs(box[0]), np.abs(box[1]))
    d = W.shape[1]
    with np.errstate(over="ignore", invalid="ignore"):
        sj = float(np.abs(W[j].astype(np.float64)) @ r)
        cand = np.flatnonzero(~out & (b < b[j] - sj))  # necessary: the bias alone is that far below
        if cand.size:
            wabs = np.abs(W[cand].astype(np.float64))
            wmax = max(float(W.max()), -float(W.min()))
            need = (sj + wabs @ r + eps * (d * wmax + wabs.sum(axis=1))) * (1 + 4 * gamma(d + 8)) + (
                d + 2) * 2.0**-1074 * (r.sum() + 1)
            out[cand] = (b[j] - b[cand]) * (1 - 2.0**-53) > need
    return out


def exact_shift(b: np.ndarray) -> np.ndarray | None:
    """``b - c`` for the midpoint c of b's range where every difference ``b_i - c`` is exact in float64 (Knuth's
    two-sum: its error term is 0), else None. Softmax is unchanged by a shift of every bias: each category's
    system keeps its offsets ``b_i - b_t`` exactly, so its regions, witnesses, radii and certificates stay."""
    c = float(b.min()) / 2 + float(b.max()) / 2  # no overflow near the largest float
    s = b - c
    back = s - b
    err = (b - (s - back)) + (-c - back)
    return s if not np.any(err) else None


def prepare(W, b, settings: Settings, keep_float32=False, masks=False) -> Prepared:
    """Validated W, b and box, masked categories set aside (with ``masks``, categories: there a bias beyond
    :data:`~argmaxable.core.fastpath.NARROW_RANGE` is shifted where :func:`exact_shift` can), the layer scaled
    into the safe range; or a one-line ValueError."""
    W = as_matrix(W, keep_float32=keep_float32)
    b = _as_bias(b, W.shape[0], masks=masks)
    out = Prepared(W, b, make_box(W.shape[1], settings.bound, settings.lower, settings.upper))
    if masks and b is not None and b.min() < b.max():
        masked = masked_rows(W, b, out.box, settings.eps)
        if masked.any():
            out.keep = np.flatnonzero(~masked)
            W, b = W[out.keep], b[out.keep]
    if masks and b is not None and float(np.abs(b).max()) > NARROW_RANGE:
        shifted = exact_shift(b)
        b = b if shifted is None else shifted
    top = max(float(W.max()), -float(W.min()), 0.0 if b is None else float(np.abs(b).max()))  # no n×d temporary
    s = range_scale(top)
    if s != 1.0:
        if W.dtype == np.float32 and s < 1:  # scaled in float64: float32 entries would turn subnormal or zero
            W = W.astype(np.float64)
        if s < 1:
            small = min(float(np.abs(a[a != 0]).min(initial=np.inf)) for a in (W, b) if a is not None)
            out.lossy = small * s < NORMAL_MIN
        W, b = W * s, None if b is None else b * s
    out.W, out.b = W, b
    return out


def finished(ledger: Ledger, prep: Prepared, items=None) -> CheckResult:
    """The result; for a layer that lost entries to its scaling (it spans more than 2^1500), every verdict is first
    re-checked by the independent verifier on the layer as given, and one whose evidence fails there is withdrawn
    (undecided)."""
    res = ledger.result()
    if not prep.lossy:
        return res
    from argmaxable.verify import verify_certificate

    box = {k: res.settings[k] for k in ("bound", "lower", "upper", "eps")}  # the settings this check ran with
    ledger.withdraw(~verify_certificate(res, prep.W0, prep.b0, items=items, **box),
                    "the layer's entries span more than one scale can hold (some underflow once it is scaled into "
                    "range): the evidence found does not hold on the layer as given")
    return ledger.result()
