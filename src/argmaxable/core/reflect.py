"""The approximate stage: braid reflection (002 §3.4.1, Fig. 5), batched over many targets.

For each target, start at a natural point and, while some constraint is violated, reflect the point across
the hyperplane of the worst one. One step for a batch of targets is one matrix product (batch × d) @ (d × n),
so the whole vocabulary of a GPT-2-sized layer costs a few W·Wᵀ-sized passes in float32. The stage is
one-sided: it proves "argmaxable" with a witness inside the box, never the opposite; every acceptance is
rigorous (the products' rounding is bounded, and the rows a borderline point may lose to are measured again
in float64: :meth:`~argmaxable.core.systems.CategorySystem.evaluate`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from argmaxable.core.box import inside, shrink_factors
from argmaxable.core.systems import GramStart, System


@dataclass
class ReflectOutcome:
    """Per-target result of the approximate stage."""

    proven: np.ndarray  # (T,) bool: witness found in the box with margin > eps
    steps: np.ndarray  # (T,) int: argmax evaluations until proven (1 = the start point already wins), -1 if not
    x: np.ndarray  # (T, d) float64: the witness if proven, else the iterate of best margin (seeds the exact LP)
    rows: dict = field(default_factory=dict)  # position -> rows that beat an unproven item in its last steps


# The rows an item reflected across in its last SEED_STEPS steps seed its LP's first working set. Measured on
# PP-OCRv4 (benchmarks/RESULTS.md): the last 128 steps' rows instead of the 64-step stall window's take its LPs
# from 3.8 to 3.0 rounds and the head from 3.7-3.9 s to 3.1-3.2 s (96: 3.5 s; 192 and 512: 3.2-3.3 s); neutral
# on the heads whose d is small.
SEED_STEPS = 128


def stall_window(n: int, d: int) -> int:
    """Reflections without progress after which an item leaves for the exact stages: 12000 d / n, within [16, 64].

    Unargmaxable items stop improving long before the patience (2500) runs out; the PP-OCRv4 head's 202
    unargmaxable characters stop after 160-220 steps (median, 90th percentile) and would reflect in vain to the
    cap, which stays the cap. Leaving early costs an LP for each argmaxable item that would have won later. A
    reflection step costs about n d per item and an LP about d^2 (some 3d simplex pivots over rows of length d)
    plus a few passes over the n rows, so the window that balances the two grows like d / n. Measured
    (benchmarks/RESULTS.md), best windows: 16 for the hard head 32000 x 32 (10.2 s against 13.4 s with 64) and
    the debtags LM's 4000 x 4 and 4000 x 8 heads, 16-64 even for 50257 x 64, 48-64 for the LM's 4000 x 16 head
    and 64 for PP-OCRv4 (6625 x 120).
    """
    return int(np.clip(12000 * d / n, 16, 64))


def batch_size(n: int, budget_bytes: int = 1 << 28) -> int:
    """Targets per batch so one (batch × n) float32 block of logits stays within ``budget_bytes``."""
    return max(1, min(4096, budget_bytes // (4 * max(n, 1))))


def reflect(system: System, items: np.ndarray, *, patience: int, box: tuple[np.ndarray, np.ndarray], eps: float,
            progress=None, out: np.ndarray | None = None, stall: int | None = None) -> ReflectOutcome:
    """Run braid reflection for ``items`` of ``system`` for at most ``patience`` reflections each.

    Parameters
    ----------
    system : System
        Adapter giving start points, batched residuals and reflection rows (see :mod:`systems`).
    items : ndarray of int
        Which items of the system to try.
    patience : int
        Reflections before giving up on an item (002 §4: 2500).
    box : (ndarray, ndarray)
        Per-coordinate ends ``(lo, hi)`` of the box (:func:`argmaxable.core.box.make_box`): witnesses lie in it.
    eps : float
        Required margin.
    progress : callable, optional
        Called with the number of items finished after each batch.
    out : ndarray, shape (len(items), d), optional
        Float64 array to hold the iterates (returned as ``x``), saving an n×d allocation for a whole vocabulary.
    stall : int, optional
        Give up on an item once its best certified margin has not improved for this many reflections (default:
        :func:`stall_window` of the system's n rows and width d).
    """
    T = len(items)
    stall = stall_window(system.n_rows, system.d) if stall is None else stall
    progress = progress or (lambda k: None)
    proven = np.zeros(T, dtype=bool)
    steps = np.full(T, -1, dtype=np.int64)
    X = np.empty((T, system.d)) if out is None else out
    todo = np.arange(T)
    if system.n_rows == T and np.array_equal(items, todo) and isinstance(system, GramStart):
        # Every category at once: the first step from the Gram matrix's upper triangle (half the work).
        X[:] = system.start(slice(None))  # all start points (a view: no temporary); rows not won are redone below
        scale, rounding = np.ones(T), np.zeros(T)
        if system.homogeneous:  # a cone: scaling into the box divides every distance by the same factor
            scale = shrink_factors(X, *box)
            moved = np.flatnonzero(np.isfinite(scale) & (scale > 1))  # usually none: no n×d temporary
            X[moved] /= scale[moved, None]
            # The stored point is w_t / s rounded: within sqrt(d) u max|x_j| of it, and distances are 1-Lipschitz.
            rounding[moved] = np.sqrt(system.d) * np.finfo(X.dtype).eps * np.abs(X[moved]).max(axis=1)
        with np.errstate(invalid="ignore"):
            won = (system.start_margins(eps) / scale - rounding > eps) & inside(X, *box)
        proven[won], steps[won] = True, 1
        progress(int(won.sum()))
        todo = np.flatnonzero(~won)
    step = batch_size(system.n_rows)
    rows = {}
    for lo in range(0, len(todo), step):
        sl = todo[lo : lo + step]
        proven[sl], steps[sl], X[sl], seen = _reflect_batch(system, items[sl], patience, box, eps, stall)
        rows.update((int(sl[k]), r) for k, r in seen.items())
        progress(len(sl))
    return ReflectOutcome(proven, steps, X, rows)


def _reflect_batch(system: System, items: np.ndarray, patience: int, box, eps: float, stall: int):
    B = len(items)
    X = system.start(items).astype(system.dtype)  # (B, d)
    proven = np.zeros(B, dtype=bool)
    steps = np.full(B, -1, dtype=np.int64)
    best = np.full(B, -np.inf)  # best certified margin so far
    best_x = np.full((B, system.d), np.nan)  # (B, d) float64: the iterate that reached it
    since = np.zeros(B, dtype=np.int64)  # reflections since the best margin last improved
    recent = np.full((B, SEED_STEPS), -1, dtype=np.int64)  # ring buffer of the rows reflected across
    seen = {}
    active = np.arange(B)
    for it in range(patience + 1):
        if active.size == 0:
            break
        if system.homogeneous:  # no offsets: the region is a cone, scaling into the box changes nothing
            scale = shrink_factors(X[active], *box)
            fits = active[np.isfinite(scale)]
            X[fits] /= scale[np.isfinite(scale), None].astype(X.dtype)
        worst, margin = system.evaluate(items[active], X[active], eps)  # one (b × d) @ (d × n) product
        wins = margin > eps  # certified: the rounding of the product is accounted for
        done = active[wins & inside(X[active].astype(np.float64), *box)]
        proven[done] = True
        steps[done] = it + 1
        better = margin > best[active]
        best[active[better]] = margin[better]
        best_x[active[better]] = X[active[better]]
        since[active] = np.where(better, 0, since[active] + 1)
        recent[active, it % recent.shape[1]] = worst
        # A winning point outside the box goes to the exact LP, as in 002 §4; so does an item that has stalled.
        leave = wins | (since[active] >= stall)
        for k in active[leave & ~wins]:
            seen[int(k)] = np.unique(recent[k][recent[k] >= 0])
        active, worst = active[~leave], worst[~leave]
        if active.size == 0 or it == patience:
            break
        a, c = system.rows(items[active], worst)  # (b, d), (b,)
        sq = np.einsum("bd,bd->b", a, a)
        movable = sq > 0  # a zero row (duplicate) cannot be reflected across: leave it to the LP
        val = np.einsum("bd,bd->b", a, X[active]) + c
        coef = np.where(movable, 2.0 * val / np.where(movable, sq, 1.0), 0.0)
        X[active] -= coef[:, None] * a
        for k in active[~movable]:
            seen[int(k)] = np.unique(recent[k][recent[k] >= 0])
        active = active[movable]
    for k in active:  # the patience ran out
        seen[int(k)] = np.unique(recent[k][recent[k] >= 0])
    X = X.astype(np.float64)
    tried = ~proven & np.isfinite(best_x[:, 0])
    X[tried] = best_x[tried]  # the exact LP starts from the best iterate, not the last
    return proven, steps, X, seen
