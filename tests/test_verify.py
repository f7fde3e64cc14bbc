"""The independent verifier (issue 12): genuine evidence passes, every forged case of the issue fails, settings
come from the caller, and it shares no code with the stages."""

from __future__ import annotations

import copy
import inspect

import numpy as np
import pytest

import argmaxable as am
from argmaxable import verify as verify_module
from argmaxable import verify_exact
from argmaxable.cli import main
from argmaxable.core import CheckResult

TOY = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0], [0.1, 0.1]])  # 002 Fig. 1: c4 lies inside the triangle


@pytest.fixture(scope="module")
def toy_result():
    return am.check_categories(TOY, workers=1)


def test_shares_no_code_with_the_stages():
    """The verifier's modules import nothing of the project but each other: the rational checks of the exact stage's
    evidence (verify_exact) are the verifier's own too."""
    for module, allowed in ((verify_module, {"from argmaxable.verify_exact import with_exact"}), (verify_exact, set())):
        imports = [line.strip() for line in inspect.getsource(module).splitlines()
                   if line.lstrip().startswith(("import ", "from "))]
        assert imports and not [line for line in imports if "argmaxable" in line and line not in allowed]


def test_forged_certificates_fail(toy_result):
    r = copy.deepcopy(toy_result)
    r.status[0] = "unargmaxable"
    r.certificates[0] = (np.array([0]), np.array([1.0]))  # the item's own row: 0.x + 0 < 0 "cannot hold"
    assert am.verify_certificate(r, TOY).tolist() == [False, True, True, True]
    r.certificates[0] = (np.array([1, 2]), np.array([1.0, -0.5]))  # a negative weight
    assert not am.verify_certificate(r, TOY)[0]
    r.certificates[0] = (np.array([1, 2]), np.array([0.5, 0.5]))  # honest form, but category 0 is argmaxable
    assert not am.verify_certificate(r, TOY)[0]
    r = copy.deepcopy(toy_result)
    r.status[1], r.status[2] = "yes", "ARGMAXABLE"  # unknown statuses
    assert am.verify_certificate(r, TOY).tolist() == [True, False, False, True]
    r = copy.deepcopy(toy_result)
    r.status[3] = "argmaxable"  # an unargmaxable class with some other class's witness
    r.witness[3] = r.witness[0]
    assert not am.verify_certificate(r, TOY)[3]


def test_settings_come_from_the_caller(toy_result):
    r = copy.deepcopy(toy_result)
    r.settings["eps"] = -1.0  # would let any witness pass
    with pytest.raises(ValueError, match="eps must be a non-negative number"):
        am.verify_certificate(r, TOY)
    with pytest.raises(ValueError, match=r"records eps=-1\.0 but eps=1e-08 was given"):
        am.verify_certificate(r, TOY, eps=1e-8)
    with pytest.raises(ValueError, match=r"records bound=100\.0 but bound=50\.0"):
        am.verify_certificate(toy_result, TOY, bound=50.0)
    r = copy.deepcopy(toy_result)
    r.settings["lower"] = [0.0, 0.0]  # the ReLU box: category 2's witness (x1 + x2 < 0) leaves it
    assert am.verify_certificate(r, TOY).tolist() == [True, True, False, True]


def test_witness_outside_the_box_fails(toy_result):
    r = copy.deepcopy(toy_result)
    r.witness[0] = r.witness[0] / np.abs(r.witness[0]).max() * 100.5  # past |x_j| <= 100, still winning
    assert not am.verify_certificate(r, TOY)[0]


def test_assignments_and_top_m():
    W = np.random.default_rng(0).normal(size=(12, 3))
    Y = np.random.default_rng(1).random((40, 12)) < 0.5
    res = am.check_assignments(W, Y, workers=1)
    assert res.counts()["unargmaxable"] > 0 and res.counts()["argmaxable"] > 0
    assert am.verify_certificate(res, W, items=Y).all()
    flipped = Y.copy()
    flipped[:, 0] = ~flipped[:, 0]  # the same evidence against other label sets
    assert not am.verify_certificate(res, W, items=flipped).all()
    with pytest.raises(ValueError, match="needs its label sets"):
        am.verify_certificate(res, W)
    sets = [[0, 1], [3], [2, 3], [0, 1, 2]]
    top = am.check_top_m(TOY, sets, workers=1)
    assert top.status.tolist() == ["argmaxable", "unargmaxable", "argmaxable", "unargmaxable"]  # 3 is inside
    assert am.verify_certificate(top, TOY, items=sets).all()
    assert not am.verify_certificate(top, TOY, items=[[3], [0, 1], [2, 3], [0, 1, 2]])[:2].any()


def test_many_witnesses_through_the_blocked_products():
    """Above 256 items the witnesses go through low-precision products with a rounding bound; moving witnesses
    between items must still be caught."""
    rng = np.random.default_rng(5)
    W, b = rng.uniform(-1, 1, (600, 6)), rng.uniform(-1, 1, 600)
    res = am.check_categories(W, b=b, workers=1, patience=20)
    ok = am.verify_certificate(res, W, b)
    assert ok.all() and res.counts()["unargmaxable"] > 0
    arg = np.flatnonzero(res.status == "argmaxable")
    r = copy.deepcopy(res)
    r.witness[arg] = r.witness[np.roll(arg, 1)]
    assert not am.verify_certificate(r, W, b)[arg].any()


def test_save_load_and_cli_verify(tmp_path, toy_result, capsys):
    path = tmp_path / "r.npz"
    toy_result.save(path)
    back = CheckResult.load(path)
    assert back.status.tolist() == toy_result.status.tolist() and back.settings == toy_result.settings
    assert am.verify_certificate(back, TOY).all()
    np.savez(tmp_path / "toy.npz", W=TOY)
    assert main(["verify", str(path), str(tmp_path / "toy.npz")]) == 0
    assert "4 of 4 verdicts verified" in capsys.readouterr().out
    back.status[0] = "unargmaxable"
    back.certificates[0] = (np.array([0]), np.array([1.0]))
    back.save(path)
    assert main(["verify", str(path), str(tmp_path / "toy.npz")]) == 1
    assert "evidence fails for 1 items: 0" in capsys.readouterr().out
    out = tmp_path / "t.parquet"
    assert main(["check", "softmax", str(tmp_path / "toy.npz"), "--workers", "1", "--out", str(out)]) == 0
    assert main(["verify", str(out), str(tmp_path / "toy.npz")]) == 0


# Issue 22: certificates whose weights overflow, and witnesses at extreme settings.

def _all_unargmaxable(res, certificates):
    forged = copy.deepcopy(res)
    forged.status[:] = "unargmaxable"
    forged.certificates = certificates
    return forged


def test_certificates_whose_weights_overflow_are_refused(toy_result):
    huge = [(np.array([i for i in range(4) if i != t][:2]), np.array([9e307, 9e307])) for t in range(4)]
    assert not am.verify_certificate(_all_unargmaxable(toy_result, huge), TOY)[:3].any()
    # the same certificate scaled down is honest where it was honest: scaling never changes a verdict
    honest = copy.deepcopy(toy_result)
    rows, weights = honest.certificates[3]
    honest.certificates[3] = (rows, weights * 1e300)
    assert am.verify_certificate(honest, TOY).all()


def test_label_and_top_m_certificates_whose_weights_overflow_are_refused():
    W = np.random.default_rng(0).normal(size=(6, 3))
    sets = [[0], [1, 2], [3, 4, 5]]
    for check in (am.check_assignments, am.check_top_m):
        res = check(W, sets, workers=1)
        assert (res.status == "argmaxable").all()
        forged = _all_unargmaxable(res, [(np.array([0, 1]), np.full(2, 1e308))] * 3)
        assert not am.verify_certificate(forged, W, items=sets).any()


def test_a_forged_witness_needing_subnormal_products_is_refused():
    W = np.array([[0.0, 0.0], [1.0, 5e-324], [-1.0, 5e-324], [0.0, -1.0]])
    b = np.array([0.0, -1e-16, -1e-16, 5e307])
    res = am.check_categories(W, b=b, eps=0.0, bound=1e308, workers=1)
    forged = copy.deepcopy(res)
    forged.status[0] = "argmaxable"
    forged.witness[0] = (0.0, 6e307)  # (w_1 - w_0).x + b_1 - b_0 = 3e-16 - 1e-16 > 0 in exact arithmetic
    assert not am.verify_certificate(forged, W, b)[0]


@pytest.mark.parametrize("bound", [1e-300, 1e-310])
def test_valid_witnesses_in_a_tiny_box_are_accepted(bound):
    W = np.random.default_rng(1).normal(size=(6, 3)) * 1e-305
    res = am.check_categories(W, bound=bound, eps=0.0, workers=1)
    assert (res.status == "argmaxable").sum() >= 3
    assert am.verify_certificate(res, W).all()


def test_near_duplicate_witnesses_are_checked_row_by_row():
    """Above one block of rows, witnesses the fast pass cannot settle go through the row-by-row tiers. On the
    sphere with pairs of rows 1e-5 .. 1e-10 apart, x = w_t is accepted exactly when exact rational arithmetic on
    the stored floats says it beats its partner by more than eps (every other row is far)."""
    from fractions import Fraction

    rng = np.random.default_rng(7)
    W = rng.normal(size=(5000, 4))
    W /= np.linalg.norm(W, axis=1, keepdims=True)
    for k, gap in enumerate((1e-5, 1e-6, 1e-9, 1e-10)):
        u = rng.normal(size=4)
        u -= (u @ W[2 * k]) * W[2 * k]
        W[2 * k + 1] = W[2 * k] + gap * u / np.linalg.norm(u)
        W[2 * k + 1] /= np.linalg.norm(W[2 * k + 1])
    expected = []
    for t in range(8):
        wt, wp = ([Fraction(float(v)) for v in W[i]] for i in (t, t ^ 1))
        a = [p - q for p, q in zip(wp, wt, strict=True)]
        margin = -sum(p * q for p, q in zip(a, wt, strict=True))  # l_t - l_partner at x = w_t
        expected.append(margin > 0 and margin**2 > Fraction(1e-8) ** 2 * sum(p * p for p in a))
    assert expected[:4] == [True] * 4 and not all(expected[4:])  # the rounding of 1 decides the closest pairs
    res = am.check_categories(W, workers=1)
    r = copy.deepcopy(res)
    r.status[:] = "argmaxable"
    r.witness[:8] = W[:8]
    ok = am.verify_certificate(r, W)
    assert ok[:8].tolist() == expected
    assert ok[8:].all()
