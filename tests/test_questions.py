"""The questions of the core: one module each (argmaxable.core.questions), a closed set of result kinds, and each
declaration held to what the independent verifier checks."""

import dataclasses
import inspect
import pkgutil
import sys

import numpy as np
import pytest

import argmaxable as am
from argmaxable import core, verify
from argmaxable.core import questions
from argmaxable.core.questions import KINDS, QUESTIONS
from argmaxable.core.result import CheckResult

W = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0], [0.1, 0.1]])


def test_every_module_is_one_question_and_the_kinds_are_theirs():
    modules = [m.name for m in pkgutil.iter_modules(questions.__path__)]
    assert modules == ["assignments", "categories", "prescribed", "rankings", "top_m"]
    assert KINDS == ("assignments", "categories", "prescribed probabilities", "top-k rankings", "top-m sets")
    for name, question in zip(modules, QUESTIONS.values(), strict=True):
        assert question.check.__module__ == f"argmaxable.core.questions.{name}"


def test_each_declaration_matches_the_verifier_and_its_check():
    """The evidence form is one the verifier checks; where the kind is that form, the verifier's default box is the
    question's; the check's own default box (a keyword, or the one it sets) is the declared one."""
    for kind, question in QUESTIONS.items():
        assert question.evidence in verify.FORMS
        if kind in verify.FORMS:
            assert kind == question.evidence and verify.DEFAULT_BOUND[kind] == question.bound
        bound = inspect.signature(question.check).parameters.get("bound")
        if bound is not None:
            assert bound.default == question.bound
    res = {"top-k rankings": am.core.check_rankings(W, [[0, 3], [3]]),
           "prescribed probabilities": am.core.check_prescribed(W, [[0, 1]], [[0.5, 0.5]])}
    for kind, r in res.items():
        assert r.kind == kind and r.settings["bound"] == QUESTIONS[kind].bound


def test_a_result_kind_outside_the_questions_is_refused(tmp_path):
    good = am.check_categories(W)
    with pytest.raises(ValueError, match=r"unknown kind 'category'.*module of argmaxable\.core\.questions"):
        CheckResult(**{**good.__dict__, "kind": "category"})
    path = tmp_path / "r.npz"
    good.save(path)
    with np.load(path) as z:
        members = {k: z[k] for k in z.files}
    np.savez(path, **{**members, "kind": np.array("rankings")})
    with pytest.raises(ValueError, match=r"r\.npz: not a result of a known question \(kind 'rankings'; the kinds"):
        CheckResult.load(path)


def test_the_verifier_refuses_a_kind_it_has_no_arithmetic_for():
    ranked = am.core.check_rankings(W, [[0, 3]])
    with pytest.raises(ValueError, match=r"kind 'top-k rankings' is not checked here.*verify_rankings"):
        am.verify_certificate(ranked, W)


def test_adding_a_question_is_adding_a_module(tmp_path, monkeypatch):
    """A module dropped into the package (here through its search path) is a new kind, with nothing else touched."""
    (tmp_path / "halfspace.py").write_text(
        "from argmaxable.core.questions import Question\n"
        "from argmaxable.core.questions.categories import check_categories\n\n\n"
        "def check_halfspace(W, items=None, b=None, **settings):\n"
        "    return check_categories(W, items, b, **settings)\n\n\n"
        "QUESTION = Question(kind='halfspace', check=check_halfspace, bound=100.0, evidence='categories')\n")
    monkeypatch.setattr(questions, "__path__", [*questions.__path__, str(tmp_path)])
    try:
        found = questions.declared()
        assert set(found) == {*KINDS, "halfspace"}
        assert found["halfspace"].check(W).status.tolist() == am.check_categories(W).status.tolist()
    finally:
        sys.modules.pop("argmaxable.core.questions.halfspace", None)


def _rounding_ranking():
    """Category 1 of w = (-1, 2^-60, 1), b = (1e12, 0, -1e12) wins on (1e12 / (1 + 2^-60), 1e12 / (1 - 2^-60)),
    an interval of half-width about 1e12 2^-60 = 8.7e-7 (87 eps), in the box |x| <= 2e12. float64 rounds the
    differences w_1 - w_0 and w_1 - w_2 to 1 and -1, whose interval (1e12, 1e12) is empty."""
    return np.array([[-1.0], [2.0**-60], [1.0]]), np.array([1e12, 0.0, -1e12]), 2e12


def test_top1_ranking_on_rows_whose_differences_round_is_not_called_unargmaxable():
    from fractions import Fraction

    from scipy.optimize import linprog

    W, b, bound = _rounding_ranking()
    left = Fraction(10**12) / (1 + Fraction(2) ** -60)
    right = Fraction(10**12) / (1 - Fraction(2) ** -60)
    assert (right - left) / 2 > 80 * Fraction(1e-8)  # the exact radius: argmaxable
    cat = am.check_categories(W, [1], b, bound=bound)
    assert cat.status[0] == "argmaxable"
    res = core.check_rankings(W, [[1]], b, bound=bound)
    assert res.status[0] != "unargmaxable"  # rounded rows said unargmaxable, and that verified
    assert core.verify_rankings(res, W, [[1]], b, bound=bound).all()
    # the rounded layer's forged verdict: its certificate holds on the rounded rows only
    V = np.array([[1.0], [-1.0]])
    e = np.array([1e12 - 0.0, 0.0 + 1e12]) * np.array([-1.0, 1.0])
    lp = linprog([0.0, -1.0], A_ub=np.column_stack([-V, np.abs(V)]), b_ub=e, bounds=[(-bound, bound), (None, 1)],
                 method="highs")
    assert lp.status == 0 and -lp.fun <= 0  # scipy: the rounded rows leave no ball
    rounded = am.check_assignments(V, [[0, 1]], -e, bound=bound)
    assert rounded.status[0] == "unargmaxable"
    forged = dataclasses.replace(res, status=rounded.status, witness=rounded.witness, radius=rounded.radius,
                                 radius_upper=rounded.radius_upper, certificates=rounded.certificates,
                                 answers=rounded.answers, exact={})
    assert not core.verify_rankings(forged, W, [[1]], b, bound=bound).any()


def test_rankings_of_exact_differences_keep_their_verdicts_and_their_exact_records():
    """The parts' exact records reach the result: a verdict the exact stage decided verifies (it failed without
    them)."""
    beta = np.nextafter(1e-8, 1.0)  # the interval |x| < beta: radius eps and one ulp, exact differences
    W, b = np.array([[-1.0], [0.0], [1.0]]), np.array([0.0, beta, 0.0])
    cat = am.check_categories(W, [1], b, workers=1)
    res = core.check_rankings(W, [[1]], b, workers=1)
    assert 0 in cat.exact and 0 in res.exact
    assert res.status[0] == cat.status[0] == "argmaxable" and res.exact[0].decided == "radius"
    assert core.verify_rankings(res, W, [[1]], b).all()


def test_prescribed_probabilities_verify_on_their_bounded_layers():
    W = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0], [0.1, 0.1]])
    res = core.check_prescribed(W, [[0, 1], [3]], [[0.5, 0.5], [1.0]])
    assert res.status.tolist() == ["argmaxable", "unargmaxable"]
    assert core.verify_prescribed(res, W, [[0, 1], [3]], [[0.5, 0.5], [1.0]]).all()
