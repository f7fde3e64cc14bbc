"""Public checks: softmax categories, sigmoid label assignments and top-m sets (002 Fig. 4's combined algorithm).

Each check validates its input where it enters (the layer here, the settings in :mod:`settings`), builds the
question's :mod:`systems` adapter, and runs the adapter's stages (:mod:`stages`) over a :mod:`ledger`, from which
the result is built once.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from argmaxable.core.backend import resolve_device
from argmaxable.core.box import make_box
from argmaxable.core.chebyshev import WarmStart
from argmaxable.core.ledger import Ledger
from argmaxable.core.numerics import gamma, range_scale
from argmaxable.core.result import CheckResult
from argmaxable.core.settings import (
    ASSIGNMENT_BOUND,
    BOUND,
    EPS,
    PATIENCE,
    SET_PATIENCE,
    SOLVER,
    WORKERS,
    Settings,
    show,
)
from argmaxable.core.stages import stages_for
from argmaxable.core.systems import AssignmentSystem, CategorySystem


def _real_array(a, name: str, keep_float32: bool = False) -> np.ndarray:
    """float64 array of real numbers (ints, floats, bools are not silently cast from complex/objects/strings);
    with ``keep_float32`` a float32 array stays as given (every float32 is a float64)."""
    arr = np.asarray(a)
    if arr.dtype.kind not in "iuf":
        kind = {"c": "complex", "b": "boolean", "U": "string", "S": "bytes", "O": "object"}.get(arr.dtype.kind,
                                                                                            str(arr.dtype))
        raise ValueError(f"The {name!r} parameter must hold real numbers. Got {kind} values (dtype {arr.dtype}).")
    return arr if keep_float32 and arr.dtype == np.float32 else arr.astype(np.float64, copy=False)


def _as_matrix(W, name: str = "W", keep_float32: bool = False) -> np.ndarray:
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


def _run(system, items: np.ndarray, settings: Settings, box, *, kind: str, threshold: float | None = None,
         map_rows=None, shown_box=None, starts: np.ndarray | None = None) -> Ledger:
    """Check ``items`` of ``system``: each of its stages in turn, on the items the previous ones left open.
    ``threshold``: a second radius to answer about (label sets: 1); ``shown_box``: the box the result records
    (default: ``box``); ``starts``: a point per item where its exact LP starts (default: reflection's iterate)."""
    record = settings.record(box if shown_box is None else shown_box)
    ledger = Ledger(np.asarray(items), kind=kind, eps=settings.eps, threshold=threshold, settings=record)
    if starts is not None:
        ledger.start_from({k: WarmStart(x) for k, x in enumerate(starts)})
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


def _prepare(W, b, settings: Settings, keep_float32=False, masks=False) -> Prepared:
    """Validated W, b and box, masked categories set aside (with ``masks``), the layer scaled into the safe range;
    or a one-line ValueError."""
    W = _as_matrix(W, keep_float32=keep_float32)
    b = _as_bias(b, W.shape[0], masks=masks)
    out = Prepared(W, b, make_box(W.shape[1], settings.bound, settings.lower, settings.upper))
    if masks and b is not None and b.min() < b.max():
        masked = masked_rows(W, b, out.box, settings.eps)
        if masked.any():
            out.keep = np.flatnonzero(~masked)
            W, b = W[out.keep], b[out.keep]
    top = max(float(W.max()), -float(W.min()), 0.0 if b is None else float(np.abs(b).max()))  # no n×d temporary
    s = range_scale(top)
    if s != 1.0:
        if s < 1:
            small = min(float(np.abs(a[a != 0]).min(initial=np.inf)) for a in (W, b) if a is not None)
            out.lossy = small * s < NORMAL_MIN
        W, b = W * s, None if b is None else b * s
    out.W, out.b = W, b
    return out


def _finished(ledger: Ledger, prep: Prepared, items=None) -> CheckResult:
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


def _as_indices(items, n: int) -> np.ndarray:
    """Category indices as a 1-D int64 array in [0, n)."""
    if hasattr(items, "detach"):
        items = items.detach().cpu().numpy()
    arr = np.atleast_1d(np.asarray(items))
    if arr.ndim != 1 or arr.dtype == bool or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError("The 'items' parameter must be a 1-D list of integer category indices (the order is "
                         f"check_categories(W, items, b)). Got an array of dtype {arr.dtype} and shape {arr.shape}.")
    out = arr[(arr < 0) | (arr >= n)]
    if out.size:
        raise ValueError(f"The 'items' parameter must hold indices in [0, {n}). Got {out[:5].tolist()}.")
    return arr.astype(np.int64)


def _category_positions(items, prep: Prepared) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The categories to check (default: all), which of them are live (not masked), and the live ones' indices in
    the system (the layer without its masked rows)."""
    n = prep.W0.shape[0]
    items = np.arange(n) if items is None else _as_indices(items, n)
    if prep.keep is None:
        return items, np.ones(len(items), dtype=bool), items
    index = np.full(n, -1)
    index[prep.keep] = np.arange(len(prep.keep))
    live = index[items] >= 0
    return items, live, index[items[live]]


def _start_points(starts, k: int, d: int) -> np.ndarray:
    """``starts`` checked as ``W`` is (:func:`_as_matrix`: real, finite, float64; none at all for no items), one
    point of dimension ``d`` per item, or a one-line error."""
    X = _as_matrix(starts, "starts") if np.size(starts) else np.zeros((0, d))
    if X.shape != (k, d):
        raise ValueError(f"The 'starts' parameter must be {k} finite points of dimension {d}, one per item. "
                         f"Got shape {X.shape}.")
    return X


def _with_masked(ledger: Ledger, items: np.ndarray, live: np.ndarray, prep: Prepared) -> Ledger:
    """The ledger over ``items`` (category indices) from ``ledger`` over the live ones: a masked category (left
    out of every system) is unargmaxable, its certificate the row of the largest bias alone."""
    if prep.keep is None:
        return ledger
    out = ledger.spread(live, prep.keep, items)
    b, j = prep.b0, int(np.argmax(prep.b0))
    for p in np.flatnonzero(~live):
        out.refute(int(p), "masked", (np.array([j]), np.array([1.0])), np.nan,
                   f"masked: its bias {b[items[p]]:g} lies so far below category {j}'s ({b[j]:g}) that it loses to "
                   "it everywhere in the box (trivially unargmaxable; left out of the others' systems)")
    return out


def _name_duplicates(ledger: Ledger, bias: bool) -> None:
    """A category whose LP found a zero row (radius -inf) duplicates the category its certificate names (with a
    ``bias``: one at least as high)."""
    for pos in np.flatnonzero(ledger.radius == -np.inf):
        dup, item = int(ledger.certificates[pos][0][0]), int(ledger.items[pos])
        ledger.note(pos, f"duplicate of category {dup} with a bias at least as high: category {item} cannot win "
                    "strictly" if bias else f"tie: its row equals category {dup}'s, so neither wins strictly (greedy "
                    "decoding, first index on ties, emits the lower id where the merged row can win)")


def check_categories(W, items=None, b=None, *, bound: float = BOUND, lower=None, upper=None, eps: float = EPS,
                     patience: int = PATIENCE, solver: str = SOLVER, workers: int = WORKERS, progress: bool = False,
                     exact_radius: bool = False, device: str | None = "auto", regions: bool = False,
                     starts=None) -> CheckResult:
    """Which categories of softmax(W x + b) can be the argmax for some x in the box?

    Parameters
    ----------
    W : array_like or torch.Tensor, shape (n, d)
        Output-layer weights, one row per category.
    items : array_like of int, optional
        Categories to check (default: all; every row still constrains).
    b : array_like, shape (n,), optional
        Output-layer bias. -inf masks a category; a masked category (-inf, or a bias so far below the largest
        that it loses everywhere in the box, e.g. finfo.min or -1e200) is unargmaxable, says so in its message,
        and is left out of the other categories' systems.
    bound : float, default 100
        Box on the inputs, |x_j| <= 100 (002 §4).
    lower, upper : float or array_like of shape (d,), optional
        Narrow the box per coordinate to ``[max(lower_j, -bound), min(upper_j, bound)]``, e.g. the range of the
        activation feeding the head (:func:`argmaxable.core.activation_bounds`).
    eps : float, default 1e-8
        Chebyshev radius that counts as a region.
    patience : int, default 2500
        Braid-reflect steps before the exact LP (002 §4).
    solver : {"highs", "gurobi"}
    workers : int, default 2
        LPs solved at once.
    progress : bool, default False
        Show progress bars.
    exact_radius : bool, default False
        Run an LP to its optimum for every item, so that ``radius`` is the Chebyshev radius itself; by default
        items proven by their witness have no radius (NaN) and the LP stops once it decides ``radius > eps``.
    device : {"auto", "cpu", "cuda", "cuda:k"} or None, default "auto"
        Where the Gram pass and reflection's products run: "auto" takes a CUDA GPU where torch sees one and
        otherwise the CPU path (numpy's BLAS; bfloat16 torch products where the CPU has them); a device name
        runs the torch path there, in true float32/float64 (no TF32) under the same rounding bounds.
    regions : bool, default False
        Also decide, in rational arithmetic, whether the region ``{x in box : A x + c < 0}`` of each item not
        shown eps-argmaxable is non-empty (the norm-free question: a region thinner than eps), with rational
        evidence in ``result.exact``. Items the float stages leave undecided go to that exact stage always.
    starts : array_like, shape (len(items), d), optional
        A point per item where its exact LP starts, e.g. its witness from an earlier check of the whole layer
        (default: reflection's last iterate). It moves where the LP's search begins, not what it proves.

    Returns
    -------
    CheckResult
        A category whose row duplicates another's with a bias at least as high is "unargmaxable": it cannot
        win strictly.

    Examples
    --------
    >>> import numpy as np
    >>> W = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0], [0.1, 0.1]])  # c4 lies inside the triangle
    >>> check_categories(W).status.tolist()
    ['argmaxable', 'argmaxable', 'argmaxable', 'unargmaxable']
    >>> check_categories(W, lower=0.0).status.tolist()  # after a ReLU: x >= 0, where c2 = (-1, -1) cannot win
    ['argmaxable', 'argmaxable', 'unargmaxable', 'unargmaxable']
    """
    settings = Settings(bound, lower, upper, eps, patience, solver, workers, progress, exact_radius, device, regions)
    prep = _prepare(W, b, settings, keep_float32=True, masks=True)
    items, live, run = _category_positions(items, prep)
    if starts is not None:
        starts = _start_points(starts, len(items), prep.W0.shape[1])[live]
    system = CategorySystem(prep.W, prep.b, resolve_device(settings.device))
    ledger = _run(system, run, settings, prep.box, kind="categories", map_rows=system.row_index, starts=starts)
    ledger = _with_masked(ledger, items, live, prep)
    _name_duplicates(ledger, prep.b0 is not None and bool(np.any(prep.b0 != 0)))
    return _finished(ledger, prep)


def _as_signs(Y, n: int) -> np.ndarray:
    """Label assignments as an (m, n) int8 matrix of +1 (active) / -1 (inactive).

    Two forms, never guessed between: a 2-D array (numpy or torch) of booleans or 0/1 values, one column per
    label; or a sequence of label-index lists (each an iterable of distinct ints). Anything else is refused.
    """
    if hasattr(Y, "detach"):
        Y = Y.detach().cpu().numpy()
    if isinstance(Y, np.ndarray):
        return _signs_of_matrix(Y, n)
    if isinstance(Y, (str, bytes)) or not hasattr(Y, "__len__"):
        raise ValueError("The 'items' parameter must be a 2-D 0/1 array or a list of label-index lists. "
                         f"Got {type(Y).__name__}.")
    signs = np.full((len(Y), n), -1, dtype=np.int8)
    for r, active in enumerate(Y):
        signs[r, _label_indices(active, r, n)] = 1
    return signs


def _signs_of_matrix(Y: np.ndarray, n: int) -> np.ndarray:
    """:func:`_as_signs` of a 2-D array of booleans or 0/1 values, one column per label."""
    if Y.ndim != 2:
        raise ValueError(f"The 'items' parameter as an array must be 2-D (m, {n}), one 0/1 column per label. "
                         f"Got shape {Y.shape}.")
    if Y.shape[1] != n:
        raise ValueError(f"The 'items' parameter must have {n} columns (one per row of W). Got shape {Y.shape}.")
    if Y.dtype != bool and not (np.issubdtype(Y.dtype, np.number) and np.isin(Y, (0, 1)).all()):
        raise ValueError("The 'items' parameter as a matrix must hold booleans or 0/1 values.")
    return np.where(Y.astype(bool), 1, -1).astype(np.int8)


def _label_indices(active, r: int, n: int) -> np.ndarray:
    """The distinct label indices in [0, n) of assignment ``r``, given as an iterable of ints."""
    if isinstance(active, (str, bytes)) or not hasattr(active, "__iter__"):
        raise ValueError(f"The 'items' parameter's assignment {r} must be a list of label indices. "
                         f"Got {active!r}.")
    values = list(active)
    if any(isinstance(v, (bool, np.bool_)) for v in values):
        raise ValueError(f"The 'items' parameter's assignment {r} holds booleans: pass a boolean matrix as a "
                         "2-D array (np.asarray(Y, dtype=bool)) or each assignment as its label indices.")
    if not all(isinstance(v, (int, np.integer)) for v in values):
        bad = next(v for v in values if not isinstance(v, (int, np.integer)))
        raise ValueError(f"The 'items' parameter's assignment {r} must hold integer label indices. "
                         f"Got {show(bad)}.")
    bad = [int(v) for v in values if not 0 <= v < n]  # Python ints: no overflow above 2^63
    if bad:
        raise ValueError(f"The 'items' parameter's assignment {r} has label indices outside [0, {n}): "
                         f"{bad[:5]}.")
    idx = np.asarray(values, dtype=np.int64)
    if len(np.unique(idx)) != len(idx):
        raise ValueError(f"The 'items' parameter's assignment {r} repeats a label index ({idx.tolist()[:8]}): "
                         "for a 0/1 row, pass the assignments as a 2-D array.")
    return idx


def check_assignments(W, items, b=None, *, bound: float = ASSIGNMENT_BOUND, lower=None, upper=None,
                      eps: float = EPS, patience: int = SET_PATIENCE, solver: str = SOLVER, workers: int = WORKERS,
                      progress: bool = False, exact_radius: bool = False, regions: bool = False) -> CheckResult:
    """Which label assignments of sigmoid(W x + b) can be the thresholded output for some x in the box?

    Parameters
    ----------
    W : array_like or torch.Tensor, shape (n, d)
        Output-layer weights, one row per label.
    items : 2-D bool or 0/1 array (m, n), or list of lists of int
        Assignments to check: a matrix with one column per label, or the active label indices of each
        assignment. An empty assignment (no active label) is valid: every label off. A list of boolean or 0/1
        rows is refused (it would read as label indices): convert it to an array.
    b : array_like, shape (n,), optional
    bound : float, default 1e4
        Box on the inputs (thesis §4.2, appendix A.3).
    lower, upper, eps, solver, workers, progress
        As in :func:`check_categories`. "eps-argmaxable" means radius > eps; ``result.one_argmaxable()`` counts
        radius > 1.
    patience : int, default 100
        Reflection steps before the exact LP. Before reflection, the dual stage (:mod:`gordan`) proves what it
        can unargmaxable in a few batched matrix products.
    exact_radius : bool, default False
        Run every LP to its optimum so that ``radius`` is the Chebyshev radius itself (the dual stage, which
        bounds radii rather than computing them, is skipped). By default an LP stops once its certified bounds
        decide both ``radius > eps`` and ``radius > 1``, and ``radius`` is the bound that decided them
        (``radius_exact`` says which): the counts are the same, and an unargmaxable assignment of a wide layer
        no longer needs thousands of rows to pin down a radius nobody reads.
    regions : bool, default False
        As in :func:`check_categories`: the thin regions of assignments not shown eps-argmaxable, settled exactly.

    Returns
    -------
    CheckResult
        ``radius`` is set for every item.

    Examples
    --------
    >>> import numpy as np
    >>> W = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0], [0.1, 0.1]])
    >>> check_assignments(W, [[0, 3], [3], [0, 1, 3]]).status.tolist()
    ['argmaxable', 'unargmaxable', 'argmaxable']
    """
    settings = Settings(bound, lower, upper, eps, patience, solver, workers, progress, exact_radius, device=None,
                        regions=regions)
    return _check_signs(W, items, b, settings, kind="assignments")


def _check_signs(W, items, b, settings: Settings, *, kind: str, given: Prepared | None = None) -> CheckResult:
    """:func:`check_assignments` with its settings built. ``given``: the layer as the user gave it where ``W`` was
    built from it (top-m sets: ``[W, -1]``); the result records its box and is re-verified on it."""
    if settings.eps > 1.0:  # radius > eps would then be the stronger question, answered beside radius > 1
        raise ValueError(f"The 'eps' parameter must be at most 1 for label sets and top-m sets, which also answer "
                         f"radius > 1 (thesis §4.2's 1-argmaxable). Got {settings.eps!r} instead.")
    prep = _prepare(W, b, settings)
    signs = _as_signs(items, prep.W.shape[0])
    system = AssignmentSystem(prep.W, prep.b, signs)
    given = given or prep
    ledger = _run(system, np.arange(len(signs)), settings, prep.box, kind=kind, threshold=1.0, shown_box=given.box)
    return _finished(ledger, given, signs > 0)


def check_top_m(W, items, b=None, *, bound: float = BOUND, lower=None, upper=None, eps: float = EPS,
                patience: int = SET_PATIENCE, solver: str = SOLVER, workers: int = WORKERS, progress: bool = False,
                exact_radius: bool = False, regions: bool = False) -> CheckResult:
    """Can the tokens of each set be exactly the top-m of softmax(W x + b) for some x in the box?

    A set S is the top-|S| iff some threshold tau separates it: w_i.x + b_i > tau exactly for i in S. That is
    the label assignment S of the sigmoid layer [W, -1] over (x, tau) (GUIDE §1; thesis Prop. 5.3; 004 §5-6),
    so this is :func:`check_assignments` on the augmented layer; tau ranges over [-bound, bound] (for a layer
    outside the safe range, rescaled by a power of two first: tau's coefficient is then -1/s). ``items`` are
    token sets in either form of :func:`check_assignments`; the other parameters are as there.

    Examples
    --------
    >>> import numpy as np
    >>> W = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0], [0.1, 0.1]])
    >>> check_top_m(W, [[0, 1], [3]]).status.tolist()
    ['argmaxable', 'unargmaxable']
    """
    settings = Settings(bound, lower, upper, eps, patience, solver, workers, progress, exact_radius, device=None,
                        regions=regions)
    prep = _prepare(W, b, settings)  # scaled as there
    lo, hi = prep.box
    augmented = np.hstack([prep.W, -np.ones((prep.W.shape[0], 1))])
    over_tau = replace(settings, lower=np.append(lo, -bound), upper=np.append(hi, bound))
    return _check_signs(augmented, items, prep.b, over_tau, kind="top-m sets", given=prep)  # records x's box
