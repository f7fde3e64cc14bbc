"""The ledger where the stages' proofs meet: two proofs of opposite kinds make an item undecided."""

from __future__ import annotations

import numpy as np

from argmaxable.core.ledger import Ledger


def _ledger(k=3, threshold=None):
    ledger = Ledger(np.arange(k), kind="categories", eps=1e-8, threshold=threshold, settings={"eps": 1e-8})
    ledger.witness = np.full((k, 2), np.nan)
    return ledger


def test_a_certificate_against_a_standing_witness_makes_the_item_undecided():
    ledger = _ledger()
    ledger.witness[0] = [1.0, 2.0]
    ledger.prove(np.array([0]), "reflect", lower=1e-8)
    stands = ledger.refute(0, "lp", (np.array([1]), np.array([1.0])), -0.5, source="an LP dual bound")
    res = ledger.result()
    assert not stands and res.status[0] == "undecided"
    assert res.message[0] == ("stages disagree: a witness with margin > 1e-08 and an LP dual bound -0.5 <= eps "
                              "(numerical trouble)")
    assert res.certificates[0][0].size == 0 and res.answers["eps"][0] == "undecided"


def test_a_witness_against_a_standing_certificate_makes_the_item_undecided():
    ledger = _ledger()
    assert ledger.refute(1, "dual", (np.array([0, 2]), np.array([0.5, 0.5])), 0.0, "Gordan certificate")
    ledger.witness[1] = [0.0, 0.0]
    ledger.prove(np.array([1, 2]), "reflect", lower=1e-8)
    res = ledger.result()
    assert res.status.tolist() == ["undecided", "undecided", "argmaxable"]  # item 0: no stage proved it
    assert res.message[1].startswith("stages disagree: a certificate bounding the radius by 0 <= eps")
    assert ledger.stage.tolist() == ["", "dual", "reflect"]


def test_proofs_that_agree_stand_and_bounds_only_tighten():
    ledger = _ledger(threshold=1.0)
    ledger.witness[0] = [3.0, 0.0]
    ledger.prove(np.array([0]), "reflect", lower=1e-8)
    ledger.bound(0, 2.0, 5.0)
    ledger.bound(0, 1.5, 4.0)  # a looser lower bound and a tighter upper one
    ledger.bound(1, -np.inf, -np.inf)  # a zero row: no point at all
    ledger.refute(1, "lp", (np.array([2]), np.array([1.0])), -np.inf)
    res = ledger.result()
    assert res.status[:2].tolist() == ["argmaxable", "unargmaxable"]
    assert res.radius[0] == 2.0 and res.radius_upper[0] == 4.0 and res.radius[1] == -np.inf
    assert res.answers["1"][:2].tolist() == ["yes", "no"]


def test_withdrawn_evidence_leaves_the_item_undecided_without_a_witness():
    ledger = _ledger()
    ledger.witness[:] = 1.0
    ledger.prove(np.arange(3), "reflect", lower=1e-8)
    ledger.withdraw(np.array([False, True, False]), "the evidence does not hold")
    res = ledger.result()
    assert res.status.tolist() == ["argmaxable", "undecided", "argmaxable"]
    assert np.isnan(res.witness[1]).all() and res.message[1] == "the evidence does not hold"
