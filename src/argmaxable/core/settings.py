"""The settings of a check as one frozen value, their defaults, and their allowed values declared as data.

The public checks keep their keywords and build a :class:`Settings` from them; building it checks every value
once, where input enters. The detection family's config schema (:mod:`argmaxable.detect.schema`) takes its
defaults and its value rules from here, so the YAML, the schema and the core share one definition.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from argmaxable.core.solvers import SOLVERS

BOUND = 100.0  # box |x_j| <= 100 for softmax categories and top-m sets (002 §4)
ASSIGNMENT_BOUND = 1e4  # box for sigmoid label assignments (thesis §4.2, appendix A.3)
EPS = 1e-8  # Chebyshev radius that counts as a region (thesis §4.2)
PATIENCE = 2500  # braid-reflect steps before the exact LP for categories (002 §4)
SET_PATIENCE = 100  # label assignments and top-m sets: the dual stage proves most before reflection
SOLVER = "highs"
WORKERS = 2  # LPs solved at once


def show(value) -> str:
    """repr of a setting without numpy's type wrapper (np.float64(1.0) -> 1.0)."""
    return repr(value.item() if isinstance(value, np.generic) else value)


def is_real(value) -> bool:
    """An int or a float, numpy's included (not a bool)."""
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def is_count(value) -> bool:
    """An int or a numpy integer (not a bool, not a float that happens to be integral)."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


@dataclass(frozen=True)
class Interval:
    """Allowed values of a numeric setting: finite numbers (integers with ``integer``) above 0, 0 included when
    ``closed`` (scikit-learn's ``Interval(Real, 0, None, closed="left")``)."""

    integer: bool
    closed: bool

    def __call__(self, value) -> bool:
        if not (is_count(value) if self.integer else is_real(value) and np.isfinite(value)):
            return False
        return value >= 0 if self.closed else value > 0

    @property
    def words(self) -> str:
        """The rule as the public checks state it: "a positive number", "a non-negative integer"."""
        return f"a {'non-negative' if self.closed else 'positive'} {'integer' if self.integer else 'number'}"

    @property
    def rule(self) -> tuple[str, Callable[[Any], bool]]:
        """The rule as the config states it (:mod:`argmaxable.rules`): "a number > 0", "an integer >= 1"."""
        if self.integer:
            return f"an integer >= {0 if self.closed else 1}", self
        return f"a number {'>=' if self.closed else '>'} 0", self


@dataclass(frozen=True)
class OneOf:
    """Allowed values of a setting that names one of a few options."""

    options: tuple[str, ...]

    def __call__(self, value) -> bool:
        return isinstance(value, str) and value in self.options

    @property
    def words(self) -> str:
        return f"one of {self.options}"

    @property
    def rule(self) -> tuple[str, Callable[[Any], bool]]:
        return f"one of {', '.join(self.options)}", self


# Allowed values of the settings that have a rule (the box ends are checked against the layer's width, the device
# against what torch sees: :func:`argmaxable.core.box.make_box`, :func:`argmaxable.core.backend.resolve_device`).
ALLOWED = {
    "bound": Interval(integer=False, closed=False),
    "eps": Interval(integer=False, closed=True),
    "patience": Interval(integer=True, closed=True),
    "solver": OneOf(SOLVERS),
    "workers": Interval(integer=True, closed=False),
}


def check_value(name: str, value) -> None:
    """Raise a one-line ValueError naming the setting, its rule and the value when ``value`` breaks the rule."""
    allowed = ALLOWED[name]
    if isinstance(allowed, OneOf):
        if not allowed(value):
            raise ValueError(f"The {name!r} parameter must be {allowed.words}. Got {show(value)} instead.")
    elif allowed.integer:
        if not allowed(value):
            raise ValueError(f"The {name!r} parameter must be {allowed.words}. Got {show(value)} "
                             f"({type(value).__name__}) instead.")
    elif not is_real(value):
        raise ValueError(f"The {name!r} parameter must be a number. Got {show(value)} ({type(value).__name__}).")
    elif not allowed(value):
        raise ValueError(f"The {name!r} parameter must be {allowed.words}. Got {show(value)} instead.")


@dataclass(frozen=True, eq=False)
class Settings:
    """Everything a check needs besides the layer and the items, checked once when built.

    ``bound``, ``lower``, ``upper``: the box (:func:`argmaxable.core.box.make_box`); ``eps``: the radius that
    counts as a region; ``patience``: reflection steps before the exact LP; ``solver``: the LP backend;
    ``workers``: LPs at once; ``progress``: progress bars; ``exact_radius``: every LP to its optimum;
    ``device``: where the products run ("auto", "cpu", "cuda[:k]" or None); ``regions``: the exact stage also
    decides whether the region of each item not shown eps-argmaxable is non-empty (:mod:`argmaxable.core.exact`);
    ``lp_rounds``: the most constraint-generation rounds of each LP (None: no limit).
    """

    bound: float = BOUND
    lower: Any = None
    upper: Any = None
    eps: float = EPS
    patience: int = PATIENCE
    solver: str = SOLVER
    workers: int = WORKERS
    progress: bool = False
    exact_radius: bool = False
    device: str | None = "auto"
    regions: bool = False
    lp_rounds: int | None = None

    def __post_init__(self):
        for name in ALLOWED:  # in the order declared: the first broken rule is the one reported
            check_value(name, getattr(self, name))
        if self.lp_rounds is not None and not (is_count(self.lp_rounds) and self.lp_rounds >= 1):
            raise ValueError(f"The 'lp_rounds' parameter must be a positive integer or None. Got "
                             f"{show(self.lp_rounds)} ({type(self.lp_rounds).__name__}) instead.")

    def record(self, box: tuple[np.ndarray, np.ndarray]) -> dict:
        """The settings a result records (its sidecars' provenance), with the box ``box`` the check ran in."""
        return {"bound": float(self.bound), "lower": box[0].tolist(), "upper": box[1].tolist(),
                "eps": float(self.eps), "patience": int(self.patience), "solver": self.solver,
                "exact_radius": bool(self.exact_radius), **({"regions": True} if self.regions else {}),
                **({"lp_rounds": int(self.lp_rounds)} if self.lp_rounds is not None else {})}

    def lp(self, thresholds) -> LPSettings:
        """The exact stage's LP settings, deciding ``radius > threshold`` for each of ``thresholds``."""
        return LPSettings(self.eps, self.solver, self.exact_radius, tuple(thresholds), max_rounds=self.lp_rounds)


@dataclass(frozen=True)
class LPSettings:
    """What the Chebyshev LP (:func:`argmaxable.core.chebyshev`) needs beyond its rows, box and start.

    ``exact_radius``: run constraint generation to the optimum (else stop once every threshold is decided);
    ``thresholds``: the radii whose question ``radius > threshold`` must be decided (empty: eps alone);
    ``initial_rows``, ``rows_per_round``: working-set sizes (default 48, and max(d+1, 48) but at most 128);
    ``max_rounds``: stop after this many solves (None: no limit), keeping the certified bounds reached.
    """

    eps: float = EPS
    solver: str = SOLVER
    exact_radius: bool = True
    thresholds: tuple[float, ...] = ()
    initial_rows: int | None = None
    rows_per_round: int | None = None
    max_rounds: int | None = None

    def __post_init__(self):
        check_value("eps", self.eps)
        check_value("solver", self.solver)
