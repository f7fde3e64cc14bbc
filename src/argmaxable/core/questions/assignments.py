"""Sigmoid label assignments: which on/off patterns of W x + b > 0 does some x in the box produce (thesis §4.2)? The
system of assignment y: -y_i (w_i . x + b_i) < 0 for every label i."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
from threadpoolctl import threadpool_limits

from argmaxable.core.box import inside, to_edge
from argmaxable.core.chebyshev import WarmStart, chebyshev
from argmaxable.core.check import Prepared, finished, prepare, run_stages
from argmaxable.core.ledger import Ledger
from argmaxable.core.questions import Question
from argmaxable.core.result import CheckResult
from argmaxable.core.settings import (
    ASSIGNMENT_BOUND,
    EPS,
    SET_PATIENCE,
    SOLVER,
    WORKERS,
    LPSettings,
    Settings,
    show,
)
from argmaxable.core.systems import AssignmentSystem

# Rows of a proposed witness's local LP: the LOCAL_ROWS_PER_D * d rows nearest to it. Their Chebyshev LP bounds the
# radius of the whole system from above (more rows only shrink the region), so its dual weights answer "radius > 1"
# with "no" where the region is thin near its nearest rows, in one LP of a few hundred rows instead of constraint
# generation over every row.
LOCAL_ROWS_PER_D = 2
# Local LPs run first in a check; where none of them bounds its item's radius by 1, the check's other local LPs are
# skipped and their items go on to the stages, whose LP over every row answers radius > 1 as it answers an item whose
# local LP failed (the same answers; where a skipped local LP would have bounded its item, the evidence of its "no"
# is that LP's instead). Where a layer's columns beyond the construction's give the regions room (the trained debtags
# DFT heads, d = 32 to 128: benchmarks/RESULTS.md) no local LP bounds its item and they cost up to a third of a
# verification; where they pay (the BioASQ-sized DFT head) most of them do.
LOCAL_PROBE = 32


def as_signs(Y, n: int) -> np.ndarray:
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
    """:func:`as_signs` of a 2-D array of booleans or 0/1 values, one column per label."""
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
                      progress: bool = False, exact_radius: bool = False, regions: bool = False,
                      proposals=None, proposal_rows=None) -> CheckResult:
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
    proposals : array_like (m, d), optional
        A candidate point per assignment (a row of NaN: none), e.g. one built from a layer's construction. A
        proposal is never trusted: for a layer without bias it is scaled to the box's edge (a cone: the margin grows
        with the scale), then checked against every row in float64 with its rounding bounded; one whose certified
        margin exceeds eps is the assignment's witness, and its local LP (the rows nearest to it) may answer
        ``radius > 1`` with dual weights the verifier checks. What a proposal leaves open goes through the stages
        as usual, its exact LP starting from the proposal.
    proposal_rows : sequence of m integer arrays, optional
        With ``proposals``: per assignment, labels whose rows the first working set of its LP holds where the
        proposal leaves it open (e.g. where a construction says the sign pattern is decided); the LP then starts at
        the proposal scaled to the box's edge. Rows only guide the LP: its verdict and evidence are checked as
        always.

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
    return check_signs(W, items, b, settings, kind="assignments", proposals=proposals, proposal_rows=proposal_rows)


def check_signs(W, items, b, settings: Settings, *, kind: str, given: Prepared | None = None,
                proposals=None, proposal_rows=None) -> CheckResult:
    """:func:`check_assignments` with its settings built. ``given``: the layer as the user gave it where ``W`` was
    built from it (top-m sets: ``[W, -1]``); the result records its box and is re-verified on it. ``proposals``,
    ``proposal_rows``: as in :func:`check_assignments`."""
    if settings.eps > 1.0:  # radius > eps would then be the stronger question, answered beside radius > 1
        raise ValueError(f"The 'eps' parameter must be at most 1 for label sets and top-m sets, which also answer "
                         f"radius > 1 (thesis §4.2's 1-argmaxable). Got {settings.eps!r} instead.")
    prep = prepare(W, b, settings)
    signs = as_signs(items, prep.W.shape[0])
    system = AssignmentSystem(prep.W, prep.b, signs)
    given = given or prep
    if proposals is None:
        if proposal_rows is not None:
            raise ValueError("The 'proposal_rows' parameter needs 'proposals': rows start the LP at a proposed point.")
        ledger = run_stages(system, np.arange(len(signs)), settings, prep.box, kind=kind, threshold=1.0,
                            shown_box=given.box)
        return finished(ledger, given, signs > 0)
    points = _as_proposals(proposals, signs.shape[0], prep.W.shape[1])
    rows = None if proposal_rows is None else _as_rows(proposal_rows, signs.shape[0], prep.W.shape[0])
    found = Proposed.check(system, points, prep.box, settings)
    live = ~found.closed
    left = np.flatnonzero(live)
    starts = None if rows is None else {j: WarmStart(found.starts[pos], rows[pos]) for j, pos in enumerate(left)
                                        if not np.isnan(found.starts[pos]).any()}
    part = run_stages(StartingAt(prep.W, prep.b, signs[left], found.starts[left]), np.arange(len(left)),
                      settings, prep.box, kind=kind, threshold=1.0, shown_box=given.box,
                      starts=starts) if left.size else None
    ledger = found.ledger(part, live, settings.record(given.box), kind, prep.W.shape[0])
    return finished(ledger, given, signs > 0)


def _as_proposals(proposals, m: int, d: int) -> np.ndarray:
    """The proposals as an (m, d) float64 array (NaN rows: none), or a one-line ValueError."""
    P = np.asarray(proposals, dtype=np.float64)
    if P.shape != (m, d):
        raise ValueError(f"The 'proposals' parameter must have shape ({m}, {d}): one point per assignment. "
                         f"Got shape {P.shape}.")
    if np.isinf(P).any():
        raise ValueError("The 'proposals' parameter holds an infinite entry: give a finite point or a row of NaN.")
    return P


def _as_rows(rows, m: int, n: int) -> list[np.ndarray]:
    """``proposal_rows`` as m int64 arrays of labels in [0, n), or a one-line ValueError."""
    if isinstance(rows, (str, bytes)) or not hasattr(rows, "__len__") or len(rows) != m:
        raise ValueError(f"The 'proposal_rows' parameter must hold {m} arrays of label indices: one per assignment.")
    out = []
    for r in rows:
        a = np.asarray(r)
        if a.ndim != 1 or (a.size and a.dtype.kind not in "iu") or (a.size and not (a.min() >= 0 and a.max() < n)):
            raise ValueError(f"The 'proposal_rows' parameter must hold 1-D arrays of label indices in [0, {n}).")
        out.append(np.unique(a.astype(np.int64)))
    return out


class Proposed:
    """Proposed witnesses checked in float64 (their rounding bounded, as reflection's), and the local LPs of those
    that stand: the items they decide at both thresholds (eps and 1) are closed before the stages run."""

    name = "proposal"

    def __init__(self, m: int, d: int):
        self.closed = np.zeros(m, dtype=bool)
        self.witness = np.full((m, d), np.nan)
        self.margin = np.full(m, np.nan)
        self.upper = np.full(m, np.nan)
        self.certificates: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self.starts = np.full((m, d), np.nan)  # where the exact LP of an item left open starts

    @classmethod
    def check(cls, system: AssignmentSystem, P: np.ndarray, box, settings: Settings) -> Proposed:
        out = cls(len(P), system.d)
        given = np.flatnonzero(~np.isnan(P).any(axis=1))
        if not given.size:
            return out
        X = to_edge(P[given], box) if system.homogeneous else P[given]
        out.starts[given] = X
        _, margin = system.evaluate(given, X, settings.eps)
        standing = np.flatnonzero((margin > settings.eps) & inside(X, *box))
        out.witness[given[standing]], out.margin[given[standing]] = X[standing], margin[standing]
        local = standing[margin[standing] <= 1.0]  # the rest answer radius > 1 with "yes" by their witnesses
        out.closed[given[standing]] = True
        bounded = np.zeros(local.size, dtype=bool)
        # one BLAS thread per local LP, ``workers`` at once (each item's LP is its own: the same for any number)
        with threadpool_limits(limits=1, user_api="blas"), ThreadPoolExecutor(settings.workers) as pool:
            for part in (slice(0, LOCAL_PROBE), slice(LOCAL_PROBE, None)):
                if part.start and not bounded.any():
                    break
                bounded[part] = list(pool.map(lambda j: out._local_upper(system, int(given[j]), X[j], box, settings),
                                              local[part]))
        out.closed[given[local]] = bounded
        return out

    def _local_upper(self, system: AssignmentSystem, pos: int, x: np.ndarray, box, settings: Settings) -> bool:
        """Whether the Chebyshev LP over the rows nearest to witness ``x`` bounds item ``pos``'s radius by 1 (a
        bound above eps: a witness stands), keeping its dual weights."""
        s = -system.signs[pos].astype(np.float64)  # rows -y_i w_i, offsets -y_i b_i (negations: exact)
        slack = s * (system.W @ x + system.b)
        q = min(len(s), LOCAL_ROWS_PER_D * system.d)
        near = np.argpartition(-slack, q - 1)[:q] if q < len(s) else np.arange(len(s))
        A, c = s[near, None] * system.W[near], s[near] * system.b[near]
        out = chebyshev(A, c, box, LPSettings(eps=settings.eps, solver=settings.solver, exact_radius=False,
                                                          thresholds=(1.0,), initial_rows=q))
        if not settings.eps < out.upper <= 1.0:
            return False
        self.upper[pos] = out.upper
        self.certificates[pos] = (near[np.asarray(out.dual_rows, dtype=np.int64)], out.dual_weights)
        return True

    def ledger(self, part: Ledger | None, live: np.ndarray, record: dict, kind: str, n_rows: int) -> Ledger:
        """The ledger of every item: the stages' ``part`` (over the items left ``live``, rows named as the layer's)
        placed back, and the closed items' witnesses, margins and the dual weights of their bounds by 1."""
        m, d = self.witness.shape
        items = np.arange(m)
        if part is None:
            out = Ledger(items, kind=kind, eps=record["eps"], threshold=1.0, settings=record)
            out.new_witnesses(d, np.float64, filled=False)
        else:
            out = part.spread(live, np.arange(n_rows), items)
        for pos in np.flatnonzero(self.closed):
            out.prove(pos, self.name, lower=self.margin[pos], x=self.witness[pos])
            out.bound(pos, self.margin[pos], self.upper[pos])
            if pos in self.certificates:
                out.upper_by(pos, self.certificates[pos])
                out.note(pos, f"proposed witness; radius <= {self.upper[pos]:.3g} by the LP of its "
                              f"{len(self.certificates[pos][0])} nearest rows' dual weights")
            else:
                out.note(pos, "proposed witness")
        return out


class StartingAt(AssignmentSystem):
    """An assignment system whose reflection starts at the given points where they are finite (proposals that did
    not close their items), at its usual start elsewhere; the exact LP then starts from reflection's best iterate."""

    def __init__(self, W: np.ndarray, b: np.ndarray | None, signs: np.ndarray, starts: np.ndarray):
        super().__init__(W, b, signs)
        self.starts = starts

    def start(self, items):
        X = super().start(items)
        S = self.starts[items]
        given = ~np.isnan(S).any(axis=1)
        X[given] = S[given]
        return X


QUESTION = Question(kind="assignments", check=check_assignments, bound=ASSIGNMENT_BOUND, evidence="assignments")
