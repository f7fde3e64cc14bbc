"""The independent verifier: genuine evidence passes, every forged case fails, settings
come from the caller, and it shares no code with the stages."""

from __future__ import annotations

import copy
import inspect

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

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
    allowed_here = {"from argmaxable.verify_exact import with_exact, with_exact_certificates"}
    for module, allowed in ((verify_module, allowed_here), (verify_exact, set())):
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
    """The box and eps are the caller's, defaulting to the checks' documented ones: a record that disagrees is
    refused, never followed (the verifier trusts no value the result carries)."""
    r = copy.deepcopy(toy_result)
    r.settings["eps"] = -1.0  # would let any witness pass
    with pytest.raises(ValueError, match=r"records eps=-1\.0 but eps=1e-08 applies \(the default\)"):
        am.verify_certificate(r, TOY)
    with pytest.raises(ValueError, match=r"records eps=-1\.0 but eps=1e-08 was given"):
        am.verify_certificate(r, TOY, eps=1e-8)
    with pytest.raises(ValueError, match="eps must be a non-negative number"):
        am.verify_certificate(r, TOY, eps=-1.0)
    with pytest.raises(ValueError, match=r"records bound=100\.0 but bound=50\.0"):
        am.verify_certificate(toy_result, TOY, bound=50.0)
    r = copy.deepcopy(toy_result)
    r.settings["lower"] = [0.0, 0.0]  # the ReLU box: category 2's witness (x1 + x2 < 0) leaves it
    with pytest.raises(ValueError, match=r"records lower=0\.0 \(each of 2\) but lower=-100\.0 \(each of 2\)"):
        am.verify_certificate(r, TOY)
    assert am.verify_certificate(r, TOY, lower=0.0).tolist() == [True, True, False, True]


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


# Certificates whose weights overflow, and witnesses at extreme settings.

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
    assert not am.verify_certificate(forged, W, b, eps=0.0, bound=1e308)[0]


@pytest.mark.parametrize("bound", [1e-300, 1e-310])
def test_valid_witnesses_in_a_tiny_box_are_accepted(bound):
    W = np.random.default_rng(1).normal(size=(6, 3)) * 1e-305
    res = am.check_categories(W, bound=bound, eps=0.0, workers=1)
    assert (res.status == "argmaxable").sum() >= 3
    assert am.verify_certificate(res, W, bound=bound, eps=0.0).all()


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


# The verifier trusts no value the result carries: answer keys, radii, settings of the derived layers.

def test_answers_for_other_thresholds_than_the_kind_are_refused():
    """Label sets answer eps and 1: dropping the "1" answers (whose column a table then shows unchecked) or
    renaming them to a threshold the kind never answers is refused, not skipped."""
    W, b = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0]]), np.array([0.1, 0.1, 0.0])
    sets = [[0, 1], [0, 1, 2], [0, 1]]  # the slab |x_1| < 0.1: radius 0.1 each
    res = am.check_assignments(W, sets, b, workers=1)
    assert res.answers["1"].tolist() == ["no"] * 3 and am.verify_certificate(res, W, b, items=sets).all()
    for answers in ({"eps": res.answers["eps"]}, {"eps": res.answers["eps"], "0.001": res.answers["1"]}, {}):
        forged = copy.deepcopy(res)
        forged.answers = answers
        with pytest.raises(ValueError, match="answers radius > eps and radius > 1; this one answers"):
            am.verify_certificate(forged, W, b, items=sets)
    forged = copy.deepcopy(res)
    forged.answers = {"eps": res.answers["eps"], "0.001": res.answers["1"]}
    assert "one_argmaxable" not in forged.to_frame() and "argmaxable_at_0.001" in forged.to_frame()


def test_radii_are_verified():
    """A lower bound needs a witness with that margin, an upper bound the certificate that gives it: a radius of
    50 on an unargmaxable category, an upper bound of 1e-20 on argmaxable ones, or one below what the
    certificate proves, fail; the check's own radii pass."""
    res = am.check_categories(TOY, workers=1, exact_radius=True)
    assert am.verify_certificate(res, TOY).all()
    forged = copy.deepcopy(res)
    forged.radius[3] = 50.0
    assert am.verify_certificate(forged, TOY).tolist() == [True, True, True, False]
    forged = copy.deepcopy(res)
    forged.radius_upper[:3] = 1e-20
    assert am.verify_certificate(forged, TOY).tolist() == [False, False, False, True]
    forged = copy.deepcopy(res)
    forged.radius_upper[3] = -1.0  # category 3's certificate shows a radius <= 1e-8, not <= -1
    assert am.verify_certificate(forged, TOY).tolist() == [True, True, True, False]
    forged = copy.deepcopy(res)
    forged.radius[0] *= 1.01  # more than its witness's margin
    assert not am.verify_certificate(forged, TOY)[0]


def test_checked_radii_are_the_ones_the_evidence_backs():
    from argmaxable.verify import checked_radii

    W = np.random.default_rng(3).normal(size=(40, 3))
    res = am.check_categories(W, workers=1, exact_radius=True)
    radius, upper = checked_radii(res)
    witnessed = np.isfinite(res.witness).all(axis=1) & (res.status == "argmaxable")
    certified = np.array([len(r) > 0 for r, _ in res.certificates])
    assert (res.status == "unargmaxable").any() and np.isfinite(res.radius[~witnessed]).any()  # LP radii, no point
    np.testing.assert_array_equal(np.isnan(radius), ~witnessed | np.isnan(res.radius))
    np.testing.assert_array_equal(np.isnan(upper), ~certified | np.isnan(res.radius_upper))
    assert am.verify_certificate(res, W).all()


def test_a_result_of_another_layer_is_one_line(tmp_path, capsys):
    """Low finding: verify against the wrong model printed numpy's broadcasting message; a box that disagrees
    printed all d values."""
    res = am.check_categories(TOY, workers=1)
    with pytest.raises(ValueError, match="witnesses have 2 coordinates and the layer given 3"):
        am.verify_certificate(res, np.hstack([TOY, TOY[:, :1]]))
    res.save(tmp_path / "r.evidence.npz")
    np.savez(tmp_path / "wide.npz", W=np.hstack([TOY, TOY[:, :1]]))
    assert main(["verify", str(tmp_path / "r.evidence.npz"), str(tmp_path / "wide.npz")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "verify against the layer the check ran on" in err
    r = copy.deepcopy(res)
    r.settings["lower"] = list(np.linspace(-1, 0, 2))
    with pytest.raises(ValueError, match=r"records lower=2 values in \[-1, 0\] but lower=-100\.0 \(each of 2\)"):
        am.verify_certificate(r, TOY)


def test_ranking_and_prescribed_verifiers_read_the_callers_settings_and_items():
    """verify_prescribed reads eps_ratio and delta from the caller, never the result; verify_rankings takes the
    caller's box, eps and items and holds the result's items and length to them."""
    from argmaxable.core import check_prescribed, check_rankings, verify_prescribed, verify_rankings
    from argmaxable.core.questions.prescribed import achieved

    loose = check_prescribed(TOY, [[0, 1, 3]], [[0.6, 0.3, 0.1]], delta=0.99, eps_ratio=0.9, workers=1)
    inside, _ = achieved(TOY, None, loose.witness[0][:-1], [0, 1, 3])
    assert loose.status.tolist() == ["argmaxable"] and not np.allclose(inside, [0.6, 0.3, 0.1], rtol=0.05)
    with pytest.raises(ValueError, match=r"records eps_ratio=0\.9 but eps_ratio=0\.05 is verified"):
        verify_prescribed(loose, TOY, [[0, 1, 3]], [[0.6, 0.3, 0.1]])
    assert verify_prescribed(loose, TOY, [[0, 1, 3]], [[0.6, 0.3, 0.1]], eps_ratio=0.9, delta=0.99).all()
    loose.settings.update(eps_ratio=0.05, delta=0.1)  # a record forged to the defaults: the witness is checked
    assert not verify_prescribed(loose, TOY, [[0, 1, 3]], [[0.6, 0.3, 0.1]]).any()

    W, b = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 0.0]]), np.array([0.0, 0.0, 0.1])
    rankings = [[2], [2, 0]]
    coarse = check_rankings(W, rankings, b, eps=0.5, workers=1)  # radii 0.1 and 0.05: below eps = 0.5
    assert coarse.status.tolist() == ["unargmaxable"] * 2
    with pytest.raises(ValueError, match=r"records eps=0\.5 but eps=1e-08 was given"):
        verify_rankings(coarse, W, rankings, b)
    assert verify_rankings(coarse, W, rankings, b, eps=0.5).all()
    coarse.settings["eps"] = 1e-8  # forged: at eps = 1e-8 both rankings are argmaxable
    assert not verify_rankings(coarse, W, rankings, b).any()
    honest = check_rankings(W, rankings, b, workers=1)
    assert honest.status.tolist() == ["argmaxable"] * 2 and verify_rankings(honest, W, rankings, b).all()

    mixed = check_rankings(TOY, [[0], [3]], workers=1)
    assert mixed.status.tolist() == ["argmaxable", "unargmaxable"] and verify_rankings(mixed, TOY, [[0], [3]]).all()
    swapped = copy.deepcopy(mixed)
    swapped.items = np.array([1, 0])  # each verdict now names the other ranking
    assert not verify_rankings(swapped, TOY, [[0], [3]]).any()
    with pytest.raises(ValueError, match="items must be positions among the 1 top-k rankings given"):
        verify_rankings(mixed, TOY, [[0]])  # a longer result than the rankings given
    with pytest.raises(ValueError, match="not one of prescribed probabilities"):
        verify_prescribed(mixed, TOY, [[0], [3]], [[1.0], [1.0]])


FORGERIES = ("status", "radius", "radius_upper", "answer", "answer_key", "eps", "bound", "items")


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**16), st.sampled_from(["categories", "assignments"]), st.sampled_from(FORGERIES),
       st.integers(0, 7))
def test_forged_columns_and_settings_never_verify(seed, kind, forgery, at):
    """Whatever single claim of a genuine result is forged (a status, a radius above the Chebyshev
    radius, an upper bound below the certificate's, an answer or its key, the recorded eps or box, the items),
    verify_certificate refuses it (ValueError) or fails the item it forged."""
    rng = np.random.default_rng(seed)
    W, b = rng.normal(size=(8, 2)), rng.normal(size=8)
    sets = [rng.permutation(8)[: rng.integers(0, 8)].tolist() for _ in range(8)] if kind == "assignments" else None
    if kind == "categories":
        res = am.check_categories(W, b=b, workers=1, exact_radius=True)
    else:
        res = am.check_assignments(W, sets, b, workers=1, exact_radius=True, bound=100.0)
    box = {"items": sets, "bound": 100.0}
    assert am.verify_certificate(res, W, b, **box).all()
    k = at % len(res)
    f = copy.deepcopy(res)
    if forgery == "status":
        f.status[k] = {"argmaxable": "unargmaxable", "unargmaxable": "argmaxable"}.get(f.status[k], "argmaxable")
    elif forgery == "radius":  # above the Chebyshev radius (the LP ran to its optimum): no witness has it
        assume(np.isfinite(res.radius[k]) and res.radius_exact[k])
        f.radius[k] = abs(res.radius[k]) * 2 + 1e-3
    elif forgery == "radius_upper":  # below the verified lower bound, or below what the certificate proves
        assume(np.isfinite(res.radius_upper[k]))
        f.radius_upper[k] = min(res.radius[k] if np.isfinite(res.radius[k]) else res.radius_upper[k],
                                res.radius_upper[k]) - abs(res.radius_upper[k]) - 1e-3
    elif forgery == "answer":
        key = "eps" if kind == "categories" else ("eps", "1")[at % 2]
        f.answers[key] = f.answers[key].copy()
        f.answers[key][k] = {"yes": "no", "no": "yes"}.get(f.answers[key][k], "yes")
        assume(f.answers[key][k] != res.answers[key][k] and not (key == "1" and res.status[k] == "undecided"))
    elif forgery == "answer_key":
        f.answers = {("0.5" if key == "1" else key): v for key, v in res.answers.items()} if kind != "categories" \
            else {"eps": res.answers["eps"], "1": res.answers["eps"]}
    elif forgery in ("eps", "bound"):
        f.settings[forgery] = f.settings[forgery] * 2
    else:
        other = (k + 1 + at) % len(res)
        assume(res.status[k] != res.status[other])
        f.items = res.items.copy()
        f.items[[k, other]] = f.items[[other, k]]
    try:
        ok = am.verify_certificate(f, W, b, **box)
    except ValueError:
        return
    assert not ok[k] or (forgery == "items" and not ok.all())


def test_an_upper_radius_finer_than_float_rounding_is_checked_exactly():
    """A DFT head's thin label set (W^DFT_{512,9}, box 1e4): the LP's dual bound 4.99e-9 is a true bound whose
    float64 re-check needs ~1e-10 of rounding room; the verifier re-checks that certificate in rational arithmetic,
    and still refuses the same certificate for a bound below the set's witnessed radius."""
    from argmaxable.theory.dft import dft_matrix

    W, Y = dft_matrix(512, 4), np.zeros((1, 512), dtype=bool)
    Y[0, [151, 176, 178, 190]] = True
    res = am.check_assignments(W, Y, bound=1e4, eps=1e-8, workers=1, exact_radius=True)
    assert res.status[0] == "unargmaxable" and 4e-9 < res.radius[0] < res.radius_upper[0] < 5e-9
    assert am.verify_certificate(res, W, items=Y, bound=1e4, eps=1e-8).all()
    res.radius_upper = np.array([0.99 * res.radius[0]])  # below a witnessed radius: no certificate can give it
    assert not am.verify_certificate(res, W, items=Y, bound=1e4, eps=1e-8).any()


def test_the_exact_recheck_reads_float_weights_on_normalised_rows():
    """A float certificate weighs the rows a_i / ||a_i|| (as the float stages and checks do): on rows of norms 1
    and 1000 the weights (0.5, 0.5) cancel exactly (N = 0) and (0.5, 0.4) bound the radius by exactly
    0.1 * 100 / 0.9; the rational re-check, run where the float check refuses, agrees on both sides of it."""
    from types import SimpleNamespace

    from argmaxable.verify_exact import with_exact_certificates

    W, signs, lo, hi = np.array([[1.0, 0.0], [-1000.0, 0.0]]), np.array([[True, True]]), np.full(2, -100.0), \
        np.full(2, 100.0)
    result = SimpleNamespace(items=np.array([0]), certificates=[(np.array([0, 1]), np.array([0.5, 0.5]))])
    check = with_exact_certificates(result, W, np.zeros(2), signs, lo, hi, lambda pos, e: np.zeros(len(pos), bool))
    assert check(np.array([0]), 0.0).all()
    result.certificates = [(np.array([0, 1]), np.array([0.5, 0.4]))]
    bound = 10.0 / 0.9
    assert check(np.array([0]), bound * (1 + 1e-12)).all()
    assert not check(np.array([0]), bound * (1 - 1e-12)).any() and not check(np.array([0]), 0.0).any()


def test_cli_verify_refuses_a_layer_the_result_was_not_made_from(tmp_path, capsys):
    """The table of a 100-row layer "verified" against a 200-row one (rc 0, the extra rows never mentioned): the
    verifier now says which file it read and how many of its rows the result names, and refuses a layer whose
    files' sha256 the table's .meta.json does not record."""
    rng = np.random.default_rng(13)
    W = rng.standard_normal((100, 3))
    small, big, moved = tmp_path / "small.npz", tmp_path / "big.npz", tmp_path / "moved.npz"
    np.savez(small, W=W)
    np.savez(big, W=np.vstack([W, rng.standard_normal((100, 3)) * 1e-3]))
    W2 = W.copy()
    W2[0, 0] = np.nextafter(W2[0, 0], 0)  # one last bit: the same evidence may well hold, but it is another layer
    np.savez(moved, W=W2)
    out = tmp_path / "t.parquet"
    assert main(["check", "softmax", str(small), "--out", str(out), "--workers", "1"]) == 0
    capsys.readouterr()
    assert main(["verify", str(out), str(small)]) == 0
    assert f"from {small}" in capsys.readouterr().out
    assert main(["verify", str(out), str(big)]) == 2
    said = capsys.readouterr()
    assert "covers 100 of the layer's 200 categories" in said.out
    assert "not the one the result was made from" in said.err
    assert main(["verify", str(out), str(moved)]) == 2
    assert "not the one the result was made from" in capsys.readouterr().err


def test_evidence_file_members_are_read_only_when_known_and_bounded(tmp_path):
    """A small .npz that expands to gigabytes: an unknown member is never read (its data may even be cut short), and
    a known member whose header declares more entries than the result's items is refused before its data is read."""
    import zipfile

    W = np.random.default_rng(11).standard_normal((50, 3))
    path = tmp_path / "r.npz"
    am.check_categories(W).save(path)
    with zipfile.ZipFile(path, "a") as z, z.open("junk.npy", "w", force_zip64=True) as fh:
        np.lib.format.write_array_header_1_0(fh, {"descr": "<f8", "fortran_order": False, "shape": (2**40,)})
        fh.write(bytes(64))  # 8 TiB declared, 64 bytes present
    res = CheckResult.load(path, W=W)
    assert am.verify_certificate(res, W).all()
    bomb = tmp_path / "bomb.npz"
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as z:
        for name in src.namelist():
            if name not in ("status.npy", "junk.npy"):
                z.writestr(name, src.read(name))
        with z.open("status.npy", "w", force_zip64=True) as fh:
            np.lib.format.write_array_header_1_0(fh, {"descr": "<U12", "fortran_order": False, "shape": (2**31,)})
            fh.write(bytes(1 << 20))  # 96 GiB declared
    with pytest.raises(ValueError, match="member 'status' has shape"):
        CheckResult.load(bomb, W=W)


def _exact_normalised_bound(W, signs, rows, weights, bound):
    """The oracle: N(z) / sum y of float weights over normalised label-set rows a_i = -s_i w_i at the box |x_j| <=
    bound, with z_i = y_i / ||a_i|| bracketed by exact fractions (||a_i||^2 is rational: its root is bracketed to
    2^-200 relative by bisection on squares), the supremum over the box and the brackets taken exactly."""
    from fractions import Fraction

    total, num, v_lo, v_hi = Fraction(0), Fraction(0), [Fraction(0)] * W.shape[1], [Fraction(0)] * W.shape[1]
    for i, y in zip(rows, weights, strict=True):
        a = [-int(signs[i]) * Fraction(float(w)) for w in W[i]]
        square = sum(v * v for v in a)
        lo, hi = Fraction(0), max(square, Fraction(1))
        while hi - lo > hi * Fraction(1, 2**200):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if mid * mid <= square else (lo, mid)
        y = Fraction(float(y))
        total += y
        for j, v in enumerate(a):
            ends = (y / hi * v, y / lo * v)
            v_lo[j] += min(ends)
            v_hi[j] += max(ends)
    B = Fraction(float(bound))
    num = sum(max(-lo * B, lo * B, -hi * B, hi * B) for lo, hi in zip(v_lo, v_hi, strict=True))
    return num / total


def test_the_integer_recheck_of_float_certificates_agrees_with_exact_fractions():
    """LP certificates of label sets of a 60 x 4 Gaussian head (box 1e4): the verifier's rational re-check (run
    with the float check refusing everything) accepts each at 1.001 times the oracle's exact bound (fractions
    throughout, an independent bracketing of the norms) and refuses it at 0.999 times, where that is above 0."""
    from argmaxable.verify_exact import with_exact_certificates

    rng = np.random.default_rng(5)
    W = rng.standard_normal((60, 4))
    Y = [np.sort(rng.choice(60, int(rng.integers(1, 6)), replace=False)).tolist() for _ in range(12)]
    res = am.check_assignments(W, Y, workers=1)
    S = np.zeros((len(Y), 60), dtype=bool)
    for r, active in enumerate(Y):
        S[r, active] = True
    lo, hi = np.full(4, -1e4), np.full(4, 1e4)
    check = with_exact_certificates(res, W, np.zeros(60), S, lo, hi, lambda pos, e: np.zeros(len(pos), bool))
    tried = 0
    for p, (rows, weights) in enumerate(res.certificates):
        rows, weights = np.asarray(rows), np.asarray(weights)
        if not rows.size:
            continue
        signs = np.where(S[p], 1, -1)
        exact = float(_exact_normalised_bound(W, signs, rows[weights > 0], weights[weights > 0], 1e4))
        assert check(np.array([p]), exact * 1.001 + 1e-300).all(), p
        if exact > 0:
            assert not check(np.array([p]), exact * 0.999).any(), p
        tried += 1
    assert tried >= 5
