"""The DFT head's proposed witnesses (thesis Prop. 5.1 / Thm 5.3's alternation construction) and the core's check of
proposals: brute force over every label set of small n, exact Fraction arithmetic on a sample, and the verdicts of
the path with proposals equal to those of the path without."""

import itertools
from fractions import Fraction

import numpy as np
import pytest

import argmaxable as am
from argmaxable.constructions import dft_matrix
from argmaxable.core import stages as stages_module
from argmaxable.core.questions import assignments as assignments_module
from argmaxable.multilabel.witnesses import alternation_coefficients, cyclic_runs, dft_proposals, is_dft_head


def _every_set(n):
    return [list(c) for r in range(n + 1) for c in itertools.combinations(range(n), r)]


def _exact_signs(W, x):
    """sign(W x) in exact rational arithmetic over the float64 entries as stored."""
    xs = [Fraction(float(v)) for v in x]
    return np.array([np.sign(sum(Fraction(float(w)) * v for w, v in zip(row, xs, strict=True))) for row in W])


def test_runs_on_the_circle_wrap_past_the_last_label():
    assert cyclic_runs([0, 1, 5, 9], 10).tolist() == [[5, 5], [9, 1]]
    assert cyclic_runs([2, 3, 4], 10).tolist() == [[2, 4]]
    assert cyclic_runs([], 10).shape == cyclic_runs(range(10), 10).shape == (0, 2)


@pytest.mark.parametrize("n", [7, 8, 9, 10, 11])
def test_every_set_within_k_runs_gets_a_point_with_its_signs(n):
    """Brute force, every label set of n labels and every k: a set of at most k runs (2k sign changes: thesis
    Thm 5.3's argmaxable sets) gets a point whose float64 logits have its signs; one beyond k runs gets none."""
    for k in range(1, (n - 1) // 2 + 1):
        W = dft_matrix(n, k)
        for active in _every_set(n):
            x = alternation_coefficients(active, n, k)
            if len(cyclic_runs(active, n)) > k:
                assert x is None, (n, k, active)
                continue
            signs = np.where(np.isin(np.arange(n), active), 1.0, -1.0)
            assert (signs * (W @ x) > 0).all(), (n, k, active)


def test_a_sample_of_points_holds_in_exact_arithmetic():
    """The float64 point's signs, computed exactly over the stored entries, on a seeded sample of n = 64, k = 4."""
    n, k = 64, 4
    rng = np.random.default_rng(0)
    W = dft_matrix(n, k)
    checked = 0
    while checked < 12:
        active = np.sort(rng.choice(n, rng.integers(1, 9), replace=False)).tolist()
        x = alternation_coefficients(active, n, k)
        if x is None:
            continue
        signs = np.where(np.isin(np.arange(n), active), 1, -1)
        assert (_exact_signs(W, x) == signs).all(), active
        checked += 1


def test_proposals_need_the_dft_columns():
    n, k = 12, 2
    W = np.hstack([dft_matrix(n, k), np.random.default_rng(0).standard_normal((n, 2))])
    assert is_dft_head(W, k) and not is_dft_head(W[::-1], k)
    P, R = dft_proposals(W, k, [[0], [0, 2, 4, 6, 8]])
    assert np.isfinite(P[0]).all() and (P[0, 2 * k + 1 :] == 0).all()
    assert np.isnan(P[1]).all()  # five runs > k
    # every GRID-th label (here only label 0) and the labels within NEAR of an active one, on the circle
    assert R[0].tolist() == [0, 1, 2, 3, 9, 10, 11]
    P, R = dft_proposals(W[::-1], k, [[0]])
    assert np.isnan(P).all() and R[0].size == 0


def test_proposals_give_the_verdicts_of_the_stages():
    """DFT n = 40, k = 3 with 2 slack columns: a seeded sample of 60 label sets of 1-8 labels, checked with the
    proposals and without; the verdicts and both answers are equal, the proposals close some sets, and every
    verdict passes the independent verifier."""
    n, k = 40, 3
    rng = np.random.default_rng(1)
    W = np.hstack([dft_matrix(n, k), rng.standard_normal((n, 2)) / np.sqrt(n)])
    Y = [np.sort(rng.choice(n, rng.integers(1, 9), replace=False)).tolist() for _ in range(60)]
    old = am.check_assignments(W, Y, workers=1)
    P, R = dft_proposals(W, k, Y)
    new = am.check_assignments(W, Y, workers=1, proposals=P, proposal_rows=R)
    assert new.status.tolist() == old.status.tolist()
    assert new.answers["1"].tolist() == old.answers["1"].tolist()
    closed = np.array(["proposed witness" in m for m in new.message])
    assert closed.sum() >= 10
    assert (new.lp_rounds[closed] == 0).all()
    assert am.verify_certificate(new, W, items=Y).all()


def test_a_wrong_proposal_is_not_trusted():
    """A point that is no witness (the origin's antipode of a witness) leaves the set to the stages: an
    unargmaxable set stays unargmaxable, an argmaxable one is still proven."""
    n, k = 12, 1
    W = dft_matrix(n, k)
    Y = [[0], [0, 6]]  # one run; two runs > k: unargmaxable (thesis Thm 5.3)
    wrong = -np.vstack([alternation_coefficients([0], n, k)] * 2)
    res = am.check_assignments(W, Y, workers=1, proposals=wrong)
    assert res.status.tolist() == ["argmaxable", "unargmaxable"]
    assert am.verify_certificate(res, W, items=Y).all()


def test_proposals_of_the_wrong_shape_are_refused():
    with pytest.raises(ValueError, match="'proposals' parameter must have shape"):
        am.check_assignments(dft_matrix(8, 1), [[0]], proposals=np.zeros((1, 2)))


@pytest.mark.parametrize("rows, match", [
    ([[0], [1]], "must hold 1 arrays"),
    ([[8]], r"label indices in \[0, 8\)"),
    ([[0.5]], "label indices"),
    ([[[0]]], "1-D arrays"),
])
def test_proposal_rows_that_name_no_label_are_refused(rows, match):
    W = dft_matrix(8, 1)
    with pytest.raises(ValueError, match=match):
        am.check_assignments(W, [[0]], proposals=np.zeros((1, 3)), proposal_rows=rows)


def test_proposal_rows_need_proposals():
    with pytest.raises(ValueError, match="'proposal_rows' parameter needs 'proposals'"):
        am.check_assignments(dft_matrix(8, 1), [[0]], proposal_rows=[[0]])


def test_the_lp_starts_from_the_proposal_and_its_rows(monkeypatch):
    """A proposal that cannot stand (the antipode of a witness) with rows given: the set's LP starts at it scaled to
    the box's edge, its first working set holds those rows, and the verdict is the one without them (proven,
    verified)."""
    n, k = 200, 6
    W = np.hstack([dft_matrix(n, k), np.random.default_rng(5).standard_normal((n, 1)) / np.sqrt(n)])
    Y = [[3, 4, 20, 41, 90]]
    P = -np.r_[alternation_coefficients(Y[0], n, k), 0.0][None]
    R = [np.arange(0, n, 7)]
    seen = []
    chebyshev = stages_module.chebyshev

    def spy(A, c, box, lp=None, start=None):
        seen.append(start)
        return chebyshev(A, c, box, lp, start)

    monkeypatch.setattr(stages_module, "chebyshev", spy)
    res = am.check_assignments(W, Y, workers=1, proposals=P, proposal_rows=R)
    assert len(seen) == 1 and np.array_equal(seen[0].rows, R[0])
    assert np.allclose(seen[0].x, P[0] * (1e4 / np.abs(P[0]).max()))
    monkeypatch.undo()
    old = am.check_assignments(W, Y, workers=1)
    assert res.status.tolist() == old.status.tolist() == ["argmaxable"]
    assert am.verify_certificate(res, W, items=Y).all()


def _scipy_radius(W, active, bound):
    """The oracle: the Chebyshev radius over every row at once, scipy's linprog (no working set, none of the
    package's code)."""
    from scipy.optimize import linprog

    n, d = W.shape
    s = -np.ones(n)
    s[np.asarray(active, dtype=np.int64)] = 1.0
    A = -s[:, None] * W / np.linalg.norm(W, axis=1)[:, None]
    out = linprog(np.r_[np.zeros(d), -1.0], A_ub=np.hstack([A, np.ones((n, 1))]), b_ub=np.zeros(n),
                  bounds=[(-bound, bound)] * d + [(None, None)], method="highs")
    assert out.status == 0
    return -out.fun


def test_verdicts_with_proposals_are_those_of_one_lp_over_every_row():
    """DFT n = 200, k = 6 with one N(0, 1/n) slack column, 40 seeded label sets of 1-9 labels checked with the
    construction's proposals: where scipy's LP over all 200 rows puts the radius clear of eps (a factor 2) and of 1,
    the status says radius > eps and the "1" answer radius > 1 as it does; every verdict passes the verifier, and
    the proposals alone prove some sets argmaxable with no LP over the rows."""
    n, k = 200, 6
    rng = np.random.default_rng(3)
    W = np.hstack([dft_matrix(n, k), rng.standard_normal((n, 1)) / np.sqrt(n)])
    Y = [np.sort(rng.choice(n, rng.integers(1, 10), replace=False)).tolist() for _ in range(40)]
    P, R = dft_proposals(W, k, Y)
    res = am.check_assignments(W, Y, workers=1, proposals=P, proposal_rows=R)
    assert am.verify_certificate(res, W, items=Y).all()
    compared = 0
    for j, active in enumerate(Y):
        r = _scipy_radius(W, active, 1e4)
        if not (r > 2e-8 or r < 0.5e-8) or abs(r - 1) < 1e-6:
            continue
        assert (res.status[j] == "argmaxable") == (r > 1e-8), (j, r, res.status[j])
        assert res.answers["1"][j] == ("yes" if r > 1 else "no"), (j, r, res.answers["1"][j])
        compared += 1
    assert compared >= 30
    free = (res.status == "argmaxable") & (res.lp_rounds == 0)
    assert free.sum() >= 5


def _local_lps(monkeypatch, W, k, Y):
    """The check of label sets ``Y`` with the construction's proposals, and how many local LPs it ran and how many
    of them bounded their set's radius by 1."""
    calls = []
    local_upper = assignments_module.Proposed._local_upper

    def counted(self, *args, **kwargs):
        calls.append(local_upper(self, *args, **kwargs))
        return calls[-1]

    monkeypatch.setattr(assignments_module.Proposed, "_local_upper", counted)
    P, R = dft_proposals(W, k, Y)
    return am.check_assignments(W, Y, workers=1, proposals=P, proposal_rows=R), len(calls), sum(calls)


def test_local_lps_stop_where_the_first_bound_nothing(monkeypatch):
    """DFT n = 300, k = 4 and 120 seeded sets of 1-4 labels. With 30 N(0, 1/n) columns beside the DFT's the regions
    reach past radius 1 and no local LP bounds its set: the check runs LOCAL_PROBE of them, and its verdicts, answers
    and radii are those of the check that runs them all. The DFT head alone: its local LPs bound sets, and all run."""
    n, k = 300, 4
    rng = np.random.default_rng(0)
    Y = [np.sort(rng.choice(n, rng.integers(1, 5), replace=False)).tolist() for _ in range(120)]
    wide = np.hstack([dft_matrix(n, k), rng.standard_normal((n, 30)) / np.sqrt(n)])
    res, ran, bounded = _local_lps(monkeypatch, wide, k, Y)
    assert (ran, bounded) == (assignments_module.LOCAL_PROBE, 0)
    monkeypatch.setattr(assignments_module, "LOCAL_PROBE", 10**6)
    every, ran_all, bounded_all = _local_lps(monkeypatch, wide, k, Y)
    assert ran_all > ran and bounded_all == 0
    assert np.array_equal(res.status, every.status) and np.array_equal(res.radius, every.radius)
    assert np.array_equal(res.answers["1"], every.answers["1"])
    assert am.verify_certificate(res, wide, items=Y).all()
    monkeypatch.setattr(assignments_module, "LOCAL_PROBE", 32)
    _, ran, bounded = _local_lps(monkeypatch, dft_matrix(n, k), k, Y)
    assert ran > 32 and bounded > 0
