"""Verification of stored heads: counts against the alternation oracle; each distinct assignment solved once; an
interrupted verification resumes from the chunks it kept."""

import itertools

import numpy as np
import pandas as pd
import pytest

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


def _gaussian_run(n=300, m=60, seed=0):
    rng = np.random.default_rng(seed)
    W = rng.standard_normal((n, 3))
    gold = [sorted(rng.choice(n, size=int(rng.integers(1, 3)), replace=False).tolist()) for _ in range(m)]
    npz = {"W": W, "WP": W, "Wb": np.zeros(n), "feature_bound": 1.0, "k": 2,
           "pred_test": np.zeros(0, dtype=np.int64), "pred_test_offsets": np.zeros(m + 1, dtype=np.int64)}
    return npz, {"test": gold}


def test_an_interrupted_verification_resumes_from_its_kept_chunks(tmp_path, monkeypatch):
    """Stopped at its fourth chunk, a verification keeps the three it checked; run again it checks only the rest
    and gives the table of an uninterrupted run; parts made with other settings, or cut short, are checked again."""
    npz, gold = _gaussian_run()
    cfg = VerifyConfig(splits=["test"], encoder_splits=[])
    whole = verify_arrays(npz, gold, cfg)
    calls, real = [], verify_mod.check_assignments

    def counted(W, items, *args, **kwargs):
        calls.append(len(items))
        if len(calls) == stop_at:
            raise KeyboardInterrupt
        return real(W, items, *args, **kwargs)

    monkeypatch.setattr(verify_mod, "check_assignments", counted)
    monkeypatch.setattr(verify_mod, "CHUNK", 8)
    parts = tmp_path / "verify.parquet.parts"
    stop_at = 4
    with pytest.raises(KeyboardInterrupt):
        verify_arrays(npz, gold, cfg, parts=parts)
    kept = sorted(parts.glob("*.npz"))
    assert len(kept) == 3
    chunks = -(-len({tuple(y) for y in gold["test"]} | {()}) // 8)
    calls.clear()
    stop_at = 0
    pd.testing.assert_frame_equal(verify_arrays(npz, gold, cfg, parts=parts), whole)
    assert len(calls) == chunks - 3
    calls.clear()
    verify_arrays(npz, gold, VerifyConfig(splits=["test"], encoder_splits=[], eps=2e-8), parts=parts)
    assert len(calls) == chunks  # another eps: no part is theirs
    calls.clear()
    kept[0].write_bytes(kept[0].read_bytes()[:100])
    pd.testing.assert_frame_equal(verify_arrays(npz, gold, cfg, parts=parts), whole)
    assert len(calls) == 1


def test_verify_run_removes_its_parts_once_the_table_is_written(tmp_path):
    import json

    from datasets import Dataset, DatasetDict

    from argmaxable.multilabel.verify import verify_run

    npz, gold = _gaussian_run(n=40, m=6)
    data = tmp_path / "dataset"
    DatasetDict(test=Dataset.from_dict({"labels": gold["test"]})).save_to_disk(str(data))
    (data / "labels.json").write_text(json.dumps([f"l{i}" for i in range(40)]))
    run = tmp_path / "run"
    run.mkdir()
    np.savez(run / "head.npz", **npz)
    out = run / "verify.parquet"
    table = verify_run(data, run, out, verify={"splits": ["test"], "encoder_splits": []})
    assert out.is_file() and not (run / "verify.parquet.parts").exists()
    assert len(table) == 12 and set(table["status"]) <= {"argmaxable", "unargmaxable"}
