"""Questions answered as label assignments of derived layers (:mod:`argmaxable.core.questions.rankings`,
:mod:`~argmaxable.core.questions.prescribed`): the shared part.

Each question about one item (a token set with target probabilities, a ranking of k tokens) is a halfspace
system ``A x' + c < 0`` over ``x' = (x, tau)``. Written as a sigmoid label assignment ``y_i (v_i . x' + e_i) > 0``
of a layer ``V`` built for that item, it goes through the one core (:func:`argmaxable.check_assignments`: the
Chebyshev LP with its certificates), and its evidence is re-checked by :func:`argmaxable.verify_certificate`
against the same derived layer. ``check_top_m`` is the case with no ratio rows (GUIDE §1).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from argmaxable.core.questions.assignments import check_assignments
from argmaxable.core.result import CheckResult
from argmaxable.core.settings import BOUND, EPS
from argmaxable.verify import verify_certificate


def as_tokens(tokens, n: int) -> np.ndarray:
    """A token set (a ranking, or a set with targets) as distinct int64 indices in [0, n), or a one-line error."""
    idx = np.asarray(list(tokens), dtype=np.int64)
    if idx.ndim != 1 or idx.size == 0 or np.unique(idx).size != idx.size or idx.min() < 0 or idx.max() >= n:
        raise ValueError(f"A token set must hold distinct indices in [0, {n}). Got {idx[:10].tolist()}.")
    return idx


def check_layers(layers: Iterable[tuple[np.ndarray, np.ndarray, np.ndarray]], kind: str, **check) -> CheckResult:
    """Check one label assignment per derived layer with the core; one :class:`CheckResult` for all of them.

    ``check`` goes to :func:`argmaxable.check_assignments` as keywords (bound, eps, patience, solver, workers,
    exact_radius). Item k of the result is layer k; its certificate's rows index that layer's rows.
    """
    parts = [check_assignments(V, active[None, :], e, **check) for V, e, active in layers]
    if not parts:
        raise ValueError("check_layers needs at least one item.")
    first = parts[0]
    return CheckResult(
        kind, np.arange(len(parts)), np.concatenate([p.status for p in parts]),
        np.concatenate([p.radius for p in parts]), np.concatenate([p.radius_exact for p in parts]),
        np.concatenate([p.steps for p in parts]), np.concatenate([p.lp_rounds for p in parts]),
        np.concatenate([p.witness for p in parts]), np.concatenate([p.message for p in parts]),
        [cert for p in parts for cert in p.certificates], dict(first.settings),
        np.concatenate([p.radius_upper for p in parts]),
        {key: np.concatenate([p.answers[key] for p in parts]) for key in first.answers},
        {k: p.exact[0] for k, p in enumerate(parts) if 0 in p.exact})  # each part is one item: its position 0


def _item(result: CheckResult, k: int) -> CheckResult:
    """Item k of a :func:`check_layers` result as the one-assignment result of its own layer."""
    one = slice(k, k + 1)
    return CheckResult("assignments", np.array([0]), result.status[one], result.radius[one],
                       result.radius_exact[one], result.steps[one], result.lp_rounds[one], result.witness[one],
                       result.message[one], [result.certificates[k]], result.settings, result.radius_upper[one],
                       {key: value[one] for key, value in result.answers.items()},
                       {0: result.exact[k]} if k in result.exact else {})


def verify_layers(result: CheckResult, layers: Iterable[tuple[np.ndarray, np.ndarray, np.ndarray]], kind: str, *,
                  bound: float = BOUND, lower=None, upper=None, eps: float = EPS) -> np.ndarray:
    """Re-check each item's evidence with :func:`argmaxable.verify_certificate` on its own derived layer: item p
    is layer ``result.items[p]``, verified in the box and at the eps given (a result that records others, of
    another kind, or whose items do not index the layers given, is refused with a ValueError)."""
    layers = list(layers)
    if result.kind != kind:
        raise ValueError(f"verify: a {result.kind!r} result, not one of {kind}.")
    which = np.asarray(result.items)
    if which.ndim != 1 or which.dtype.kind not in "iu" or ((which < 0) | (which >= len(layers))).any():
        raise ValueError(f"verify: the result's {len(which)} items must be positions among the {len(layers)} "
                         f"{kind} given.")
    box = {"bound": bound, "lower": lower, "upper": upper, "eps": eps}
    if not set(result.exact) <= set(range(len(which))):  # rational evidence for no item: the result is suspect
        return np.zeros(len(which), dtype=bool)
    return np.array([bool(verify_certificate(_item(result, p), V, e, items=active[None, :], **box)[0])
                     for p, (V, e, active) in enumerate(layers[int(k)] for k in which)], dtype=bool)
