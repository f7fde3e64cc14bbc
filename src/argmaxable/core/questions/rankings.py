"""Top-k rankings (thesis §5.2): can k tokens be the k largest logits of W x + b, in that order? The all-active label
assignment of a derived layer (:mod:`argmaxable.core.derived`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from argmaxable.core.derived import Derived, as_tokens, check_layers, two_diff, verify_layers
from argmaxable.core.questions import Question
from argmaxable.core.result import CheckResult
from argmaxable.core.settings import BOUND, EPS


def ranking_layer(W: np.ndarray, b: np.ndarray | None, ranking) -> Derived:
    """The derived layer whose all-active assignment holds iff ``ranking`` is the top-k ranking of ``W x + b``.

    Rows ``w_{s_t} - w_{s_t+1}`` (each ranked logit above the next) and ``w_{s_k} - w_j`` for every unranked j
    (thesis §5.2: a top-k ranking orders k logits and puts them above the rest in any order), each difference
    rounded to float64 with its exact rounding error (:func:`~argmaxable.core.derived.two_diff`): V (N - 1, d),
    e (N - 1,), all active.
    """
    N = W.shape[0]
    s = as_tokens(ranking, N)
    b = np.zeros(N) if b is None else b
    rest = np.setdiff1d(np.arange(N), s)
    hi = np.concatenate([s[:-1], np.full(rest.size, s[-1])])
    lo = np.concatenate([s[1:], rest])
    V, T = two_diff(W[hi], W[lo])
    e, t = two_diff(b[hi], b[lo])
    return Derived(V, e, np.ones(N - 1, dtype=bool), np.abs(T), np.abs(t))


def check_rankings(W, rankings: Sequence, b=None, **check) -> CheckResult:
    """Which top-k rankings (first = largest logit, the rest of the tokens below in any order) are argmaxable?

    Examples
    --------
    >>> W = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0], [0.1, 0.1]])
    >>> check_rankings(W, [[0, 3], [0, 1], [3]]).status.tolist()
    ['argmaxable', 'argmaxable', 'unargmaxable']
    """
    W = np.asarray(W, dtype=np.float64)
    b = None if b is None else np.asarray(b, dtype=np.float64)
    check.setdefault("bound", BOUND)
    return check_layers((ranking_layer(W, b, s) for s in rankings), "top-k rankings", **check)


def verify_rankings(result: CheckResult, W, rankings: Sequence, b=None, *, bound: float = BOUND, lower=None,
                    upper=None, eps: float = EPS) -> np.ndarray:
    """Re-check every verdict of :func:`check_rankings` without a solver, in the box and at the eps given
    (defaults: :func:`check_rankings`'s); a result that records others is refused (ValueError)."""
    W = np.asarray(W, dtype=np.float64)
    b = None if b is None else np.asarray(b, dtype=np.float64)
    return verify_layers(result, (ranking_layer(W, b, s) for s in rankings), "top-k rankings", bound=bound,
                         lower=lower, upper=upper, eps=eps)


QUESTION = Question(kind="top-k rankings", check=check_rankings, bound=BOUND, evidence="assignments")
