"""Sigmoid label assignments: which on/off patterns of W x + b > 0 does some x in the box produce (thesis §4.2)? The
system of assignment y: -y_i (w_i . x + b_i) < 0 for every label i."""

from __future__ import annotations

import numpy as np

from argmaxable.core.check import Prepared, finished, prepare, run_stages
from argmaxable.core.questions import Question
from argmaxable.core.result import CheckResult
from argmaxable.core.settings import ASSIGNMENT_BOUND, EPS, SET_PATIENCE, SOLVER, WORKERS, Settings, show
from argmaxable.core.systems import AssignmentSystem


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
    return check_signs(W, items, b, settings, kind="assignments")


def check_signs(W, items, b, settings: Settings, *, kind: str, given: Prepared | None = None) -> CheckResult:
    """:func:`check_assignments` with its settings built. ``given``: the layer as the user gave it where ``W`` was
    built from it (top-m sets: ``[W, -1]``); the result records its box and is re-verified on it."""
    if settings.eps > 1.0:  # radius > eps would then be the stronger question, answered beside radius > 1
        raise ValueError(f"The 'eps' parameter must be at most 1 for label sets and top-m sets, which also answer "
                         f"radius > 1 (thesis §4.2's 1-argmaxable). Got {settings.eps!r} instead.")
    prep = prepare(W, b, settings)
    signs = as_signs(items, prep.W.shape[0])
    system = AssignmentSystem(prep.W, prep.b, signs)
    given = given or prep
    ledger = run_stages(system, np.arange(len(signs)), settings, prep.box, kind=kind, threshold=1.0,
                        shown_box=given.box)
    return finished(ledger, given, signs > 0)


QUESTION = Question(kind="assignments", check=check_assignments, bound=ASSIGNMENT_BOUND, evidence="assignments")
