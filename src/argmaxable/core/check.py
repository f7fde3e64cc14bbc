"""Public checks: softmax categories and sigmoid label assignments (002 Fig. 4's combined algorithm).

Both run the same stages over a :mod:`systems` adapter. Label assignments first go through the dual stage
(:mod:`gordan`: batched Gordan certificates prove items unargmaxable); then batched braid reflection proves items
argmaxable; the Chebyshev LP (:func:`chebyshev`) decides the rest, several at once on a thread pool.
Results do not depend on the number of workers: each item is solved on its own, deterministically.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
from threadpoolctl import threadpool_limits

from argmaxable.core.box import make_box
from argmaxable.core.chebyshev import FEASIBLE, INFEASIBLE, chebyshev
from argmaxable.core.numerics import unit_scale
from argmaxable.core.reflect import reflect
from argmaxable.core.result import ARGMAXABLE, UNARGMAXABLE, UNDECIDED, CheckResult
from argmaxable.core.solvers import SOLVERS
from argmaxable.core.systems import AssignmentSystem, CategorySystem, resolve_device

_VERDICT = {FEASIBLE: ARGMAXABLE, INFEASIBLE: UNARGMAXABLE}

# Items per wave of LPs between two tries of the shared certificates (:mod:`supports`): small, so that each
# certificate spares as many LPs as it can, and several, so that the workers run in parallel.
WAVE = 8

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
        W = W.numpy() if keep_float32 and str(W.dtype) == "torch.float32" else W.double().numpy()
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


def _as_bias(b, n: int) -> np.ndarray | None:
    if b is None:
        return None
    if hasattr(b, "detach"):
        if b.is_complex():
            raise ValueError(f"The 'b' parameter must be real. Got a complex tensor ({b.dtype}).")
        b = b.detach().cpu().double().numpy()
    b = _real_array(b, "b")
    if b.shape != (n,):
        raise ValueError(f"The 'b' parameter must have shape ({n},) to match W. Got shape {b.shape}.")
    if not np.isfinite(b).all():
        raise ValueError(f"The 'b' parameter must be finite. Got {b[~np.isfinite(b)][0]} at index "
                         f"{int(np.flatnonzero(~np.isfinite(b))[0])}.")
    return b


def _show(value) -> str:
    """repr of a setting without numpy's type wrapper (np.float64(1.0) -> 1.0)."""
    return repr(value.item() if isinstance(value, np.generic) else value)


def _is_real(value) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def _check_settings(bound, eps, patience, solver, workers) -> None:
    for name, value in (("bound", bound), ("eps", eps), ("patience", patience), ("workers", workers)):
        if not _is_real(value):
            raise ValueError(f"The {name!r} parameter must be a number. Got {_show(value)} ({type(value).__name__}).")
    if not (np.isfinite(bound) and bound > 0):
        raise ValueError(f"The 'bound' parameter must be a positive number. Got {_show(bound)} instead.")
    if not (np.isfinite(eps) and eps >= 0):
        raise ValueError(f"The 'eps' parameter must be a non-negative number. Got {_show(eps)} instead.")
    if int(patience) != patience or patience < 0:
        raise ValueError(f"The 'patience' parameter must be a non-negative integer. Got {_show(patience)} instead.")
    if solver not in SOLVERS:
        raise ValueError(f"The 'solver' parameter must be one of {SOLVERS}. Got {_show(solver)} instead.")
    if int(workers) != workers or workers < 1:
        raise ValueError(f"The 'workers' parameter must be a positive integer. Got {_show(workers)} instead.")


def _progress(total: int, desc: str, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="item", disable=not enabled, leave=False)


def _run(system, items, *, bound, box, eps, patience, solver, workers, progress, kind, radius_threshold,
         exact_lp, map_rows=None) -> CheckResult:
    k = len(items)
    status = np.full(k, ARGMAXABLE, dtype=object)
    radius = np.full(k, np.nan)  # certified lower bound where one was measured
    lower = np.full(k, np.nan)  # certified lower / upper bounds on the radius (NaN: none)
    upper = np.full(k, np.nan)
    radius_exact = np.zeros(k, dtype=bool)
    steps = np.full(k, -1, dtype=np.int64)
    lp_rounds = np.zeros(k, dtype=np.int64)
    message = np.full(k, "", dtype=object)
    certificates = [(np.zeros(0, dtype=np.int64), np.zeros(0))] * k

    # Approximate dual stage (systems that have one): batched Gordan certificates prove items unargmaxable.
    rest = np.arange(k)
    if system.has_dual_stage and not exact_lp:  # its certificates bound the radius, they do not compute it
        with _progress(k, f"{kind}: dual", progress) as bar:
            dual = system.gordan(items, box=box, eps=eps, progress=bar.update)
        for pos, weights in dual.weights.items():
            status[pos], upper[pos] = UNARGMAXABLE, dual.upper[pos]
            certificates[pos] = (dual.rows, weights)
            message[pos] = f"Gordan certificate over {len(dual.rows)} rows (dual stage)"
        rest = np.flatnonzero(~dual.proven)

    # Approximate primal stage: batched braid reflection proves items argmaxable. With every item here (a whole
    # vocabulary) it writes its iterates straight into the witness array: no n×d temporaries of 300 MB each.
    whole = len(rest) == k
    # A float32 layer checked in float32 keeps float32 witnesses: its start points w_t and reflected iterates are
    # float32 values, certified as stored (a layer of 2 GB needs no 4 GB float64 witness array).
    wdtype = np.float32 if system.dtype == np.float32 and system.Win.dtype == np.float32 else np.float64
    witness = np.empty((k, system.d), wdtype) if whole else np.full((k, system.d), np.nan, wdtype)
    with _progress(len(rest), f"{kind}: reflect", progress) as bar:
        approx = reflect(system, items[rest], patience=patience, box=box, eps=eps, progress=bar.update,
                         out=witness if whole else None)
    steps[rest] = approx.steps
    if not whole:
        witness[rest] = approx.x

    # Items the approximate stages did not settle go to the LP; so do proven items whose radius must be compared
    # with a threshold their witness margin does not already exceed (assignments: 1-argmaxable), and, with
    # exact_lp, every proven item (its radius is computed, not bounded).
    proven = rest[approx.proven]
    todo = rest[~approx.proven]
    lower[proven] = eps  # each witness's certified margin exceeds eps (its value is measured below if needed)
    if radius_threshold is not None:
        _, m = system.evaluate(items[proven], witness[proven], eps)
        lower[proven] = radius[proven] = m  # certified margins of the witnesses
        if not exact_lp:
            todo = np.sort(np.concatenate([todo, proven[m <= radius_threshold]]))
    if exact_lp:
        todo = rest
    thresholds = [eps] if radius_threshold is None else [eps, radius_threshold]
    x0 = {int(pos): witness[pos].copy() for pos in todo}  # the LP starts from reflection's best iterate
    # ... with the rows reflection saw beat it in its last steps in the first working set.
    seeds = {int(rest[k]): system.dense_rows(int(items[rest[k]]), r) for k, r in approx.rows.items()}
    witness[rest[~approx.proven]] = np.nan

    if witness.dtype != np.float64 and len(todo):
        witness = witness.astype(np.float64)  # LP witnesses are float64 points: rounding them could lose the margin

    def solve(pos: int):
        A, c = system.dense(int(items[pos]))
        return chebyshev(A, c, bound=bound, lower=box[0], upper=box[1], eps=eps, solver=solver, x0=x0[int(pos)],
                         thresholds=thresholds, exact=exact_lp, seed_rows=seeds.get(int(pos)))

    def record(pos: int, out) -> None:
        has_witness = bool(np.isfinite(witness[pos]).all())
        lower[pos] = np.fmax(lower[pos], out.lower)  # every bound is certified: keep the best of each
        upper[pos] = np.fmin(upper[pos], out.upper)
        if np.isfinite(out.lower) and (np.isnan(radius[pos]) or out.lower > radius[pos]):
            radius[pos] = out.lower
        elif out.upper == -np.inf:  # a duplicate row: no point at all, radius -inf
            radius[pos] = -np.inf
        radius_exact[pos] = out.converged
        lp_rounds[pos] = out.rounds
        message[pos] = out.message
        if has_witness and out.upper <= eps:
            status[pos] = UNDECIDED  # a proven witness and a dual bound that rule each other out
            message[pos] = (f"stages disagree: a witness with margin > {eps:g} and an LP dual bound "
                            f"{out.upper:.3g} <= eps (numerical trouble)")
        elif out.status == FEASIBLE:
            witness[pos] = out.x
        elif has_witness:  # reflection's witness proved it; the LP only failed to size its radius
            message[pos] = f"argmaxable by its witness; the LP did not size the radius: {out.message}"
        else:
            status[pos] = _VERDICT.get(out.status, UNDECIDED)
            if out.status == INFEASIBLE:
                rows = out.dual_rows if map_rows is None else map_rows(int(items[pos]), out.dual_rows)
                certificates[pos] = (np.asarray(rows, dtype=np.int64), out.dual_weights)
                if shared is not None:
                    shared.add(np.asarray(rows)[out.dual_weights > 0])

    # Systems whose certificates carry over between items (categories: :mod:`supports`) solve their LPs in
    # waves of a fixed size; after each wave the new certificates' supports are tried on every item still
    # waiting, which needs no LP then. The fixed wave keeps results independent of the number of workers.
    shared = system.certificate_pool(box, eps) if system.has_shared_certificates and not exact_lp else None
    waves = [todo] if shared is None else [todo[:WAVE]]
    pending = todo[len(waves[0]):]
    # One BLAS thread per LP: the LPs run in parallel, and nested BLAS threads oversubscribe the cores
    # (measured: a 50257x16 mat-vec went from 0.3 ms to 16 ms on a busy 2-core machine).
    with (
        _progress(len(todo), f"{kind}: exact LP", progress) as bar,
        threadpool_limits(limits=1, user_api="blas"),
        ThreadPoolExecutor(workers) as pool,
    ):
        while waves:
            wave = waves.pop()
            tried = 0 if shared is None else len(shared.supports)
            for pos, out in zip(wave, pool.map(solve, wave), strict=True):
                bar.update(1)
                record(int(pos), out)
            if shared is None or pending.size == 0:
                continue
            for j, (rows, weights, bound_here) in shared.prove(items[pending], start=tried).items():
                pos = int(pending[j])
                status[pos], upper[pos], certificates[pos] = UNARGMAXABLE, bound_here, (rows, weights)
                message[pos] = f"certificate over the {len(rows)} rows of another category's (dual stage)"
                bar.update(1)
            pending = pending[status[pending] != UNARGMAXABLE]
            waves.append(pending[:WAVE])
            pending = pending[WAVE:]
    answers = {name: _answers(status, lower, upper, thr, eps)
               for name, thr in zip(("eps", "1"), thresholds, strict=False)}
    with np.errstate(invalid="ignore"):
        upper_shown = np.where(np.isfinite(upper) | (upper == -np.inf), upper, np.nan)
    return CheckResult(kind, np.asarray(items), status.astype(str), radius, radius_exact, steps,
                       lp_rounds, witness, message.astype(str), certificates,
                       {"bound": float(bound), "lower": box[0].tolist(), "upper": box[1].tolist(), "eps": float(eps),
                        "patience": int(patience), "solver": solver, "exact_radius": bool(exact_lp),
                        **numeric_settings(system, whole)},
                       radius_upper=upper_shown, answers=answers)


def numeric_settings(system, whole: bool) -> dict:
    """What the result's float arithmetic was: the approximate stage's number format, the BLAS that ran, and the
    tolerances (recorded in the result's settings and so in every sidecar)."""
    from threadpoolctl import threadpool_info

    from argmaxable.core.chebyshev import VIOLATION_TOLERANCE
    from argmaxable.core.gordan import FLOOR
    from argmaxable.core.solvers import FEASIBILITY_TOLERANCE

    if system.dtype == np.float32:
        bf16 = whole and system.has_gram_start and system.bf16_start  # the first step of a whole vocabulary
        path = "bfloat16 products (float32 accumulation), float32, float64" if bf16 else "float32, float64"
    else:
        path = "float64"
    blas = next((f"{i['internal_api']} {i['version']} ({i.get('architecture')} kernel)"
                 for i in threadpool_info() if i["user_api"] == "blas"), "unknown")
    return {"numeric_path": path, "blas": blas,
            "tolerances": {"lp_feasibility": FEASIBILITY_TOLERANCE, "lp_violation": VIOLATION_TOLERANCE,
                           "gordan_floor": FLOOR, "float64_rounding": "gamma_k bounds on every acceptance"}}


def _answers(status, lower, upper, threshold, eps) -> np.ndarray:
    """"yes" / "no" / "undecided" for radius > threshold, from the certified bounds (and, at eps, the status)."""
    out = np.full(len(status), "undecided", dtype=object)
    with np.errstate(invalid="ignore"):
        out[lower > threshold] = "yes"
        out[upper <= threshold] = "no"
    if threshold == eps:  # the verdict itself answers eps: it is never contradicted by a bound (see above)
        out[status == ARGMAXABLE], out[status == UNARGMAXABLE] = "yes", "no"
        out[status == UNDECIDED] = "undecided"
    else:
        out[status == UNDECIDED] = "undecided"
        out[(status == UNARGMAXABLE) & (threshold >= eps)] = "no"
    return out.astype(str)


# A layer whose largest entry lies outside [2^-500, 2^500] is scaled by a power of two first: squares of its
# entries would overflow or underflow. Scaling every row and offset by one positive number changes no region,
# witness, radius or certificate, and a power of two scales exactly; inside the range no copy is made.
SAFE_RANGE = (2.0**-500, 2.0**500)


def _prepare(W, b, bound, lower, upper, eps, patience, solver, workers, keep_float32=False):
    """Validated float64 W (float32 kept with ``keep_float32``), b (scaled into the safe range) and the box, or a
    one-line ValueError."""
    W = _as_matrix(W, keep_float32=keep_float32)
    b = _as_bias(b, W.shape[0])
    _check_settings(bound, eps, patience, solver, workers)
    box = make_box(W.shape[1], bound, lower, upper)
    top = max(float(W.max()), -float(W.min()), 0.0 if b is None else float(np.abs(b).max()))  # no n×d temporary
    if top > 0 and not SAFE_RANGE[0] <= top <= SAFE_RANGE[1]:
        s = unit_scale(W, b)
        W, b = W * s, None if b is None else b * s
    return W, b, box


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


def check_categories(W, items=None, b=None, *, bound: float = 100.0, lower=None, upper=None, eps: float = 1e-8,
                     patience: int = 2500, solver: str = "highs", workers: int = 2, progress: bool = False,
                     exact_radius: bool = False, device: str | None = "auto") -> CheckResult:
    """Which categories of softmax(W x + b) can be the argmax for some x in the box?

    Parameters
    ----------
    W : array_like or torch.Tensor, shape (n, d)
        Output-layer weights, one row per category.
    items : array_like of int, optional
        Categories to check (default: all; every row still constrains).
    b : array_like, shape (n,), optional
        Output-layer bias.
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
    W, b, box = _prepare(W, b, bound, lower, upper, eps, patience, solver, workers, keep_float32=True)
    n = W.shape[0]
    items = np.arange(n) if items is None else _as_indices(items, n)
    system = CategorySystem(W, b, resolve_device(device))
    res = _run(system, items, bound=bound, box=box, eps=eps, patience=patience, solver=solver, workers=workers,
               progress=progress, kind="categories", radius_threshold=None, exact_lp=exact_radius,
               map_rows=system.row_index)
    message = res.message.astype(object)  # a fixed-width str array would truncate the longer text
    for pos in np.flatnonzero(res.radius == -np.inf):  # a zero row in the LP: an identical category
        dup = int(res.certificates[pos][0][0])
        message[pos] = (f"duplicate of category {dup} with a bias at least as high: category "
                        f"{int(res.items[pos])} cannot win strictly")
    res.message = message.astype(str)
    return res


def _as_signs(Y, n: int) -> np.ndarray:
    """Label assignments as an (m, n) int8 matrix of +1 (active) / -1 (inactive).

    Two forms, never guessed between: a 2-D array (numpy or torch) of booleans or 0/1 values, one column per
    label; or a sequence of label-index lists (each an iterable of distinct ints). Anything else is refused.
    """
    if hasattr(Y, "detach"):
        Y = Y.detach().cpu().numpy()
    if isinstance(Y, np.ndarray):
        if Y.ndim != 2:
            raise ValueError(f"The 'items' parameter as an array must be 2-D (m, {n}), one 0/1 column per label. "
                             f"Got shape {Y.shape}.")
        if Y.shape[1] != n:
            raise ValueError(f"The 'items' parameter must have {n} columns (one per row of W). Got shape {Y.shape}.")
        if Y.dtype != bool and not (np.issubdtype(Y.dtype, np.number) and np.isin(Y, (0, 1)).all()):
            raise ValueError("The 'items' parameter as a matrix must hold booleans or 0/1 values.")
        return np.where(Y.astype(bool), 1, -1).astype(np.int8)
    if isinstance(Y, (str, bytes)) or not hasattr(Y, "__len__"):
        raise ValueError("The 'items' parameter must be a 2-D 0/1 array or a list of label-index lists. "
                         f"Got {type(Y).__name__}.")
    signs = np.full((len(Y), n), -1, dtype=np.int8)
    for r, active in enumerate(Y):
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
                             f"Got {_show(bad)}.")
        idx = np.asarray(values, dtype=np.int64)
        bad = idx[(idx < 0) | (idx >= n)]
        if bad.size:
            raise ValueError(f"The 'items' parameter's assignment {r} has label indices outside [0, {n}): "
                             f"{bad[:5].tolist()}.")
        if len(np.unique(idx)) != len(idx):
            raise ValueError(f"The 'items' parameter's assignment {r} repeats a label index ({idx.tolist()[:8]}): "
                             "for a 0/1 row, pass the assignments as a 2-D array.")
        signs[r, idx] = 1
    return signs


def check_assignments(W, items, b=None, *, bound: float = 1e4, lower=None, upper=None, eps: float = 1e-8,
                      patience: int = 100, solver: str = "highs", workers: int = 2, progress: bool = False,
                      exact_radius: bool = False) -> CheckResult:
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
    W, b, box = _prepare(W, b, bound, lower, upper, eps, patience, solver, workers)
    signs = _as_signs(items, W.shape[0])
    system = AssignmentSystem(W, b, signs)
    return _run(system, np.arange(len(signs)), bound=bound, box=box, eps=eps, patience=patience, solver=solver,
                workers=workers, progress=progress, kind="assignments", radius_threshold=1.0,
                exact_lp=exact_radius)


def check_top_m(W, items, b=None, *, bound: float = 100.0, lower=None, upper=None, eps: float = 1e-8,
                patience: int = 100, solver: str = "highs", workers: int = 2, progress: bool = False,
                exact_radius: bool = False) -> CheckResult:
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
    W, b, (lo, hi) = _prepare(W, b, bound, lower, upper, eps, patience, solver, workers)  # scaled as there
    augmented = np.hstack([W, -np.ones((W.shape[0], 1))])
    res = check_assignments(augmented, items, b, bound=bound, lower=np.append(lo, -bound), upper=np.append(hi, bound),
                            eps=eps, patience=patience, solver=solver, workers=workers, progress=progress,
                            exact_radius=exact_radius)
    res.kind = "top-m sets"
    res.settings.update(lower=lo.tolist(), upper=hi.tolist())  # the box of x; tau's is [-bound, bound]
    return res
