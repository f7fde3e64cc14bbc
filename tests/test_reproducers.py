"""Reproducers of wrong verdicts and crashes on odd inputs (ties, scales, masks, boxes), each with the right verdict
or a one-line error."""

from __future__ import annotations

import re
import warnings
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

import argmaxable as am

TRI = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0]])  # every class argmaxable (a triangle's vertices)
TOY = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0], [0.1, 0.1]])  # ACL 2022 Fig. 1: c4 lies inside the triangle


@pytest.mark.parametrize("scale", [1e154, 1e-170, 1e300, 1e-300])
def test_extreme_magnitudes_keep_their_verdicts(scale):
    W = TRI * scale
    res = am.check_categories(W, workers=1)
    assert res.status.tolist() == ["argmaxable"] * 3
    assert am.verify_certificate(res, W).all()
    sets = [[0], [0, 1], [0, 1, 2], []]
    res = am.check_assignments(W, sets, workers=1)  # all on / all off: sum of the rows is 0, not separable
    assert res.status.tolist() == ["argmaxable", "argmaxable", "unargmaxable", "unargmaxable"]
    assert am.verify_certificate(res, W, items=sets).all()
    res = am.check_top_m(W, [[0], [0, 1]], workers=1)
    assert res.status.tolist() == ["argmaxable", "argmaxable"]
    assert am.verify_certificate(res, W, items=[[0], [0, 1]]).all()


def test_near_duplicate_is_not_a_duplicate():
    """Row 4 = row 0 + (0, 1e-170): the two split category 0's region along x2 = 0, both keep a wide region."""
    W = np.vstack([TOY, TOY[0] + [0.0, 1e-170]])
    res = am.check_categories(W, workers=1)
    assert res.status.tolist() == ["argmaxable", "argmaxable", "argmaxable", "unargmaxable", "argmaxable"]
    assert not any("duplicate" in m for m in res.message)
    assert am.verify_certificate(res, W).all()


def test_exact_duplicate_names_the_copy_that_wins():
    W = np.vstack([TOY, TOY[0]])
    b = np.array([0.0, 0.0, 0.0, 0.0, 1.0])  # copy 4 has the higher bias and wins where category 0 did
    res = am.check_categories(W, b=b, workers=1)
    assert res.status.tolist() == ["unargmaxable", "argmaxable", "argmaxable", "unargmaxable", "argmaxable"]
    assert res.message[0] == "duplicate of category 4 with a bias at least as high: category 0 cannot win strictly"
    assert "duplicate" not in res.message[4]
    assert am.verify_certificate(res, W, b).all()


@pytest.mark.parametrize(("call", "match"), [
    (lambda: am.check_assignments(TOY, [[True, False, False, True]]), "holds booleans"),
    (lambda: am.check_assignments(TOY, [[1, 0, 0, 1]]), "repeats a label index"),
    (lambda: am.check_assignments(TOY, [[1.5]]), "integer label indices. Got 1.5"),
    (lambda: am.check_assignments(TOY, np.ones((2, 4, 1), dtype=bool)), "must be 2-D"),
    (lambda: am.check_assignments(TOY, np.full((1, 4), 0.5)), "booleans or 0/1"),
    (lambda: am.check_categories(TOY, bound="100"), "'bound' parameter must be a number. Got '100' \\(str\\)"),
    (lambda: am.check_categories(TOY * 1j), "must hold real numbers. Got complex"),
    (lambda: am.check_categories(TOY, np.ones(4)), "1-D list of integer category indices"),
    (lambda: am.check_categories(TOY, eps=np.float64(-1)), "Got -1.0 instead"),
])
def test_bad_input_one_line_no_warning(call, match):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match=match) as err:
            call()
    assert "\n" not in str(err.value) and not re.search(r"np\.\w+\(\d", str(err.value))  # no np.int64(1) reprs


def test_bool_matrix_and_index_lists_agree():
    Y = np.array([[True, False, False, True], [False, True, True, False]])
    as_matrix = am.check_assignments(TOY, Y, workers=1)
    as_lists = am.check_assignments(TOY, [[0, 3], [1, 2]], workers=1)
    assert as_matrix.status.tolist() == as_lists.status.tolist() == ["argmaxable", "argmaxable"]
    assert am.check_assignments(TOY, Y.astype(np.int8), workers=1).status.tolist() == as_matrix.status.tolist()


def _failing_lp(status, lower, upper):
    from argmaxable.core.chebyshev import LPOutcome

    def fake(A, c, *args, **kw):
        return LPOutcome(status, np.nan, lower, upper, None, message="HiGHS model status 13: fake failure")

    return fake


def test_witness_margin_survives_a_failing_lp(monkeypatch):
    """In the box |x_j| <= 0.5 the assignment {0} has radius < 1, so reflection's witness goes on to the LP to
    decide 1-argmaxability. When that LP fails, the status, the witness's certified margin and the eps answer
    stay, and the answer at 1 is undecided (not "no")."""
    import argmaxable.core.stages as stages

    W = np.array([[1.0, 0.0], [0.0, 1.0]])
    honest = am.check_assignments(W, [[0]], bound=0.5, workers=1)
    assert honest.answers["1"].tolist() == ["no"] and honest.radius[0] > 1e-8
    monkeypatch.setattr(stages, "chebyshev", _failing_lp("undecided", -np.inf, np.inf))
    res = am.check_assignments(W, [[0]], bound=0.5, workers=1)
    assert res.status.tolist() == ["argmaxable"] and res.radius[0] > 1e-8  # the witness's certified margin
    assert res.answers["eps"].tolist() == ["yes"] and res.answers["1"].tolist() == ["undecided"]
    assert not res.one_argmaxable()[0] and "fake failure" in res.message[0]
    assert am.verify_certificate(res, W, items=[[0]], bound=0.5).all()


def test_stage_contradiction_is_undecided(monkeypatch):
    """Without the exact stage, two float stages that contradict each other leave the item undecided."""
    import argmaxable.core.stages as stages

    W = np.array([[1.0, 0.0], [0.0, 1.0]])
    monkeypatch.setattr(stages, "chebyshev", _failing_lp("infeasible", -np.inf, 0.0))
    import argmaxable.core.check as check

    without_exact = lambda *a, **k: [s for s in stages.stages_for(*a, **k) if s.name != "exact"]  # noqa: E731
    monkeypatch.setattr(check, "stages_for", without_exact)  # the float stages alone
    res = am.check_assignments(W, [[0]], bound=0.5, workers=1)
    assert res.status.tolist() == ["undecided"] and res.message[0].startswith("stages disagree")
    assert res.answers["eps"].tolist() == ["undecided"]


def test_a_stage_contradiction_is_settled_by_the_exact_stage(monkeypatch):
    """The float LP's bogus refutation (radius <= 0) contradicts reflection's witness; the exact stage decides
    the item in rational arithmetic (radius 0.5: x = (1/2, -1/2)), and its bounds, not the bogus LP's, go with its
    evidence, so the verifier accepts the result."""
    import argmaxable.core.stages as stages

    W = np.array([[1.0, 0.0], [0.0, 1.0]])
    monkeypatch.setattr(stages, "chebyshev", _failing_lp("infeasible", -np.inf, 0.0))
    res = am.check_assignments(W, [[0]], bound=0.5, workers=1)
    assert res.status.tolist() == ["argmaxable"] and res.exact[0].decided == "radius"
    assert res.radius[0] <= 0.5 <= res.radius_upper[0] and res.answers["1"].tolist() == ["no"]
    assert am.verify_certificate(res, W, items=[[0]], bound=0.5).all()


def _strict_hull_vertices(points) -> set:
    """Indices of the strict vertices of the convex hull, in exact rational arithmetic (Andrew's monotone chain
    over Fractions of the float values; collinear and repeated points are not vertices)."""
    from fractions import Fraction

    P = sorted({(Fraction(x), Fraction(y)) for x, y in points})
    if len(P) < 3:
        return set()

    def cross(o, a, b):
        return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])

    def half(seq):
        out = []
        for p in seq:
            while len(out) >= 2 and cross(out[-2], out[-1], p) <= 0:
                out.pop()
            out.append(p)
        return out

    hull = set(half(P)[:-1] + half(P[::-1])[:-1])
    if len(hull) < 3:
        return set()
    return {i for i, (x, y) in enumerate(points) if (Fraction(x), Fraction(y)) in hull}


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.integers(-5, 5), st.integers(-5, 5)), min_size=3, max_size=9),
       st.integers(-990, 990), st.integers(60, 600), st.booleans(), st.randoms(use_true_random=False))
def test_magnitudes_permutations_near_duplicates_against_exact_hull(points, exponent, gap, near, rnd):
    """Integer points scaled by 2^exponent (1e-298..1e298), shuffled, optionally with a near-duplicate of the
    first point 2^-gap away: argmaxable exactly when a strict hull vertex without an exact duplicate (oracle:
    rational arithmetic on the float values), and every verdict's evidence verifies."""
    W = np.ldexp(np.array(points, dtype=np.float64), exponent)
    if near:
        W = np.vstack([W, W[0] + [0.0, np.ldexp(1.0, exponent - gap)]])
    W = W[rnd.sample(range(len(W)), len(W))]
    vertices = _strict_hull_vertices([tuple(w) for w in W])
    assume(vertices)
    unique = [(w == W).all(axis=1).sum() == 1 for w in W]
    expected = [i in vertices and unique[i] for i in range(len(W))]
    res = am.check_categories(W, workers=1, patience=50)
    assert (res.status == "argmaxable").tolist() == expected
    assert am.verify_certificate(res, W).all()


def test_cli_refuses_bad_out_before_computing_and_stops_cleanly_on_ctrl_c(tmp_path, monkeypatch, capsys):
    from argmaxable.cli import main

    path = tmp_path / "toy.npz"
    np.savez(path, W=TOY)

    def must_not_run(*args, **kwargs):
        raise AssertionError("the check ran before --out was validated")

    monkeypatch.setattr(am, "check_categories", must_not_run)
    assert main(["check", "softmax", str(path), "--out", str(tmp_path / "t.txt")]) == 2
    assert "--out must end in .parquet or .csv" in capsys.readouterr().err
    assert main(["check", "softmax", str(path), "--out", "/proc/argmaxable-t.csv"]) == 2  # unwritable, even as root
    assert "cannot write in directory '/proc'" in capsys.readouterr().err

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(am, "check_categories", interrupted)
    assert main(["check", "softmax", str(path), "--out", str(tmp_path / "t.csv")]) == 130
    assert capsys.readouterr().err.strip() == "argmaxable: interrupted"
    assert list(tmp_path.glob("t.csv*")) == []  # no partial file


def test_cli_reads_legacy_torch_files(tmp_path, capsys):
    import torch

    from argmaxable.cli import main

    path = tmp_path / "legacy.pt"
    torch.save({"weight": torch.tensor(TOY)}, path, _use_new_zipfile_serialization=False)
    assert main(["check", "softmax", str(path), "--workers", "1"]) == 0
    assert "3 argmaxable, 1 unargmaxable" in capsys.readouterr().out


# Mixed scales and masked logits, against exact rational arithmetic.


def exact_radius_1d(A, C, lo, hi):
    """Chebyshev radius, in exact rationals, of {x in R : a_i x + c_i < 0} with its centre in [lo, hi] (d = 1): the
    rows cut out an interval (l, r), the distance to row i is |x - (-c_i / a_i)|, and a zero row with c_i >= 0
    empties it (None)."""
    left = right = None
    for a, c in zip(A, C, strict=True):
        if a == 0:
            if c >= 0:
                return None
            continue
        root = -c / a
        if a > 0:
            right = root if right is None else min(right, root)
        else:
            left = root if left is None else max(left, root)
    if left is None and right is None:
        return float("inf")
    x = hi if right is None else lo if left is None else min(max((left + right) / 2, lo), hi)
    return min(x - left if left is not None else float("inf"), right - x if right is not None else float("inf"))


def exact_categories_1d(w, b, bound, eps):
    """"argmaxable"/"unargmaxable" per category of the 1-D layer (w, b) (None where the radius is within 1e-6 of
    eps: too close to call in float64); a -inf bias never wins and constrains nobody."""
    F = [Fraction(float(v)) for v in w]
    G = [None if v == -np.inf else Fraction(float(v)) for v in b]
    out = []
    for t in range(len(w)):
        if G[t] is None:
            out.append("unargmaxable")
            continue
        rows = [i for i in range(len(w)) if i != t and G[i] is not None]
        r = exact_radius_1d([F[i] - F[t] for i in rows], [G[i] - G[t] for i in rows], -Fraction(bound), Fraction(bound))
        if r is not None and abs(r - Fraction(eps)) <= Fraction(eps) / 10**6:
            out.append(None)
        else:
            out.append("argmaxable" if r is not None and r > eps else "unargmaxable")
    return out


def test_mixed_scales_keep_small_rows_apart():
    W = np.array([[1e300], [1e-30], [-1e-30]])
    res = am.check_categories(W, workers=1)
    assert res.status.tolist() == ["argmaxable", "unargmaxable", "argmaxable"]  # category 2 wins for every x < 0
    assert exact_categories_1d(W[:, 0], np.zeros(3), 100.0, 1e-8) == res.status.tolist()
    assert am.verify_certificate(res, W).all()


MAGNITUDE = st.builds(lambda m, e, s: s * m * 10.0**e, st.floats(1.0, 9.99), st.integers(-300, 300),
                      st.sampled_from([-1.0, 1.0])) | st.just(0.0)
MASK = st.sampled_from([-np.inf, np.finfo(float).min, -1e200])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(MAGNITUDE, MAGNITUDE | MASK), min_size=2, max_size=7))
@example([(0.0, 0.0), (-1e198, -1e200), (-1e-259, 0.0), (0.0, -1.0)])  # rational weights beyond float range
@example([(-1.0, -1.0), (-1e145, -np.inf), (-1.0, -1.0), (-1e-172, 1e137)])  # a margin of 1e137 at x = -1e-172
@example([(0.0, 0.0), (-1e-18, 0.0), (-6e197, -1e200), (0.0, -1.0)])  # exact evidence beside a masked row
def test_mixed_scale_and_masked_layers_match_exact_arithmetic(rows):
    """Entries spanning 1e-300..1e300 in one layer, biases masked with -inf, finfo.min or -1e200: every verdict
    is the exact one or undecided, and its evidence holds."""
    w, b = np.array([r[0] for r in rows]), np.array([r[1] for r in rows])
    assume(np.isfinite(b).any())
    res = am.check_categories(w[:, None], b=b, workers=1, patience=20)
    expected = exact_categories_1d(w, b, 100.0, 1e-8)
    for got, want in zip(res.status, expected, strict=True):
        assert got == "undecided" or want is None or got == want
    assert am.verify_certificate(res, w[:, None], b).all()


@pytest.mark.parametrize("mask", [-np.inf, np.finfo(float).min, -1e200])
def test_masked_tokens_are_unargmaxable_and_leave_the_others_alone(mask):
    rng = np.random.default_rng(3)
    W, b = rng.normal(size=(22, 3)), rng.normal(size=22)
    plain = am.check_categories(W[1:], b=b[1:], workers=1)
    b[0] = mask
    res = am.check_categories(W, b=b, workers=1)
    assert res.status[0] == "unargmaxable" and res.message[0].startswith("masked:")
    assert res.status[1:].tolist() == plain.status.tolist()
    assert am.verify_certificate(res, W, b).all()
    forged = res.status.copy()
    res.status = np.where(np.arange(22) == 0, "argmaxable", forged)
    assert not am.verify_certificate(res, W, b)[0]


def test_a_mask_is_only_what_loses_everywhere_in_the_box():
    W = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0]])
    b = np.array([0.0, 0.0, -400.0])  # loses by 100 inside |x| <= 100, but wins at (-300, -300) in a box of 1000
    assert am.check_categories(W, b=b, workers=1).message[2].startswith("masked:")
    wide = am.check_categories(W, b=b, bound=1000.0, workers=1)
    assert wide.status[2] == "argmaxable" and am.verify_certificate(wide, W, b, bound=1000.0).all()


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"patience": 1e20}, "'patience' parameter must be a non-negative integer. Got 1e+20 (float)"),
    ({"patience": np.float64(2.0)}, "'patience' parameter must be a non-negative integer. Got 2.0 (float64)"),
    ({"workers": 2.0}, "'workers' parameter must be a positive integer"),
    ({"device": "meta"}, "'device' parameter must be 'auto', 'cpu' or 'cuda[:k]'. Got 'meta'"),
    ({"b": np.array([0.0, np.inf, 0.0, 0.0])}, "'b' parameter must be finite or -inf"),
    ({"b": np.full(4, -np.inf)}, "'b' parameter is -inf everywhere"),
])
def test_bad_settings_are_value_errors(kwargs, match):
    with pytest.raises(ValueError, match=re.escape(match)):
        am.check_categories(TOY, **kwargs)


def test_integral_numpy_counts_are_accepted_and_torch_bools_refused_like_numpy_bools():
    import torch

    res = am.check_categories(TOY, patience=np.int64(5), workers=np.int32(1))
    assert res.status.tolist() == ["argmaxable"] * 3 + ["unargmaxable"]
    for bad in (np.ones((4, 2), dtype=bool), torch.ones((4, 2), dtype=torch.bool)):
        with pytest.raises(ValueError, match=r"'W' parameter must hold real numbers\. Got boolean"):
            am.check_categories(bad)
        with pytest.raises(ValueError, match=r"W must be a real 2-D array\. Got dtype bool"):
            am.verify_certificate(res, bad)


# Inputs of the core that are out of range or degenerate.

def test_eps_above_one_is_refused_for_sets():
    """With eps = 2 check_rankings answered eps "no" and "1" "yes" for the same item: radius > 1 but not > eps."""
    from argmaxable.core import check_rankings

    W, b = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 0.0]]), np.array([0.0, 0.0, 3.0])
    for call in (lambda: check_rankings(W, [[2]], b, eps=2.0), lambda: am.check_assignments(W, [[2]], b, eps=2.0),
                 lambda: am.check_top_m(W, [[2]], b, eps=1.5)):
        with pytest.raises(ValueError, match="'eps' parameter must be at most 1 for label sets and top-m sets"):
            call()
    assert am.check_assignments(W, [[0, 2]], b, eps=1.0, workers=1).status.tolist() == ["argmaxable"]


def test_an_all_zero_layer_warns_nothing():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = am.check_categories(np.zeros((3, 2)), workers=1)
    assert res.counts()["unargmaxable"] == 3 and am.verify_certificate(res, np.zeros((3, 2))).all()
