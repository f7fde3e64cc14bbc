"""Top-m sets, prescribed probabilities and top-k rankings (Basri & Jacobs §4.2, §6; thesis Prop. 5.3), against oracles
that are not the LP: angle sweeps in the plane, softmax evaluated at the witness, the DFT theorem, a ranking's
logits at its witness in exact rationals."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

import argmaxable as am
from argmaxable.constructions import dft_ranking_layer, uniform_probabilities
from argmaxable.core import check_prescribed, check_rankings, verify_prescribed, verify_rankings
from argmaxable.core.questions.prescribed import achieved


def test_set_feasible_only_with_a_positive_threshold():
    # Logits x, 2x, 3x: token 2 is the top-1 for every x > 0, and then all three logits are positive, so as a
    # sigmoid assignment (threshold 0) {2} alone is impossible; the top-m check needs tau in (2x, 3x), tau > 0.
    W = np.array([[1.0], [2.0], [3.0]])
    assert am.check_assignments(W, [[2]]).status.tolist() == ["unargmaxable"]
    res = am.check_top_m(W, [[2], [1], [1, 2]])
    assert res.status.tolist() == ["argmaxable", "unargmaxable", "argmaxable"]
    x, tau = res.witness[0]
    assert 2 * x < tau < 3 * x and tau > 0


def _top_by_angle(W: np.ndarray, m: int, ordered: bool = False) -> set:
    """Every top-m set (or, ``ordered``, top-m ranking) of W u(theta) (d = 2, no bias), by visiting each arc
    between consecutive angles where two logits tie: the order of the logits is constant on each open arc."""
    diffs = [W[i] - W[j] for i, j in itertools.combinations(range(len(W)), 2)]
    ties = np.sort(np.mod(np.concatenate([np.arctan2(v[1], v[0]) + np.array([np.pi / 2, -np.pi / 2])
                                          for v in diffs]), 2 * np.pi))
    mids = (ties + np.roll(ties, -1) + np.where(np.arange(ties.size) == ties.size - 1, 2 * np.pi, 0)) / 2
    found = set()
    for t in mids:
        z = W @ np.array([np.cos(t), np.sin(t)])
        top = tuple(np.argsort(-z)[:m].tolist())
        found.add(top if ordered else frozenset(top))
    return found


@pytest.mark.parametrize("seed", [0, 1])
def test_top_m_matches_exhaustive_angle_sweep(seed):
    W = np.random.default_rng(seed).standard_normal((7, 2))
    for m in (1, 2, 3):
        sets = [list(s) for s in itertools.combinations(range(7), m)]
        res = am.check_top_m(W, sets, workers=1)
        ours = {frozenset(s) for s, st in zip(sets, res.status, strict=True) if st == "argmaxable"}
        assert ours == _top_by_angle(W, m)
        assert not np.any(res.status == "undecided")


def test_prescribed_witness_gives_the_probabilities():
    rng = np.random.default_rng(0)
    W = rng.standard_normal((200, 40))
    sets = [rng.choice(200, size=m, replace=False) for m in (1, 2, 3, 4)]
    probs = [uniform_probabilities(len(s), rng) for s in sets]
    res = check_prescribed(W, sets, probs, workers=1)
    assert res.status.tolist() == ["argmaxable"] * 4
    assert verify_prescribed(res, W, sets, probs).all()
    for k, (S, p) in enumerate(zip(sets, probs, strict=True)):
        q, rest = achieved(W, None, res.witness[k][:-1], S)  # softmax at x, not the LP's view
        ratio = (q / p) / (q[np.argmin(p)] / p.min())
        assert np.all(np.abs(ratio - 1) < 0.05) and rest < 0.1


def test_prescribed_needs_the_top_m_and_a_margin():
    rng = np.random.default_rng(3)
    W = rng.standard_normal((400, 8))
    sets = [rng.choice(400, size=6, replace=False) for _ in range(12)]
    probs = [uniform_probabilities(6, rng) for _ in sets]
    top = am.check_top_m(W, sets, workers=1).status
    pres = check_prescribed(W, sets, probs, workers=1).status
    assert not np.any((pres == "argmaxable") & (top != "argmaxable"))  # prescribed implies top-m
    # A tiny delta asks for a larger logit gap than the box allows: with |x_j|, |tau| <= 1 nothing passes.
    small = check_prescribed(W, sets[:3], probs[:3], bound=1.0, delta=1e-12, workers=1).status
    assert small.tolist() == ["unargmaxable"] * 3


def test_tampered_prescribed_certificates_are_rejected():
    W = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0], [0.1, 0.1]])
    sets, probs = [[0, 1], [3]], [[0.3, 0.7], [1.0]]
    res = check_prescribed(W, sets, probs)
    assert res.status.tolist() == ["argmaxable", "unargmaxable"]
    assert verify_prescribed(res, W, sets, probs).all()
    res.witness[0, :2] *= 0.5  # the logit gap halves: the rest no longer sits below delta... or the ratio breaks
    res.witness[0, 1] += 0.3
    rows, weights = res.certificates[1]
    res.certificates[1] = (rows, np.roll(weights, 1))
    assert verify_prescribed(res, W, sets, probs).tolist() == [False, False]
    # The same evidence is not valid for other targets either.
    fresh = check_prescribed(W, sets, probs)
    assert not verify_prescribed(fresh, W, sets, [[0.05, 0.95], [1.0]])[0]


def test_tampered_top_m_certificate_is_rejected():
    W = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0], [0.1, 0.1]])
    sets = [[0, 1], [3], [0, 3]]
    res = am.check_top_m(W, sets)
    assert res.status.tolist() == ["argmaxable", "unargmaxable", "argmaxable"]
    assert am.verify_certificate(res, W, items=sets).all()
    res.witness[0, -1] = 10 * abs(res.witness[0]).max()  # a threshold above every logit
    rows, weights = res.certificates[1]
    res.certificates[1] = (rows, weights * np.linspace(0.2, 2.0, weights.size))
    assert am.verify_certificate(res, W, items=sets).tolist() == [False, False, True]


@pytest.mark.parametrize(("n", "k"), [(6, 2), (8, 2), (8, 3)])
def test_dft_layer_makes_every_top_k_ranking_argmaxable(n, k):
    W = dft_ranking_layer(n, k)  # (n, 2k): thesis Prop. 5.3
    rankings = list(itertools.permutations(range(n), k))
    assert len(rankings) == math.perm(n, k)
    res = check_rankings(W, rankings, workers=1)
    assert res.counts()["argmaxable"] == len(rankings)
    assert verify_rankings(res, W, rankings).all()
    for ranking, x in zip(rankings, res.witness, strict=True):  # in exact rationals, on the layer's own logits
        z = [sum(Fraction(float(w)) * Fraction(float(v)) for w, v in zip(row, x, strict=True)) for row in W]
        ranked = [z[t] for t in ranking]
        assert all(a > c for a, c in itertools.pairwise(ranked))
        assert ranked[-1] > max(z[j] for j in range(n) if j not in ranking)


def test_gaussian_layer_of_the_dft_shape_lacks_some_top_k_ranking():
    rankings = list(itertools.permutations(range(8), 2))
    res = check_rankings(np.random.default_rng(0).standard_normal((8, 4)), rankings, workers=1)
    assert res.counts()["unargmaxable"] > 0
    assert verify_rankings(res, np.random.default_rng(0).standard_normal((8, 4)), rankings).all()


def test_top_k_rankings_match_exhaustive_angle_sweep():
    W = np.random.default_rng(5).standard_normal((6, 2))
    for k in (1, 2, 3):
        rankings = list(itertools.permutations(range(6), k))
        res = check_rankings(W, rankings, workers=1)
        ours = {r for r, st in zip(rankings, res.status, strict=True) if st == "argmaxable"}
        assert ours == _top_by_angle(W, k, ordered=True)
