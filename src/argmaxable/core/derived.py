"""Questions answered as label assignments of derived layers (:mod:`argmaxable.core.questions.rankings`,
:mod:`~argmaxable.core.questions.prescribed`): the shared part.

Each question about one item (a token set with target probabilities, a ranking of k tokens) is a halfspace
system ``A x' + c < 0`` over ``x' = (x, tau)``. Written as a sigmoid label assignment ``y_i (v_i . x' + e_i) > 0``
of a layer ``V`` built for that item, it goes through the one core (:func:`argmaxable.check_assignments`: the
Chebyshev LP with its certificates), and its evidence is re-checked by :func:`argmaxable.verify_certificate`
against the same derived layer. ``check_top_m`` is the case with no ratio rows.

A derived layer is computed in float64 (differences ``w_i - w_j``, logarithms of the targets), so it carries bounds
on its rounding (:class:`Derived`): where it rounds, an item is "argmaxable" only on the layer moved against it by
those bounds and "unargmaxable" only on the layer moved with it, and the verifier checks each claim on the same
moved layer, so that a verdict of the rounded rows never stands for the exact ones.

The check and its verifier build the same derived layer, from the caller's W, b and items alone (never from a
value the result carries): the layer is the question's definition, as W is a category's. That definition is held
to oracles outside this code (tests/test_topm.py: angle sweeps of every ranking and set in the plane, softmax at a
prescribed witness, a ranking's logits at its witness in exact rationals).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

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


U = 2.0**-53  # unit roundoff of float64


def two_diff(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``a - b`` rounded, and its exact rounding error (Knuth's two-sum: ``a - b = s + t`` exactly, barring
    overflow)."""
    s = a - b
    back = s - a
    return s, (a - (s - back)) + (-b - back)


@dataclass
class Derived:
    """One item's derived layer: rows ``V`` and offsets ``e`` as computed, the assignment ``active``, and bounds on
    their rounding: the exact rows are ``V + T`` with ``|T| <= err_V`` entrywise, the exact offsets ``e + t`` with
    ``|t| <= err_e`` (zero where the layer is exact)."""

    V: np.ndarray
    e: np.ndarray
    active: np.ndarray
    err_V: np.ndarray
    err_e: np.ndarray

    def exact(self) -> bool:
        return not (np.any(self.err_V) or np.any(self.err_e))

    def bounded(self, bound: float, worse: bool) -> np.ndarray:
        """Offsets of the layer whose item holds only where the exact one does (``worse``: every row's offset moved
        against its sign) or holds wherever the exact one does (moved with it), for points in ``|x_j| <= bound``
        and margins up to ``bound``: each row moves by ``err_V . bound + err_e + bound ||err_V||``, rounded up, and
        the offset is rounded away once more."""
        d = self.V.shape[1]
        with np.errstate(over="ignore"):
            move = (self.err_V.sum(axis=1) * bound + self.err_e + bound * np.sqrt((self.err_V**2).sum(axis=1))) * (
                1 + 4 * (d + 4) * U) + (d + 4) * 2.0**-1074 * (1 + bound)
        sign = np.where(self.active, 1.0, -1.0) * (-1.0 if worse else 1.0)
        return np.nextafter(self.e + sign * move, sign * np.inf)


def check_layers(layers: Iterable[Derived], kind: str, **check) -> CheckResult:
    """Check one label assignment per derived layer with the core; one :class:`CheckResult` for all of them.

    ``check`` goes to :func:`argmaxable.check_assignments` as keywords (bound, eps, patience, solver, workers,
    exact_radius). Item k of the result is layer k; its certificate's rows index that layer's rows. A layer that
    rounds (:class:`Derived`) is checked on its bounded layers: "argmaxable" where the layer moved against the item
    (``worse``) shows it, with its witness-based evidence alone; "unargmaxable" where the layer moved with it
    shows it, with its certificate-based evidence alone; else "undecided" (:func:`_one`).
    """
    parts = [_one(layer, check) for layer in layers]
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


def _one(layer: Derived, check: dict) -> CheckResult:
    """One item's check (:func:`check_layers`)."""
    if layer.exact():
        return check_assignments(layer.V, layer.active[None, :], layer.e, **check)
    bound = float(check.get("bound", BOUND))
    worse = check_assignments(layer.V, layer.active[None, :], layer.bounded(bound, worse=True), **check)
    if worse.status[0] == "argmaxable":
        return witness_part(worse)
    better = check_assignments(layer.V, layer.active[None, :], layer.bounded(bound, worse=False), **check)
    if better.status[0] == "unargmaxable":
        return certificate_part(better)
    out = certificate_part(witness_part(better))
    out.message[0] = ("undecided: the derived layer's rows and offsets round in float64 by more than this item's "
                      f"margin: moved against it, {worse.status[0]}; with it, {better.status[0]}")
    return out


def witness_part(res: CheckResult) -> CheckResult:
    """A one-item result with only its witness-based claims: status argmaxable (else undecided), the radius and the
    "yes" answers; no certificate, upper bound or "no" answer; the exact record only where its evidence is a point
    (the status it decided argmaxable, or the region "yes")."""
    arg = res.status[0] == "argmaxable"
    keep = {k: rec for k, rec in res.exact.items()
            if (rec.decided == "radius" and arg) or (rec.decided == "region" and rec.region == "yes")}
    return _claims(res, "argmaxable" if arg else "undecided", "yes", keep, witness=True)


def certificate_part(res: CheckResult) -> CheckResult:
    """A one-item result with only its certificate-based claims: status unargmaxable (else undecided), the upper
    bound and the "no" answers; no witness or lower radius; the exact record only where its evidence is weights."""
    un = res.status[0] == "unargmaxable"
    keep = {k: rec for k, rec in res.exact.items()
            if (rec.decided == "radius" and un) or (rec.decided == "region" and rec.region == "no")}
    return _claims(res, "unargmaxable" if un else "undecided", "no", keep, witness=False)


def _claims(res: CheckResult, status: str, answer: str, exact: dict, witness: bool) -> CheckResult:
    k = len(res.status)
    none = (np.zeros(0, dtype=np.int64), np.zeros(0))
    answers = {key: np.where(np.asarray(v).astype(str) == answer, answer, "undecided") for key, v in
               res.answers.items()}
    if "eps" in answers:
        answers["eps"] = np.full(k, {"argmaxable": "yes", "unargmaxable": "no"}.get(status, "undecided"))
    return replace(res, status=np.full(k, status), answers=answers, exact=exact,
                   radius=res.radius if witness else np.full(k, np.nan),
                   witness=res.witness if witness else np.full_like(res.witness, np.nan),
                   certificates=[none] * k if witness else list(res.certificates),
                   radius_upper=np.full(k, np.nan) if witness else res.radius_upper,
                   message=res.message.copy())


def _item(result: CheckResult, k: int) -> CheckResult:
    """Item k of a :func:`check_layers` result as the one-assignment result of its own layer."""
    one = slice(k, k + 1)
    return CheckResult("assignments", np.array([0]), result.status[one], result.radius[one],
                       result.radius_exact[one], result.steps[one], result.lp_rounds[one], result.witness[one],
                       result.message[one], [result.certificates[k]], result.settings, result.radius_upper[one],
                       {key: value[one] for key, value in result.answers.items()},
                       {0: result.exact[k]} if k in result.exact else {})


def verify_layers(result: CheckResult, layers: Iterable[Derived], kind: str, *, bound: float = BOUND, lower=None,
                  upper=None, eps: float = EPS) -> np.ndarray:
    """Re-check each item's evidence with :func:`argmaxable.verify_certificate` on its own derived layer: item p
    is layer ``result.items[p]``, verified in the box and at the eps given (a result that records others, of
    another kind, or whose items do not index the layers given, is refused with a ValueError). On a layer that
    rounds, its witness-based claims are verified on the layer moved against the item and its certificate-based
    claims on the layer moved with it (:meth:`Derived.bounded`), each part on its own."""
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

    def holds(item: CheckResult, layer: Derived) -> bool:
        def on(part, e):
            return bool(verify_certificate(part, layer.V, e, items=layer.active[None, :], **box)[0])

        if layer.exact():
            return on(item, layer.e)
        return on(witness_part(item), layer.bounded(float(bound), worse=True)) and on(
            certificate_part(item), layer.bounded(float(bound), worse=False))

    return np.array([holds(_item(result, p), layers[int(k)]) for p, k in enumerate(which)], dtype=bool)
