"""The one core: is {x : A x + c < 0, |x_j| <= B} non-empty, and how large a ball does it hold?

Every question of the papers (softmax categories, sigmoid label assignments, top-m sets) is an adapter that
builds rows ``A`` and offsets ``c``. This module answers it with the Chebyshev LP

    maximise t   subject to   a_i . x / ||a_i|| + c_i / ||a_i|| + t <= 0,   lo_j <= x_j <= hi_j,

solved by constraint generation: a small working set of rows, one mat-vec over all rows to find the violated
ones, add them, re-solve. ``t`` is free, so each solve has an optimum and two certificates that we check in
float64 without the solver:

- lower bound: a point x in the box has distance ``min_i -(a_i.x + c_i)/||a_i||`` to every hyperplane, so the
  region holds a ball of that radius around x (a *witness*);
- upper bound: for weights ``y >= 0`` summing to 1 over any rows, ``sup_{x in box} (-v.x) - sum y_i c_i/||a_i||``
  with ``v = sum y_i a_i/||a_i||`` bounds the radius from above (LP duality; valid for the full system since more
  rows only shrink the region). For the paper's box |x_j| <= B the supremum is ``B ||v||_1``.

Verdict: lower > eps -> "feasible"; upper <= eps -> "infeasible"; anything else (the solver failed, or the
radius sits within the solver's tolerance of eps) -> "undecided", never folded into either side.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from argmaxable.core.box import make_box
from argmaxable.core.numerics import chunked_product, gamma, row_norms
from argmaxable.core.settings import LPSettings
from argmaxable.core.solvers import make_lp

# A row whose solver residual exceeds this after a solve is added to the working set. Well above the LP's
# feasibility tolerance (1e-10) and well below eps (1e-8).
VIOLATION_TOLERANCE = 1e-9

FEASIBLE, INFEASIBLE, UNDECIDED = "feasible", "infeasible", "undecided"

# Working-set sizes: the first solve has WORKING_ROWS rows, and each round adds max(d+1, WORKING_ROWS), at most
# ROUND_ROWS. Measured (benchmarks/RESULTS.md): at d=128 a first solve over 48 rows instead of d+1 = 129 is about 2x
# faster and still decides a wide region in one round; at d=16 rounds of 48 rows instead of 17 take 3 rounds
# instead of 5; at d=896 (Qwen2.5-Coder's head) rounds of d+1 = 897 dense rows made each next dual simplex solve
# minutes long and the LP did not finish, where rounds of 128 converged in 16 to 24 (256: in 12, no faster).
WORKING_ROWS = 48
ROUND_ROWS = 128


@dataclass
class LPOutcome:
    """Verdict on one halfspace system, with the evidence for it.

    Attributes
    ----------
    status : {"feasible", "infeasible", "undecided"}
        Verdict at precision ``eps``.
    radius : float
        Chebyshev radius: the LP optimum when it converged, else the certified bound that decided the verdict
        (lower bound for "feasible", upper bound for "infeasible"; NaN when undecided). Negative means even the
        best point in the box violates some row by that distance.
    lower, upper : float
        Certified bounds on the radius, checked in float64 (``lower <= radius <= upper`` up to solver noise).
    x : ndarray or None
        Witness in the box whose margin is ``lower`` (None when no solve succeeded).
    dual_rows, dual_weights : ndarray
        Rows and weights (summing to 1) of the upper-bound certificate.
    rounds : int
        Constraint-generation rounds (LP solves).
    message : str
        Why the verdict is what it is (solver status when undecided, duplicate rows, ...).
    """

    status: str
    radius: float
    lower: float
    upper: float
    x: np.ndarray | None
    dual_rows: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    dual_weights: np.ndarray = field(default_factory=lambda: np.zeros(0))
    rounds: int = 0
    message: str = ""
    converged: bool = False  # constraint generation reached the optimum of the full LP


def dual_bound(A: np.ndarray, c: np.ndarray, norms: np.ndarray, rows: np.ndarray, weights: np.ndarray,
               box: tuple[np.ndarray, np.ndarray]) -> float:
    """Certified upper bound on the Chebyshev radius from dual weights over ``rows`` (float64, no solver).

    Summing ``y_i (a_i.x + c_i + t ||a_i||) <= 0`` over normalised rows gives ``t <= sup_box(-v) - y.cn`` with
    ``v = y.An``; the rounding of the normalisation, of the sums and of the support is bounded (gamma_k times the
    sums of absolute values) and added, so the bound holds for the exact arithmetic too.
    """
    if rows.size == 0 or not np.isfinite(weights).all() or weights.sum() <= 0:
        return np.inf
    y = weights / weights.sum()
    An = A[rows] / norms[rows, None]
    cn = c[rows] / norms[rows]
    lo, hi = box
    vc, k_sum = chunked_product(y[None], np.hstack([An, cn[:, None]]))  # sums with a log-depth rounding bound
    v, ycn = vc[0, :-1], float(vc[0, -1])
    terms = np.maximum(-v * lo, -v * hi)
    value = float(terms.sum() - ycn)
    d = An.shape[1]
    err = (gamma(k_sum + 3) * float(y @ (np.abs(An) @ np.maximum(np.abs(lo), np.abs(hi))) + y @ np.abs(cn))
           + gamma(d + 2) * float(np.abs(terms).sum() + abs(ycn)))
    top = value + err  # numerator bound; the denominator sum y_i ||a_i|| / norm_i lies in [1 - g, 1 + g]
    g = gamma(d + 4)
    return top / (1 - g) if top > 0 else top / (1 + g)


def polish(A: np.ndarray, norms: np.ndarray, rows: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dual weights made exact on their support, or empty arrays if that breaks their sign.

    A solver's duals cancel the normalised rows only to its tolerance, and the bound multiplies what is left by
    the box (``B ||sum y_i a_i||_1`` for |x_j| <= B: 1e-12 becomes 1e-8 at B = 1e4). Projecting the weights onto
    ``{y : sum y_i a_i = 0}`` over the same rows (least squares, float64) removes that error; the result counts
    only if it stays non-negative, and is then checked by :func:`dual_bound` like any other.
    """
    rows, y = rows[weights > 0], weights[weights > 0]
    An = A[rows] / norms[rows, None]
    y = y - An @ np.linalg.lstsq(An, y, rcond=None)[0]
    if y.size == 0 or y.min() < 0 or not y.sum() > 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    return rows, y / y.sum()


@dataclass(frozen=True)
class WarmStart:
    """Where one LP starts: a point near the region (the approximate stage's best iterate; default the origin,
    clipped into the box) and rows to put in its first working set (e.g. those that beat that point)."""

    x: np.ndarray | None = None
    rows: np.ndarray | None = None


def chebyshev(A, c, box, lp: LPSettings | None = None, start: WarmStart | None = None) -> LPOutcome:
    """Decide whether ``{x : A x + c < 0, x in box}`` holds a ball (centred in the box) of radius > ``lp.eps``.

    Parameters
    ----------
    A : array_like, shape (m, d)
        Row normals (float64 is used throughout).
    c : array_like, shape (m,)
        Offsets.
    box : float or (array_like, array_like)
        The box: a half-width B (|x_j| <= B), or per-coordinate ends ``(lo, hi)``
        (:func:`argmaxable.core.box.make_box`).
    lp : LPSettings, optional
        eps (default 1e-8, thesis §4.2), solver, whether to run to the optimum (default) or stop once every
        threshold is decided, the thresholds, the working-set sizes (default ``LPSettings()``).
    start : WarmStart, optional
        A point near the region and rows for the first working set (default: the origin, no rows).

    Returns
    -------
    LPOutcome

    Examples
    --------
    >>> import numpy as np
    >>> W = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0], [0.1, 0.1]])  # class 3 lies inside the triangle
    >>> chebyshev(W - W[3], np.zeros(4), 100.0).status
    'infeasible'
    """
    lp, start = lp or LPSettings(), start or WarmStart()
    A = np.asarray(A, dtype=np.float64)
    c = np.asarray(c, dtype=np.float64)
    m, d = A.shape
    box = make_box(d, box) if np.ndim(box) == 0 else make_box(d, np.inf, *box)
    norms = row_norms(A)  # no overflow or underflow of squares: only an exactly zero row gets 0
    zero = norms == 0.0
    if zero.any():
        return _without_zero_rows(A, c, box, lp, start, zero)
    if m == 0:
        x = np.clip(np.zeros(d), *box)
        return LPOutcome(FEASIBLE, np.inf, np.inf, np.inf, x, message="no constraints")
    return _generate(A, c, norms, box, lp, start)


def _without_zero_rows(A, c, box, lp: LPSettings, start: WarmStart, zero: np.ndarray) -> LPOutcome:
    """A system with identically zero rows: one whose offset is >= 0 cannot hold (e.g. a duplicate of the target
    row), one whose offset is < 0 always holds and is dropped."""
    blocking = np.flatnonzero(zero & (c >= 0.0))
    if blocking.size:
        i = int(blocking[0])
        return LPOutcome(INFEASIBLE, -np.inf, -np.inf, -np.inf, None, np.array([i]), np.array([1.0]),
                         message=f"row {i} is identically zero with offset {c[i]:.3g} >= 0")
    keep = np.flatnonzero(~zero)
    seeds = None if start.rows is None else np.flatnonzero(np.isin(keep, start.rows))
    sub = chebyshev(A[keep], c[keep], box, lp, WarmStart(start.x, seeds))
    sub.dual_rows = keep[sub.dual_rows]
    return sub


@dataclass
class _Search:
    """The state of constraint generation: the best certified bounds so far and their evidence."""

    best_x: np.ndarray | None = None
    lower: float = -np.inf
    upper: float = np.inf
    dual_rows: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    dual_weights: np.ndarray = field(default_factory=lambda: np.zeros(0))
    t: float = np.nan
    rounds: int = 0
    converged: bool = False
    message: str = ""

    def outcome(self, eps: float) -> LPOutcome:
        """Verdict at ``eps`` from the certified bounds; the radius is the optimum where it was reached."""
        if self.lower > eps:
            status = FEASIBLE
        elif self.upper <= eps:
            status = INFEASIBLE
        else:
            status = UNDECIDED
            self.message = self.message or (f"radius within solver tolerance of eps: certified bounds "
                                            f"[{self.lower:.3g}, {self.upper:.3g}] straddle eps={eps:g} (rounding "
                                            "bounds included)")
        if self.converged and np.isfinite(self.t):
            radius = self.t
        else:
            radius = {FEASIBLE: self.lower, INFEASIBLE: self.upper}.get(status, np.nan)
        return LPOutcome(status, float(radius), self.lower, self.upper, self.best_x, np.asarray(self.dual_rows),
                         self.dual_weights, self.rounds, self.message, self.converged)


def _generate(A, c, norms, box, lp: LPSettings, start: WarmStart) -> LPOutcome:
    """Constraint generation over the rows of A (none zero): solve over a working set, add the rows the solution
    violates, re-solve, until none is violated or (``exact_radius`` off) every threshold is decided."""
    m, d = A.shape
    inv = 1.0 / norms  # rows are normalised only where the LP needs them: the full An would cost a copy of A
    cn = c * inv
    cn_max = float(np.abs(cn).max())
    thresholds = list(lp.thresholds) or [lp.eps]
    k_add = lp.rows_per_round or min(max(d + 1, WORKING_ROWS), ROUND_ROWS)
    in_set = np.zeros(m, dtype=bool)
    first = _first_rows(A, inv, cn, box, lp, start)
    in_set[first] = True
    working = list(first)
    solver = make_lp(lp.solver, *box)
    solver.add_rows(A[first] * inv[first, None], cn[first])
    search = _Search()
    while True:
        search.rounds += 1
        sol = solver.solve()
        if not sol.ok:
            search.message = sol.message
            break
        search.t = sol.t
        _tighten_upper(search, A, c, norms, box, np.asarray(working), sol, min(thresholds))
        if not lp.exact_radius and search.upper <= min(thresholds):  # the working set alone rules them all out
            break
        x = np.clip(sol.x, *box)
        slack = (A @ x) * inv + cn  # (m,) signed normalised distances; < 0 inside
        margin = _certified_margin(x, slack, cn_max)
        if margin > search.lower:
            search.best_x, search.lower = x, margin
        violated = np.flatnonzero((slack + sol.t > VIOLATION_TOLERANCE) & ~in_set)
        if violated.size == 0:
            search.converged = True
            break
        if not lp.exact_radius and all(search.lower > thr or search.upper <= thr for thr in thresholds):
            break
        if lp.max_rounds is not None and search.rounds >= lp.max_rounds:
            _best_between(search, A, inv, cn, cn_max, box, start.x, x, slack)
            search.message = (f"stopped after {search.rounds} rounds (the limit), {violated.size} rows still "
                              f"violated: radius in [{search.lower:.6g}, {search.upper:.6g}]")
            break
        worst = violated if violated.size <= k_add else violated[np.argpartition(-slack[violated], k_add - 1)[:k_add]]
        in_set[worst] = True
        working.extend(worst)
        solver.add_rows(A[worst] * inv[worst, None], cn[worst])
    return search.outcome(lp.eps)


def _best_between(search: _Search, A, inv, cn, cn_max: float, box, x0, x1, slack1) -> None:
    """For an LP stopped before its optimum: the best point on the segment from its start ``x0`` (a witness, whose
    margin bounds the radius from below) to the last iterate ``x1`` (nearer the optimum, but outside the region),
    kept if its certified margin beats the best so far. The margin along the segment, min_i of an affine function
    of each row, is concave: a ternary search on the two points' slacks finds its maximum."""
    if x0 is None:
        return
    x0 = np.clip(np.asarray(x0, dtype=np.float64), *box)
    slack0 = (A @ x0) * inv + cn
    lo, hi = 0.0, 1.0
    for _ in range(60):
        a, b = lo + (hi - lo) / 3, hi - (hi - lo) / 3
        if ((1 - a) * slack0 + a * slack1).max() <= ((1 - b) * slack0 + b * slack1).max():
            hi = b
        else:
            lo = a
    between = np.clip((1 - lo) * x0 + lo * x1, *box)
    for x, slack in ((x0, slack0), (between, (A @ between) * inv + cn)):  # the start itself, and the best between
        margin = _certified_margin(x, slack, cn_max)
        if margin > search.lower:
            search.best_x, search.lower = x, margin


def _first_rows(A, inv, cn, box, lp: LPSettings, start: WarmStart) -> np.ndarray:
    """The first working set: the rows nearest to violation at the start point, and the start's own rows."""
    m, d = A.shape
    k0 = min(m, lp.initial_rows or WORKING_ROWS)
    x0 = np.clip(np.zeros(d) if start.x is None else np.asarray(start.x, dtype=np.float64), *box)
    at_start = (A @ x0) * inv + cn  # signed distances at the start point
    first = np.argpartition(-at_start, k0 - 1)[:k0] if k0 < m else np.arange(m)
    if start.rows is not None:
        first = np.union1d(first, np.asarray(start.rows, dtype=np.int64))
    return first


def _tighten_upper(search: _Search, A, c, norms, box, rows, sol, threshold: float) -> None:
    """The dual bound of one solve's weights, polished where the solver says "ruled out" (t <= ``threshold``)
    but its duals are too loose to prove it; kept with its weights if it is the best so far."""
    total = sol.duals.sum()
    weights = sol.duals / total if total > 0 else sol.duals  # all-zero duals: dual_bound gives inf
    bound_here = dual_bound(A, c, norms, rows, weights, box)
    if bound_here > threshold >= sol.t:
        rows_p, weights_p = polish(A, norms, rows, weights)
        polished = dual_bound(A, c, norms, rows_p, weights_p, box)
        if polished < bound_here:
            rows, weights, bound_here = rows_p, weights_p, polished
    if bound_here < search.upper:
        search.upper, search.dual_rows, search.dual_weights = bound_here, rows, weights


def _certified_margin(x: np.ndarray, slack: np.ndarray, cn_max: float) -> float:
    """Certified distance of x to the nearest hyperplane: the computed one less the rounding of
    a_i.x/||a_i|| + c_i/||a_i|| (|a_i|.|x| <= ||a_i|| ||x||, normalisation and offsets relative u each)."""
    margin = float(-slack.max())
    return margin - gamma(len(x) + 6) * (float(row_norms(x[None])[0]) + cn_max + abs(margin))
