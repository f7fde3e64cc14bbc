"""Top-m sets (Basri & Jacobs; thesis Prop. 5.3): can the tokens of a set be exactly the top-m of softmax(W x + b)?
The label assignment of the augmented sigmoid layer [W, -1] over (x, tau)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from argmaxable.core.check import prepare
from argmaxable.core.questions import Question
from argmaxable.core.questions.assignments import check_signs
from argmaxable.core.result import CheckResult
from argmaxable.core.settings import BOUND, EPS, SET_PATIENCE, SOLVER, WORKERS, Settings


def check_top_m(W, items, b=None, *, bound: float = BOUND, lower=None, upper=None, eps: float = EPS,
                patience: int = SET_PATIENCE, solver: str = SOLVER, workers: int = WORKERS, progress: bool = False,
                exact_radius: bool = False, regions: bool = False) -> CheckResult:
    """Can the tokens of each set be exactly the top-m of softmax(W x + b) for some x in the box?

    A set S is the top-|S| iff some threshold tau separates it: w_i.x + b_i > tau exactly for i in S. That is
    the label assignment S of the sigmoid layer [W, -1] over (x, tau) (thesis Prop. 5.3; Basri & Jacobs §5-6),
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
    prep = prepare(W, b, settings)  # scaled as there
    lo, hi = prep.box
    augmented = np.hstack([prep.W, -np.ones((prep.W.shape[0], 1))])
    over_tau = replace(settings, lower=np.append(lo, -bound), upper=np.append(hi, bound))
    return check_signs(augmented, items, prep.b, over_tau, kind="top-m sets", given=prep)  # records x's box


QUESTION = Question(kind="top-m sets", check=check_top_m, bound=BOUND, evidence="top-m sets")
