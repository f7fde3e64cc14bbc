"""The ledger of a check: per item, what is proven, by which stage, and with which evidence.

Stages (:mod:`argmaxable.core.stages`) write their proofs here and nowhere else, through the methods below
(tests/test_core_ledger.py holds the core to that: no other module assigns to a ledger's fields): a witness (a
point where the item wins by more than eps) proves "argmaxable", a dual certificate (weights whose bound puts the
radius at or below eps) proves "unargmaxable". Where two proofs of opposite kinds meet, the item is undecided:
that is numerical trouble, never a verdict. Bounds on the radius only tighten: each stage's certified bound is
kept where it is the best. The :class:`~argmaxable.core.result.CheckResult` is built once from the ledger, complete.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from argmaxable.core.result import ARGMAXABLE, UNARGMAXABLE, UNDECIDED, CheckResult

NO_CERTIFICATE = (np.zeros(0, dtype=np.int64), np.zeros(0))


class Ledger:
    """Per-item record of a check over ``items`` (the system's item indices).

    Attributes
    ----------
    status, radius, lower, upper, radius_exact, steps, lp_rounds, message, certificates
        As in :class:`~argmaxable.core.result.CheckResult`; ``lower`` and ``upper`` are the certified bounds on
        the radius (NaN: none), ``status`` is "undecided" until a stage proves the item.
    witness : ndarray (k, d) or None
        Points where the items win; made by the first stage that finds points (in its own dtype).
    stage : ndarray of str
        The stage whose proof decided each item ("" while none has).
    starts : dict
        Position -> :class:`~argmaxable.core.chebyshev.WarmStart`: where the exact LP starts, which rows seed its
        first working set (for an item it leaves undecided: its best point and certificate's rows, where the
        exact stage starts).
    exact : dict
        Position -> :class:`~argmaxable.core.result.ExactRecord`: the rational evidence of the exact stage.
    settings : dict
        What the result records about the run (the settings, then the numeric path the stages took).
    """

    def __init__(self, items: np.ndarray, *, kind: str, eps: float, threshold: float | None, settings: dict):
        k = len(items)
        self.items, self.kind, self.eps, self.threshold, self.settings = items, kind, eps, threshold, settings
        self.status = np.full(k, UNDECIDED, dtype=object)
        self.radius = np.full(k, np.nan)  # certified lower bound where one was measured
        self.lower = np.full(k, np.nan)
        self.upper = np.full(k, np.nan)
        self.radius_exact = np.zeros(k, dtype=bool)
        self.steps = np.full(k, -1, dtype=np.int64)
        self.lp_rounds = np.zeros(k, dtype=np.int64)
        self.message = np.full(k, "", dtype=object)
        self.certificates = [NO_CERTIFICATE] * k
        self.stage = np.full(k, "", dtype=object)
        self.witness: np.ndarray | None = None
        self.starts: dict = {}
        self.exact: dict = {}
        self.paths = None  # reflection's steps to its witnesses (WitnessPaths), for compact evidence files

    @property
    def thresholds(self) -> list[float]:
        """The radii whose question ``radius > threshold`` the check answers: eps, and the second one if asked."""
        return [self.eps] if self.threshold is None else [self.eps, self.threshold]

    def new_witnesses(self, d: int, dtype, filled: bool) -> np.ndarray:
        """The witness array, made by the first stage that finds points, in its dtype: uninitialised where that
        stage writes every row (``filled``), else NaN (no point) until one is written."""
        k = len(self.items)
        self.witness = np.empty((k, d), dtype) if filled else np.full((k, d), np.nan, dtype)
        return self.witness

    def reflected(self, pos: np.ndarray, steps: np.ndarray, x: np.ndarray | None = None, paths=None) -> None:
        """Reflection's steps for items ``pos`` (-1: not reflected), unless written in place its iterates, and the
        steps that made its witnesses (:class:`~argmaxable.witness_paths.WitnessPaths` over ``pos``), kept for the
        evidence file (a later stage's point for one of them: the writer finds it changed)."""
        self.steps[pos] = steps
        if x is not None:
            self.witness[pos] = x
        if paths is not None:
            self.paths = replace(paths, positions=np.asarray(pos)[paths.positions])

    def _put_witness(self, pos: int, x) -> None:
        """A float64 point for item ``pos`` (an LP's or the exact stage's): the witnesses turn float64 when the
        first such point comes, so that rounding never loses one."""
        if self.witness.dtype != np.float64:
            self.witness = self.witness.astype(np.float64)
        self.witness[pos] = x

    def moved(self, pos, X) -> None:
        """The witnesses of items ``pos`` replaced by the points ``X`` (better ones for the same verdicts)."""
        self.witness[pos] = X

    def prove(self, pos, stage: str, lower=None, x=None) -> None:
        """Items ``pos`` are argmaxable by their witnesses (in :attr:`witness`, or the float64 point ``x`` of one
        item), whose certified margins are at least ``lower``; against a standing certificate, an item is
        undecided."""
        if x is not None:
            self._put_witness(pos, x)
        pos = np.atleast_1d(pos)
        refuted = self.status[pos] == UNARGMAXABLE
        for p in pos[refuted]:
            self._disagree(int(p), f"a certificate bounding the radius by {self.upper[p]:.3g} <= eps and a witness "
                                   f"from the {stage} stage")
        pos = pos[~refuted]
        self.status[pos], self.stage[pos] = ARGMAXABLE, stage
        if lower is not None:
            self.lower[pos] = lower

    def measured(self, pos, radius) -> None:
        """Certified lower bounds on the radii of items ``pos`` measured on their witnesses (reflection's margins)."""
        self.radius[pos] = radius

    def unwitnessed(self, pos) -> None:
        """Items ``pos`` have no witness (a stage's last iterate that did not win is kept only as a start point)."""
        self.witness[pos] = np.nan

    def record(self, settings: dict) -> None:
        """What the result records about the run, added to :attr:`settings` (the numeric path a stage took)."""
        self.settings.update(settings)

    def start_from(self, starts: dict) -> None:
        """Where the exact LP (and, for an item it leaves undecided, the exact stage) starts: position ->
        :class:`~argmaxable.core.chebyshev.WarmStart`, added to those already set."""
        self.starts.update(starts)

    def lp_run(self, pos: int, converged: bool, rounds: int, message: str) -> None:
        """What the exact LP did for item ``pos``: whether it reached the optimum, its rounds, its message."""
        self.radius_exact[pos], self.lp_rounds[pos], self.message[pos] = converged, rounds, message

    def note(self, pos: int, message: str) -> None:
        """Item ``pos``'s message, replaced."""
        self.message[pos] = message

    def upper_by(self, pos: int, certificate) -> None:
        """The dual weights behind an argmaxable item's upper bound on its radius (its "no" at a threshold it
        bounds); its verdict stands on its witness."""
        self.certificates[pos] = certificate

    def refute(self, pos: int, stage: str, certificate, upper: float, message: str | None = None,
               source: str = "a dual bound") -> bool:
        """Item ``pos`` is unargmaxable by ``certificate`` (rows, weights), whose bound ``upper`` puts its radius at
        or below eps; against a standing witness it is undecided. Returns whether the proof stands."""
        self.upper[pos] = np.fmin(self.upper[pos], upper)
        if self.status[pos] == ARGMAXABLE:
            self._disagree(pos, f"a witness with margin > {self.eps:g} and {source} {upper:.3g} <= eps")
            return False
        self.status[pos], self.stage[pos], self.certificates[pos] = UNARGMAXABLE, stage, certificate
        if message is not None:
            self.message[pos] = message
        return True

    def settle(self, pos: int, stage: str, out, rows: np.ndarray) -> None:
        """Item ``pos`` as the exact stage (:mod:`~argmaxable.core.exact`) settled it (a ``Settled``, its rows named
        ``rows``). An undecided item takes its verdict, bounds and evidence (the rationals rounded into the float
        witness and certificate); a decided one keeps its own (bounds included) and gains the region, unless the
        exact verdict contradicts it (then it is undecided: numerical trouble)."""
        if self.status[pos] != UNDECIDED:
            if out.status not in (UNDECIDED, self.status[pos]):
                self._disagree(pos, f"the {self.stage[pos]} stage's proof and the exact stage's ({out.message})")
                return
            if out.region:
                self.exact[pos] = out.record(rows, "region")
                self.message[pos] = "; ".join(filter(None, [self.message[pos], f"exact stage: {out.inside}"]))
            return
        if out.status != UNDECIDED:  # its witness and weights replace the float stages' (which may contradict
            self.lower[pos] = self.upper[pos] = self.radius[pos] = np.nan  # each other): so do its bounds
        self.bound(pos, out.lower, out.upper)
        self.message[pos] = out.message
        if out.status == UNDECIDED:
            if out.region:
                self.exact[pos] = out.record(rows, "region")
            return
        self.exact[pos] = out.record(rows, "radius")
        self.status[pos], self.stage[pos], self.radius_exact[pos] = out.status, stage, True
        self.certificates[pos] = (rows, out.float_weights())
        if out.status == ARGMAXABLE:
            self._put_witness(pos, [float(v) for v in out.x])

    def _disagree(self, pos: int, what: str) -> None:
        """Two stages' proofs rule each other out: numerical trouble, never a verdict."""
        self.status[pos] = UNDECIDED
        self.message[pos] = f"stages disagree: {what} (numerical trouble)"

    def bound(self, pos: int, lower: float, upper: float) -> None:
        """Certified bounds on item ``pos``'s radius: the best of each is kept; ``radius`` is the best lower bound
        (-inf for a row that no point satisfies, a duplicate)."""
        self.lower[pos] = np.fmax(self.lower[pos], lower)
        self.upper[pos] = np.fmin(self.upper[pos], upper)
        if np.isfinite(lower) and (np.isnan(self.radius[pos]) or lower > self.radius[pos]):
            self.radius[pos] = lower
        elif upper == -np.inf:
            self.radius[pos] = -np.inf

    def withdraw(self, bad: np.ndarray, message: str) -> None:
        """Items ``bad`` whose evidence failed an independent check: undecided, with no witness and no radius."""
        self.status[bad], self.message[bad] = UNDECIDED, message
        self.witness[bad] = self.radius[bad] = self.upper[bad] = np.nan
        for pos in np.flatnonzero(bad):
            self.exact.pop(int(pos), None)

    def spread(self, live: np.ndarray, keep: np.ndarray, items: np.ndarray) -> Ledger:
        """This ledger's entries placed at positions ``live`` of a ledger over ``items``, their certificates' rows
        renamed by ``keep`` (the system's rows in the layer); the other positions are left open for the caller
        (items left out of the system: masked categories)."""
        out = Ledger(items, kind=self.kind, eps=self.eps, threshold=self.threshold, settings=self.settings)
        for name in ("status", "radius", "lower", "upper", "radius_exact", "steps", "lp_rounds", "message", "stage"):
            getattr(out, name)[live] = getattr(self, name)
        out.witness = np.full((len(items), self.witness.shape[1]), np.nan, dtype=self.witness.dtype)
        out.witness[live] = self.witness
        at = np.flatnonzero(live)
        for p, (rows, weights) in zip(at, self.certificates, strict=True):
            out.certificates[p] = (keep[np.asarray(rows, dtype=np.int64)], weights)
        out.exact = {int(at[pos]): rec._replace(rows=tuple(int(i) for i in keep[np.asarray(rec.rows, dtype=np.int64)]))
                     for pos, rec in self.exact.items()}
        return out

    def result(self) -> CheckResult:
        """The check's result: every array aligned with the items, the answers derived from the bounds."""
        answers = {name: answers_from_bounds(self.status, self.lower, self.upper, thr, self.eps)
                   for name, thr in zip(("eps", "1"), self.thresholds, strict=False)}
        with np.errstate(invalid="ignore"):
            upper_shown = np.where(np.isfinite(self.upper) | (self.upper == -np.inf), self.upper, np.nan)
        return CheckResult(self.kind, np.asarray(self.items), self.status.astype(str), self.radius,
                           self.radius_exact, self.steps, self.lp_rounds, self.witness, self.message.astype(str),
                           self.certificates, self.settings, radius_upper=upper_shown, answers=answers,
                           exact=dict(self.exact), paths=self.paths)


def answers_from_bounds(status, lower, upper, threshold, eps) -> np.ndarray:
    """"yes" / "no" / "undecided" for radius > threshold, from the certified bounds (and, at eps, the status)."""
    out = np.full(len(status), "undecided", dtype=object)
    with np.errstate(invalid="ignore"):
        out[lower > threshold] = "yes"
        out[upper <= threshold] = "no"
    if threshold == eps:  # the verdict itself answers eps: it is never contradicted by a bound (see above)
        out[status == ARGMAXABLE], out[status == UNARGMAXABLE] = "yes", "no"
        out[status == UNDECIDED] = "undecided"
    else:
        out[status == UNDECIDED] = "undecided"
        out[(status == UNARGMAXABLE) & (threshold >= eps)] = "no"
    return out.astype(str)
