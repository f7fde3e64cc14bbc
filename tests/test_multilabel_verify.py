"""Verification of stored heads: counts against the alternation oracle; each distinct assignment solved once."""

import itertools

import numpy as np

from argmaxable.constructions import dft_matrix
from argmaxable.multilabel import verify as verify_mod
from argmaxable.multilabel.schema import VerifyConfig
from argmaxable.multilabel.verify import check_distinct, verify_arrays


def _npz(W, k, pred):
    flat = np.array([i for p in pred for i in p], dtype=np.int64)
    offsets = np.cumsum([0] + [len(p) for p in pred])
    return {"W": W, "WP": W, "Wb": np.zeros(len(W)), "feature_bound": 1e4, "k": k,
            "pred_test": flat, "pred_test_offsets": offsets}


def test_verify_counts_follow_the_alternation_oracle():
    """Thesis Thm 5.3: for W^DFT_{8,3}, an assignment is argmaxable iff it has at most 2 cyclic sign changes."""
    n, k = 8, 1
    gold = [list(c) for r in range(n + 1) for c in itertools.combinations(range(n), r)]
    expected = [sum(np.isin(np.arange(n), g) != np.isin(np.roll(np.arange(n), 1), g)) <= 2 * k for g in gold]
    cfg = VerifyConfig(splits=["test"], encoder_splits=["test"])
    out = verify_arrays(_npz(dft_matrix(n, k), k, [[0], []]), {"test": gold}, cfg)
    for space in ("head", "encoder"):
        rows = out[(out["space"] == space) & (out["source"] == "gold")].sort_values("example")
        np.testing.assert_array_equal(rows["status"] == "argmaxable", expected)
        assert (rows[rows["within_k"]]["status"] == "argmaxable").all()
    assert out[out["source"] == "pred"]["eps_argmaxable"].all()
    assert set(out["split"]) == {"test"} and len(out) == 2 * (len(gold) + 2)


def test_each_distinct_assignment_is_solved_once(monkeypatch):
    real, seen = verify_mod.check_assignments, []

    def counting(W, Y, b=None, **kw):
        seen.extend(map(tuple, Y))
        return real(W, Y, b, **kw)

    monkeypatch.setattr(verify_mod, "check_assignments", counting)
    status, radius, answers, exact = check_distinct(dft_matrix(8, 1), None, 1e4, [(0,), (0, 4), (0,), (1, 2)],
                                             VerifyConfig())
    assert sorted(seen) == [(0,), (0, 4), (1, 2)]
    assert status.tolist() == ["argmaxable", "unargmaxable", "argmaxable", "argmaxable"]
    assert radius[0] == radius[2] > 0
    assert answers["eps"].tolist() == ["yes", "no", "yes", "yes"] and answers["1"][1] == "no"
    assert exact["exact"].tolist() == exact["region"].tolist() == [""] * 4  # decided by the float stages
