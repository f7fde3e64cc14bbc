"""The approximate stage: braid reflection (002 §3.4.1, Fig. 5), batched over many targets.

For each target, start at a natural point and, while some constraint is violated, reflect the point across
the hyperplane of the worst one. One step for a batch of targets is one matrix product (batch × d) @ (d × n),
so the whole vocabulary of a GPT-2-sized layer costs a few W·Wᵀ-sized passes in float32. The stage is
one-sided: it proves "argmaxable" with a witness inside the box, never the opposite; every acceptance is
rigorous (float32 rounding is bounded, or the point is re-checked in float64).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from argmaxable.core.box import inside, shrink_factors
from argmaxable.core.systems import System


@dataclass
class ReflectOutcome:
    """Per-target result of the approximate stage."""

    proven: np.ndarray  # (T,) bool: witness found in the box with margin > eps
    steps: np.ndarray  # (T,) int: argmax evaluations until proven (1 = the start point already wins), -1 if not
    x: np.ndarray  # (T, d) float64: the witness if proven, else the last iterate (seeds the exact LP)


def batch_size(n: int, budget_bytes: int = 1 << 28) -> int:
    """Targets per batch so one (batch × n) float32 block of logits stays within ``budget_bytes``."""
    return max(1, min(4096, budget_bytes // (4 * max(n, 1))))


def reflect(system: System, items: np.ndarray, *, patience: int, box: tuple[np.ndarray, np.ndarray], eps: float,
            progress=None, out: np.ndarray | None = None) -> ReflectOutcome:
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
    """
    T = len(items)
    progress = progress or (lambda k: None)
    proven = np.zeros(T, dtype=bool)
    steps = np.full(T, -1, dtype=np.int64)
    X = np.empty((T, system.d)) if out is None else out
    todo = np.arange(T)
    if system.has_gram_start and system.n_rows == T and np.array_equal(items, todo):
        # Every category at once: the first step from the Gram matrix's upper triangle (half the work).
        X[:] = system.start(slice(None))  # all start points (a view: no temporary); rows not won are redone below
        scale = np.ones(T)
        if system.homogeneous:  # a cone: scaling into the box divides every distance by the same factor
            scale = shrink_factors(X, *box)
            fits = np.isfinite(scale)
            X[fits] /= scale[fits, None]
        with np.errstate(invalid="ignore"):
            won = (system.start_margins(eps) / scale > eps) & inside(X, *box)
        proven[won], steps[won] = True, 1
        progress(int(won.sum()))
        todo = np.flatnonzero(~won)
    step = batch_size(system.n_rows)
    for lo in range(0, len(todo), step):
        sl = todo[lo : lo + step]
        proven[sl], steps[sl], X[sl] = _reflect_batch(system, items[sl], patience, box, eps)
        progress(len(sl))
    return ReflectOutcome(proven, steps, X)


def _reflect_batch(system: System, items: np.ndarray, patience: int, box, eps: float):
    B = len(items)
    X = system.start(items).astype(system.dtype)  # (B, d)
    proven = np.zeros(B, dtype=bool)
    steps = np.full(B, -1, dtype=np.int64)
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
        keep = ~wins  # a winning point outside the box goes to the exact LP, as in 002 §4
        active, worst = active[keep], worst[keep]
        if active.size == 0 or it == patience:
            break
        a, c = system.rows(items[active], worst)  # (b, d), (b,)
        sq = np.einsum("bd,bd->b", a, a)
        movable = sq > 0  # a zero row (duplicate) cannot be reflected across: leave it to the LP
        val = np.einsum("bd,bd->b", a, X[active]) + c
        coef = np.where(movable, 2.0 * val / np.where(movable, sq, 1.0), 0.0)
        X[active] -= coef[:, None] * a
        active = active[movable]
    return proven, steps, X.astype(np.float64)
