"""Softmax categories: which rows of W can win the argmax of W x + b for some x in the box (002 Fig. 4's combined
algorithm)? The system of category t: (w_i - w_t) . x + (b_i - b_t) < 0 for every i != t."""

from __future__ import annotations

import numpy as np

from argmaxable.core.backend import resolve_device
from argmaxable.core.chebyshev import WarmStart
from argmaxable.core.check import Prepared, as_matrix, finished, prepare, run_stages
from argmaxable.core.ledger import Ledger
from argmaxable.core.questions import Question
from argmaxable.core.result import CheckResult
from argmaxable.core.settings import BOUND, EPS, PATIENCE, SOLVER, WORKERS, Settings
from argmaxable.core.systems import CategorySystem


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
    """``starts`` checked as ``W`` is (:func:`as_matrix`: real, finite, float64; none at all for no items), one
    point of dimension ``d`` per item, or a one-line error."""
    X = as_matrix(starts, "starts") if np.size(starts) else np.zeros((0, d))
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
                     starts=None, lp_rounds: int | None = None) -> CheckResult:
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
    lp_rounds : int, optional
        The most constraint-generation rounds of each exact LP (default: no limit). An LP stopped there keeps the
        certified bounds it reached: its verdict where they decide it (else "undecided"); with ``exact_radius``
        the radius lies between ``radius`` and ``radius_upper`` (``radius_exact`` False, the message says so).

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
    settings = Settings(bound, lower, upper, eps, patience, solver, workers, progress, exact_radius, device, regions,
                        lp_rounds)
    prep = prepare(W, b, settings, keep_float32=True, masks=True)
    items, live, run = _category_positions(items, prep)
    if starts is not None:
        starts = {j: WarmStart(x) for j, x in enumerate(_start_points(starts, len(items), prep.W0.shape[1])[live])}
    system = CategorySystem(prep.W, prep.b, resolve_device(settings.device))
    ledger = run_stages(system, run, settings, prep.box, kind="categories", map_rows=system.row_index, starts=starts)
    ledger = _with_masked(ledger, items, live, prep)
    _name_duplicates(ledger, prep.b0 is not None and bool(np.any(prep.b0 != 0)))
    return finished(ledger, prep)


QUESTION = Question(kind="categories", check=check_categories, bound=BOUND, evidence="categories")
