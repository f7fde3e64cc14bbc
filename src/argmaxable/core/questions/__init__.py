"""The questions the core answers, one module each, all of one shape (each is a halfspace system per item,
answered by the one engine):

- its public check, ``check_<question>(W, items, b=None, **settings) -> CheckResult``, which validates the items,
  builds the system (a :mod:`~argmaxable.core.systems` adapter, or a derived layer checked as label assignments,
  :mod:`argmaxable.core.derived`) and runs it through :mod:`argmaxable.core.check`;
- ``QUESTION``, its declaration (:class:`Question`): the ``kind`` its results carry, its default box, and the form
  in which :func:`argmaxable.verify_certificate` re-checks its evidence.

A module here is a question: :data:`QUESTIONS` is read from this package's modules, and a result's ``kind`` must be
one of theirs (:data:`KINDS`). Adding a question is adding a module (and its tests). The verifier keeps its own
arithmetic and its own list of the evidence forms it can check (it shares no code with the core); a test holds
every question's ``evidence`` and default box to that list.
"""

from __future__ import annotations

import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module


@dataclass(frozen=True)
class Question:
    """A question's declaration (module doc)."""

    kind: str  # ``CheckResult.kind`` of its results
    check: Callable  # its public check
    bound: float  # its default box, |x_j| <= bound
    evidence: str  # how the verifier re-checks an item: "categories", "assignments" (of the item's own derived
    # layer, for rankings and prescribed probabilities) or "top-m sets" (assignments of [W, -1] over (x, tau))


def declared() -> dict[str, Question]:
    """The questions of this package's modules by kind, in module order; a module without a ``QUESTION``, or two
    modules declaring one kind, is an error of the package, not of a user."""
    out = {}
    for module in pkgutil.iter_modules(__path__):
        question = import_module(f"{__name__}.{module.name}").QUESTION
        if question.kind in out:
            raise RuntimeError(f"argmaxable.core.questions.{module.name} declares the kind {question.kind!r} of "
                               "another module")
        out[question.kind] = question
    return out


QUESTIONS: dict[str, Question] = declared()
KINDS = tuple(QUESTIONS)
