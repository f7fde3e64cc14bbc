"""The exact stage: items the float LP cannot decide, settled in rational arithmetic, against oracles
that are not its code path (Fraction arithmetic on the closed-form radius, scipy's LP), and forged rational
evidence refused by the verifier."""

from __future__ import annotations

import copy
import re
from fractions import Fraction
from math import isqrt
from pathlib import Path

import numpy as np
import pytest

import argmaxable as am
from argmaxable.core import CheckResult, chebyshev, exact
from argmaxable.core.exact import _LP, MAX_COLUMNS, _BallRun, _BallSimplex, _next_basis, _pivot, settle

EPS = 1e-8


def slab(u: float, low: float = 0.0):
    """Label 0 on, label 1 off for W = [[1, 1], [1, 1]], b = [-low, -u]: the slab low < x1 + x2 < u, whose radius
    is (u - low) / (2 sqrt 2) (rows of norm sqrt 2: irrational)."""
    return np.array([[1.0, 1.0], [1.0, 1.0]]), np.array([-low, -u]), [[0]]


def slab_truth(u: float, low: float = 0.0, eps: float = EPS) -> bool:
    """radius > eps, in Fractions: (u - low)^2 > 8 eps^2."""
    return (Fraction(u) - Fraction(low)) ** 2 > 8 * Fraction(eps) ** 2


def peer_layer() -> tuple[np.ndarray, list]:
    """The reference implementation's own numerical-issues case (its tests/test_numerical_issues.py), rebuilt from
    its facts: a Vandermonde basis of degree 10 on 1000 points of [-t, t], t^11 = 1e4, orthonormalised by QR,
    beside 5 columns uniform in [-1, 1] (numpy's legacy seed 11); the assignment with these 10 labels on, in the
    box |x_j| <= 1e5. Its authors found no region for it and believed one too small to detect exists."""
    rng = np.random.RandomState(11)
    t = np.linspace(-(1e4 ** (1 / 11)), 1e4 ** (1 / 11), 1000)
    Q, _ = np.linalg.qr(np.vander(t, 11, increasing=True))
    return np.hstack([Q, rng.uniform(-1, 1, (1000, 5))]), [[0, 2, 5, 10, 13, 18, 23, 25, 32, 45]]


@pytest.mark.parametrize("rel", [1e-9, 1e-12, -1e-12, -1e-9])
def test_slabs_the_float_lp_cannot_decide(rel):
    u = 2 * np.sqrt(2) * EPS * (1 + rel)
    W, b, items = slab(u)
    assert chebyshev(W * [[-1], [1]], b * [-1, 1], 1e4).status == "undecided"  # the float LP alone: a_i = -s_i w_i
    res = am.check_assignments(W, items, b)
    assert res.status[0] == ("argmaxable" if slab_truth(u) else "unargmaxable")
    assert res.exact[0].decided == "radius" and res.exact[0].region == "yes"
    assert res.radius[0] <= u / (2 * np.sqrt(2)) <= res.radius_upper[0]
    assert am.verify_certificate(res, W, b, items=items).all()


@pytest.mark.parametrize(("eps_hex", "u_hex"), [("0x1.0000002be1000p-27", "0x1.6a09e6a601993p-26"),
                                                ("0x1.0000022b2c000p-27", "0x1.6a09e979156d0p-26")])
def test_a_radius_within_2_to_the_64_of_eps_takes_the_second_pass(eps_hex, u_hex):
    """Float pairs found by a search in 80-digit decimals: the slab's radius differs from eps by about 1e-22
    relative, beyond the first pass's norms (2^-64): the 256-bit pass decides, as Fractions say."""
    eps, u = float.fromhex(eps_hex), float.fromhex(u_hex)
    W, b, items = slab(u)
    res = am.check_assignments(W, items, b, eps=eps)
    assert res.status[0] == ("argmaxable" if slab_truth(u, eps=eps) else "unargmaxable")
    assert "256 bits" in res.message[0]
    assert am.verify_certificate(res, W, b, items=items, eps=eps).all()


@pytest.mark.parametrize("beta", [EPS, np.nextafter(EPS, 1.0), np.nextafter(EPS, 0.0)])
def test_categories_use_the_exact_differences(beta):
    """Category 1 of w = (-1, 2^-60, 1), b = (0, beta, 0) wins on (-beta / (1 + 2^-60), beta / (1 - 2^-60)): float64
    rounds w_i - w_1 to -1 and 1 (radius beta), the exact differences give beta / (1 - 2^-120), so at beta = eps the
    item is argmaxable by 2^-120 relative."""
    w1 = 2.0**-60
    W, b = np.array([[-1.0], [w1], [1.0]]), np.array([0.0, beta, 0.0])
    left = -Fraction(beta) / (1 + Fraction(w1))
    right = Fraction(beta) / (1 - Fraction(w1))
    truth = (right - left) / 2 > Fraction(EPS)  # rows of norm 1 + 2^-60 and 1 - 2^-60: the distances are exact
    res = am.check_categories(W, [1], b, workers=1)
    assert res.status[0] == ("argmaxable" if truth else "unargmaxable")
    assert res.exact[0].decided == "radius"
    assert am.verify_certificate(res, W, b).all()


def test_the_peer_case_has_no_region():
    """The reference implementation's undecided case: its region is empty. Checked here in Fractions, without the
    verifier: the weights' combination sum y_i a_i of the rows a_i = -s_i w_i is exactly zero (no offsets), so no x
    has every a_i . x < 0 (Gordan)."""
    W, items = peer_layer()
    signs = -np.ones(len(W))
    signs[items[0]] = 1
    A, c = -signs[:, None] * W, np.zeros(len(W))
    assert chebyshev(A, c, 1e5).status == "undecided"
    res = am.check_assignments(W, items, bound=1e5)
    assert res.status[0] == "unargmaxable" and res.exact[0].region == "no"
    rec = res.exact[0]
    y = [Fraction(w) for w in rec.weights]
    assert all(v > 0 for v in y)
    combination = [sum(yi * Fraction(float(A[i, j])) for yi, i in zip(y, rec.rows, strict=True)) for j in range(16)]
    assert combination == [0] * 16
    assert am.verify_certificate(res, W, items=items, bound=1e5).all()


def test_regions_of_thin_and_empty_slabs():
    """regions=True: a slab of width 1e-12 is unargmaxable at eps yet non-empty (its rational point lies strictly
    inside, in Fractions); a slab of width 0 (low = u) is empty."""
    low, u = 0.25, 0.25 + 2.0**-40
    W, b, items = slab(u, low)
    plain = am.check_assignments(W, items, b)
    assert plain.status[0] == "unargmaxable" and not plain.exact  # decided by the float stages: no exact stage
    res = am.check_assignments(W, items, b, regions=True)
    assert res.status[0] == "unargmaxable" and res.exact[0].decided == "region" and res.exact[0].region == "yes"
    x = [Fraction(v) for v in res.exact[0].witness]
    assert Fraction(low) < x[0] + x[1] < Fraction(u)
    assert res.certificates[0][0].tolist() == plain.certificates[0][0].tolist()  # its status's evidence stands
    assert am.verify_certificate(res, W, b, items=items).all()
    W, b, items = slab(low, low)
    res = am.check_assignments(W, items, b, regions=True)
    assert res.exact[0].region == "no" and res.exact[0].witness is None
    assert am.verify_certificate(res, W, b, items=items).all()


def _scipy_radius(A, c, lo, hi) -> float:
    """The Chebyshev radius by scipy's HiGHS interface on the normalised rows (another code path)."""
    from scipy.optimize import linprog

    norms = np.linalg.norm(A, axis=1)
    m, d = A.shape
    A_ub = np.hstack([A / norms[:, None], np.ones((m, 1))])
    res = linprog(np.r_[np.zeros(d), -1.0], A_ub=A_ub, b_ub=-c / norms,
                  bounds=[*zip(lo, hi, strict=True), (None, None)], method="highs")
    return -res.fun


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("start", ["dual", "primal"])
@pytest.mark.parametrize("via", ["pivots", "highs", "ball"])
def test_rational_simplex_reaches_scipys_optimum(seed, start, via):
    """From a dual-feasible basis (one row and the bounds minimising it) and from a feasible corner (the box's
    upper corner and the row tightest there), rational pivots alone, HiGHS on the basis' tableau, and the
    ball-arithmetic simplex first, reach the optimum scipy's LP finds."""
    rng = np.random.default_rng(seed)
    d, m = 3, 12
    A, c = rng.standard_normal((m, d)), rng.standard_normal(m)
    lo, hi = -np.ones(d), np.ones(d)
    lp = _LP((A, c, np.zeros(d), 0.0), lo, hi, 64)
    lp.add_rows(np.arange(m))
    if start == "dual":
        K = lp.dual_start(2 * d)
    else:
        slack = -(A @ hi + c) / np.linalg.norm(A, axis=1)
        K = [2 * d + int(np.argmin(slack))] + [2 * j for j in range(d)]
    seen = set()
    for _ in range(100):
        z, lam, M = lp.vertex(K)
        slack = lp.slack(z)
        if all(v >= 0 for v in slack) and all(lam[i, 0] >= 0 for i in range(d + 1)):
            break
        if via == "pivots":
            K = _pivot(lp, K, lam, M, slack)
        else:
            K = _next_basis(lp, K, lam, M, slack, seen, _BallSimplex(None) if via == "ball" else None)
    assert float(z[d, 0]) == pytest.approx(_scipy_radius(A, c, lo, hi), abs=1e-9)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_ball_simplex_starts_from_a_feasible_vertex_near_the_float_lps_point(seed, monkeypatch):
    """From a point near scipy's optimum (off it by 1e-3 in each coordinate), the ball simplex's start is a basis of
    d + 1 independent constraints whose vertex holds every constraint in rational arithmetic, at a t no lower than
    the point's own (its least normalised slack), and the simplex from the float basis that neither holds every
    constraint nor has non-negative multipliers (the box's corner nearest x0 was its start) ends at scipy's
    optimum."""
    from flint import ctx

    rng = np.random.default_rng(seed)
    d, m = 4, 30
    A, c = rng.standard_normal((m, d)), rng.standard_normal(m) - 1.0
    lo, hi = -np.ones(d), np.ones(d)
    lp = _LP((A, c, np.zeros(d), 0.0), lo, hi, 64)
    lp.add_rows(np.arange(m))
    from scipy.optimize import linprog

    norms = np.linalg.norm(A, axis=1)
    best = linprog(np.r_[np.zeros(d), -1.0], A_ub=np.hstack([A / norms[:, None], np.ones((m, 1))]), b_ub=-c / norms,
                   bounds=[*zip(lo, hi, strict=True), (None, None)], method="highs")
    x0 = np.clip(best.x[:d] + 1e-3 * rng.standard_normal(d), lo, hi)
    with ctx.workprec(128):
        K = _BallRun(lp, 1000)._purified(x0)
    assert K is not None and len(set(K)) == d + 1
    z, _, _ = lp.vertex(K)  # ZeroDivisionError if the constraints were dependent
    assert all(v >= 0 for v in lp.slack(z))
    t0 = np.min(-(A @ x0 + c) / norms)
    assert float(z[d, 0]) >= t0 - 1e-9
    radius = _scipy_radius(A, c, lo, hi)
    for _ in range(1000):  # a basis neither primal nor dual feasible, as HiGHS's is on a thin region
        K = rng.choice(len(lp.g), d + 1, replace=False).tolist()
        try:
            z, lam, _ = lp.vertex(K)
        except ZeroDivisionError:
            continue
        if any(v < 0 for v in lp.slack(z)) and any(lam[i, 0] < 0 for i in range(d + 1)):
            break
    else:
        raise AssertionError("no basis infeasible both ways drawn")
    monkeypatch.setattr(_BallRun, "_corner", lambda *a: pytest.fail("the corner start was taken"))
    K = _BallSimplex(x0).optimum(lp, K)
    z, lam, _ = lp.vertex(K)
    assert all(v >= 0 for v in lp.slack(z)) and all(lam[i, 0] >= 0 for i in range(d + 1))
    assert float(z[d, 0]) == pytest.approx(radius, abs=1e-9)


def test_too_wide_an_item_stays_undecided_with_its_reason():
    d = MAX_COLUMNS + 1
    out = settle((np.eye(d), np.zeros(d), np.zeros(d), 0.0), (-np.ones(d), np.ones(d)), EPS)
    assert out.status == "undecided" and f"{d} columns exceed its limit" in out.message


@pytest.fixture(scope="module")
def settled():
    u = 2 * np.sqrt(2) * EPS * (1 + 1e-9)
    W, b, _ = slab(u)
    W3, b3 = np.vstack([W, [[0.5, -0.25]]]), np.append(b, 0.125)  # a third label, off: the rows differ by item
    res = am.check_assignments(W3, [[0]], b3)
    assert res.exact[0].decided == "radius" and res.status[0] == "argmaxable"
    return res, W3, b3, [[0]]


def test_rational_evidence_survives_save_and_load(settled, tmp_path):
    res, W, b, items = settled
    res.save(tmp_path / "r.npz")
    back = CheckResult.load(tmp_path / "r.npz")
    assert back.exact == res.exact
    assert am.verify_certificate(back, W, b, items=items).all()
    assert back.to_frame()[["exact", "region"]].values.tolist() == [["radius", "yes"]]
    with np.load(tmp_path / "r.npz") as z:
        members = {k: z[k] for k in z.files}
    members["exact_offsets"] = np.array([0, 99])
    np.savez(tmp_path / "bad.npz", **members)
    with pytest.raises(ValueError, match="exact evidence's members do not fit"):
        CheckResult.load(tmp_path / "bad.npz")


def forge(res, **change):
    out = copy.deepcopy(res)
    out.exact[0] = out.exact[0]._replace(**change)
    return out


@pytest.mark.parametrize("change", [
    {"witness": ("0", "0")},  # on the boundary of the slab: not inside
    {"witness": ("1/100000000", "1/100000000")},  # inside, but closer than eps to x1 + x2 = u
    {"witness": ("1", "x")},  # not a rational
    {"witness": None},
    {"region": "no"},  # its weights do not empty the region
    {"region": "maybe"},
    {"decided": "everything"},
])
def test_forged_witnesses_and_answers_fail(settled, change):
    res, W, b, items = settled
    assert not am.verify_certificate(forge(res, **change), W, b, items=items)[0]


def test_forged_weights_fail(settled):
    res, W, b, items = settled
    flipped = copy.deepcopy(res)
    flipped.status[0], flipped.answers["eps"][0] = "unargmaxable", "no"  # weights that bound the radius by more
    assert not am.verify_certificate(flipped, W, b, items=items)[0]
    flipped.exact[0] = flipped.exact[0]._replace(rows=(0, 1), weights=("1", "-1"))
    assert not am.verify_certificate(flipped, W, b, items=items)[0]
    flipped.exact[0] = flipped.exact[0]._replace(rows=(0, 0), weights=("1", "1"))
    assert not am.verify_certificate(flipped, W, b, items=items)[0]
    flipped.exact[0] = flipped.exact[0]._replace(rows=(0, 7), weights=("1", "1"))
    assert not am.verify_certificate(flipped, W, b, items=items)[0]


def test_a_record_for_no_item_fails_the_result(settled):
    res, W, b, items = settled
    forged = copy.deepcopy(res)
    forged.exact[5] = forged.exact[0]
    assert not am.verify_certificate(forged, W, b, items=items).any()


def test_a_categories_record_over_its_own_row_fails():
    W, b = np.array([[-1.0], [2.0**-60], [1.0]]), np.array([0.0, EPS, 0.0])
    res = am.check_categories(W, [1], b, workers=1)
    forged = copy.deepcopy(res)
    forged.status[0] = "unargmaxable"
    forged.exact[0] = forged.exact[0]._replace(rows=(1, 2), weights=("1", "1"))
    assert not am.verify_certificate(forged, W, b)[0]


def test_a_decided_status_may_leave_its_region_open():
    """Within its budget the stage may decide radius <= eps (weights from a basis short of the optimum) but not the
    region (measured on trained DFT heads): such a record, region "", passes on its weights; a record that
    decides only the region cannot leave it open."""
    W, b, items = slab(2 * np.sqrt(2) * EPS * (1 - 1e-9))
    res = am.check_assignments(W, items, b)
    assert res.status[0] == "unargmaxable" and res.exact[0].decided == "radius"
    assert am.verify_certificate(forge(res, region="", witness=None), W, b, items=items)[0]
    assert not am.verify_certificate(forge(res, region="", decided="region"), W, b, items=items)[0]
    assert not am.verify_certificate(forge(res, region="", rows=(0,), weights=("1",)), W, b, items=items)[0]


def test_a_checks_budget_of_bases_leaves_the_rest_undecided(monkeypatch):
    """Once the check's budget of rational bases is spent, the items left stay undecided, saying so; the ones
    settled before keep their evidence."""
    W, b, items = slab(2 * np.sqrt(2) * EPS * (1 + 1e-9))
    monkeypatch.setattr(exact, "CHECK_STEPS", 1)
    res = am.check_assignments(W, items * 2, b)
    assert res.exact[0].decided == "radius" and res.status[0] == "argmaxable"
    assert res.status[1] == "undecided" and 1 not in res.exact
    assert "budget of 1 rational bases is spent" in res.message[1]


def test_a_trained_dft_heads_thin_label_set_is_decided():
    """A DFT head the offline default trained (debtags, d = 2, seed 1: 527 labels in head space d = 35; saved in
    tests/data) and a 16-active label set whose region is thinner than eps: the float LP leaves it open. Settled over
    every row (regions=True) the exact stage's degenerate pivots need 68 bases (the old budget of 60 left it
    undecided), and it finds a rational point inside (thin, not empty) and rational weights bounding the radius by
    eps. Without regions the relaxation over the rows nearest to violation at the float LP's point proves the same
    bound with weights over fewer rows and no point. The verifier re-checks both exactly."""
    W = np.load(Path(__file__).parent / "data" / "debtags_dft_d2_head.npz")["W"]
    labels = [[2, 5, 7, 10, 20, 26, 46, 73, 78, 96, 107, 110, 125, 134, 294, 306]]
    whole = am.check_assignments(W, labels, bound=1e4, eps=EPS, workers=1, regions=True)
    assert whole.status.tolist() == ["unargmaxable"] and whole.exact[0].decided == "radius"
    assert whole.exact[0].region == "yes"
    assert 0 < whole.radius[0] <= whole.radius_upper[0] <= EPS
    assert am.verify_certificate(whole, W, items=labels, bound=1e4, eps=EPS).all()
    res = am.check_assignments(W, labels, bound=1e4, eps=EPS, workers=1)
    assert res.status.tolist() == ["unargmaxable"] and res.exact[0].decided == "radius"
    assert res.exact[0].region == "" and res.exact[0].witness is None and np.isnan(res.radius[0])
    relaxation = re.search(r"of (\d+) \(the rows nearest to violation at the float LP's point", res.message[0])
    assert res.radius_upper[0] <= EPS and relaxation and int(relaxation.group(1)) < len(W)
    assert len(res.exact[0].rows) <= W.shape[1] + 1 and set(res.exact[0].rows) <= set(range(len(W)))
    assert am.verify_certificate(res, W, items=labels, bound=1e4, eps=EPS).all()


def _radius_bounds_in_fractions(A: np.ndarray, out, bound: float) -> tuple[bool, Fraction]:
    """For the homogeneous system ``A x < 0`` in the box |x_j| <= bound, in Fractions alone: whether the rational
    point ``out.x`` lies in the box with every ``a_i . x < 0``, and the radius bound of the weights ``out.weights``
    over ``out.rows``: ``bound ||v||_1 / sum mu_i l_i`` with ``v = sum mu_i a_i`` and ``l_i <= ||a_i||`` (an
    integer square root to 100 bits)."""
    rows = [[Fraction(float(a)) for a in A[i]] for i in out.rows]
    x = list(out.x)
    inside = all(abs(v) <= bound for v in x) and all(sum(a * v for a, v in zip(row, x, strict=True)) < 0
                                                     for row in ([Fraction(float(a)) for a in r] for r in A))
    v = [sum((w * row[j] for w, row in zip(out.weights, rows, strict=True)), Fraction(0)) for j in range(A.shape[1])]
    lows = [Fraction(isqrt(int(sum(a * a for a in row) * 4**100)), 2**100) for row in rows]
    return inside, bound * sum(abs(c) for c in v) / sum(w * low for w, low in zip(out.weights, lows, strict=True))


def test_a_thin_dft_label_set_is_settled_by_the_ball_simplexs_optimum():
    """A label set of the trained DFT head (tests/data; 8 active labels, 8 runs, so its region is non-empty by
    thesis Thm 5.3) whose region is thinner than eps in the box 1e4: HiGHS's float64 bases cannot tell its
    vertices apart (its radius is about 1e-13 of the box), and from the origin the tableau's choices with rational
    pivots leave it open after 20 bases (they need 76). The ball-arithmetic simplex's basis is the exact optimum
    at the fourth: a rational point inside and weights bounding the radius by eps, both re-checked here in
    Fractions and by the verifier."""
    W = np.load(Path(__file__).parent / "data" / "debtags_dft_d2_head.npz")["W"]
    labels = [2, 4, 7, 10, 20, 26, 267, 398]
    signs = -np.ones(len(W))
    signs[labels] = 1.0
    terms = (-signs[:, None] * W, np.zeros(len(W)), np.zeros(W.shape[1]), 0.0)  # a_i = -s_i w_i, c_i = 0
    box = (np.full(W.shape[1], -1e4), np.full(W.shape[1], 1e4))
    assert settle(terms, box, EPS, steps=20).status == "undecided"
    out = settle(terms, box, EPS, steps=20, ball=True)
    assert out.status == "unargmaxable" and out.region == "yes" and out.optimal and out.bases <= 5
    assert 0 < out.lower <= out.upper <= EPS
    inside, upper = _radius_bounds_in_fractions(terms[0], out, 1e4)
    assert inside and 0 < upper <= Fraction(EPS)
    res = am.check_assignments(W, [labels], bound=1e4, eps=EPS, workers=1, regions=True)
    assert res.status.tolist() == ["unargmaxable"] and (res.exact[0].decided, res.exact[0].region) == ("radius", "yes")
    assert am.verify_certificate(res, W, items=[labels], bound=1e4, eps=EPS).all()


def test_witness_string_with_a_huge_exponent_is_refused_at_once():
    """An exact witness written "1e99999999" is not a rational "p/q": Fraction() would expand it to a
    100-million-digit integer (the verifier hung); it is refused without expanding it."""
    import multiprocessing

    low, u = 0.25, 0.25 + 2.0**-40
    W, b, items = slab(u, low)
    res = am.check_assignments(W, items, b, regions=True)
    assert am.verify_certificate(res, W, b, items=items).all()
    forged = copy.deepcopy(res)
    forged.exact[0] = res.exact[0]._replace(witness=("1e99999999", "0"))
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(1) as pool:
        job = pool.apply_async(am.verify_certificate, (forged, W, b), {"items": items})
        assert not job.get(timeout=60).any()


def test_rationals_beyond_pythons_string_limit_leave_the_item_undecided():
    """Entries spanning 2^-1000..1 make the exact stage's rationals longer than the digits Python writes as a
    string (the check raised ValueError and returned nothing): such an item is left open with that reason, the
    others keep their verdicts, and the result verifies."""
    import sys

    rng = np.random.default_rng(9)
    W = rng.standard_normal((30, 16)) * 2.0 ** -rng.integers(0, 1000, (30, 16)).astype(np.float64)
    res = am.check_categories(W, regions=True)
    reason = f"more than {sys.get_int_max_str_digits()} digits"
    long = np.flatnonzero([reason in m for m in res.message])
    assert long.size
    for p in long:
        assert res.status[p] == "undecided" or int(p) not in res.exact or res.exact[int(p)].decided == "region"
    assert (res.status != "undecided").sum() >= 25
    assert am.verify_certificate(res, W).all()
