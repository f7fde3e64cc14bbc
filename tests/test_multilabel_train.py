"""End to end on a tiny synthetic dataset: train (with resume), verify, aggregate."""

import json
from itertools import pairwise

import numpy as np
import pandas as pd
import pytest
from datasets import Dataset, DatasetDict

from argmaxable.multilabel import train as train_mod
from argmaxable.multilabel.aggregate import FIGURES, TABLES, aggregate, load_tables
from argmaxable.multilabel.schema import VerifyConfig
from argmaxable.multilabel.train import fit
from argmaxable.multilabel.verify import verify_arrays

N_LABELS = 12
RUN = {
    "encoder": {"kind": "cnn", "embed_dim": 8, "filters": 16, "width": 2, "dropout": 0.0, "vocab_min_count": 1},
    "d": [2], "k_active": 2, "metric_k": 3, "lr_encoder": 0.01, "lr_classifier": 0.01, "batch_size": 16,
    "patience": 10, "max_epochs": 3, "criterion": "p@k", "threads": 1, "device": "cpu",
}


def tiny_dataset(seed=0) -> DatasetDict:
    """Each label i has a word ``tagi``; texts hold their labels' words plus noise words."""
    rng = np.random.default_rng(seed)

    def split(m):
        labels = [sorted(rng.choice(N_LABELS, size=rng.integers(1, 4), replace=False).tolist()) for _ in range(m)]
        texts = [" ".join([f"tag{i}" for i in y] + [f"noise{j}" for j in rng.integers(0, 5, 3)]) for y in labels]
        return Dataset.from_dict({"id": [str(i) for i in range(m)], "text": texts, "labels": labels})

    return DatasetDict(train=split(96), dev=split(24), test=split(24))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """BSL and DFT runs of the tiny sweep under <root>/multilabel/tiny/<head>/d2/seed0."""
    root = tmp_path_factory.mktemp("results")
    dsd = tiny_dataset()
    dirs = []
    for head in ("bsl", "dft"):
        out = root / "multilabel" / "tiny" / head / "d2" / "seed0"
        fit(dsd, N_LABELS, out, head=head, d=2, seed=0, run=RUN)
        with np.load(out / "head.npz") as npz:
            table = verify_arrays(dict(npz), {s: dsd[s]["labels"] for s in ("dev", "test")}, VerifyConfig())
        table.to_parquet(out / "verify.parquet")
        dirs.append(out)
    return root, dirs, dsd


def test_fit_writes_metrics_curve_and_head(runs):
    _, dirs, dsd = runs
    for out in dirs:
        rec = json.loads((out / "train.json").read_text())
        assert rec["epochs"] == 3 and rec["steps"] == 3 * 6  # 96 examples / batch 16
        assert set(rec["metrics"]) == {"dev", "test"}
        with np.load(out / "head.npz") as npz:  # the saved predictions give the recorded thresholded metrics
            flat, offsets = npz["pred_test"], npz["pred_test_offsets"]
        predicted = [set(flat[a:b].tolist()) for a, b in pairwise(offsets)]
        gold = [set(y) for y in dsd["test"]["labels"]]
        tp = sum(len(p & g) for p, g in zip(predicted, gold, strict=True))
        errors = sum(len(p ^ g) for p, g in zip(predicted, gold, strict=True))
        test = rec["metrics"]["test"]
        assert test["exact_match"] == pytest.approx(np.mean([p == g for p, g in zip(predicted, gold, strict=True)]))
        assert test["micro_f1"] == pytest.approx(2 * tp / (2 * tp + errors) if tp + errors else 0.0)
        assert len(pd.read_csv(out / "curve.csv")) == 1 + 3  # the initial loss, then one evaluation per epoch
        assert not (out / "checkpoint.pt").exists()
        with np.load(out / "head.npz") as npz:
            assert npz["W"].shape == (N_LABELS, 2 if rec["head"] == "bsl" else 2 * 2 + 1 + 2)
            assert npz["WP"].shape == (N_LABELS, 16) and int(npz["k"]) == 2


def test_tag_words_are_learnt_up_to_the_oracle_precision(tmp_path):
    # Each label's word is in its texts, so a head without a bottleneck (d = n) can rank the gold labels first:
    # P@3 is then the oracle mean(min(|y|, 3) / 3), which no ranking exceeds; a ranking blind to the text gets
    # mean(|y|) / n in expectation. Trained for 20 epochs, the model must sit between, well above chance.
    dsd = tiny_dataset()
    run = {**RUN, "max_epochs": 20, "lr_encoder": 0.05, "lr_classifier": 0.05, "patience": 100}
    p_at_3 = fit(dsd, N_LABELS, tmp_path, head="bsl", d=N_LABELS, seed=0, run=run)["metrics"]["test"]["p@k"]
    sizes = np.array([len(y) for y in dsd["test"]["labels"]])
    oracle, chance = np.mean(np.minimum(sizes, 3) / 3), np.mean(sizes) / N_LABELS
    assert 2.5 * chance < p_at_3 <= oracle + 1e-12
    assert p_at_3 >= 0.8 * oracle


def test_dft_run_makes_every_k_active_assignment_argmaxable(runs):
    _, dirs, _ = runs
    table = pd.read_parquet(dirs[1] / "verify.parquet")
    head = table[(table["space"] == "head") & table["within_k"]]
    assert len(head) > 0 and (head["status"] == "argmaxable").all()  # thesis Thm 5.4
    # Predicted assignments come from a real input, so they are argmaxable in the encoder space too.
    pred = table[(table["space"] == "encoder") & (table["source"] == "pred")]
    assert (pred["status"] == "argmaxable").all()


def _interrupt_at_second_evaluation(monkeypatch):
    """Make training's second evaluation raise KeyboardInterrupt (a run killed midway); returns the real one."""
    real = train_mod._evaluate
    calls = {"n": 0}

    def crash_on_second(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(train_mod, "_evaluate", crash_on_second)
    return real


def test_interrupted_run_resumes_to_the_same_model(tmp_path, monkeypatch):
    dsd = tiny_dataset(1)
    fit(dsd, N_LABELS, tmp_path / "full", head="dft", d=2, seed=3, run=RUN)
    real = _interrupt_at_second_evaluation(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        fit(dsd, N_LABELS, tmp_path / "resumed", head="dft", d=2, seed=3, run=RUN)
    assert (tmp_path / "resumed" / "checkpoint.pt").exists()
    monkeypatch.setattr(train_mod, "_evaluate", real)
    fit(dsd, N_LABELS, tmp_path / "resumed", head="dft", d=2, seed=3, run=RUN)
    with np.load(tmp_path / "full" / "head.npz") as a, np.load(tmp_path / "resumed" / "head.npz") as b:
        np.testing.assert_allclose(a["W"], b["W"], atol=1e-6)
        np.testing.assert_allclose(a["WP"], b["WP"], atol=1e-5)
    curve = pd.read_csv(tmp_path / "resumed" / "curve.csv")
    assert curve["step"].tolist() == [0, 6, 12, 18]


def test_aggregate_writes_every_table_and_figure(runs):
    root, dirs, dsd = runs
    tables = aggregate(dirs, root / "multilabel" / "tables", root / "multilabel" / "figures")
    for name in TABLES:
        assert (root / "multilabel" / "tables" / f"{name}.md").exists()
    for name in FIGURES:
        assert (root / "multilabel" / "figures" / f"{name}.png").exists()
    t52 = tables["table_5_2"]
    assert set(t52.columns) >= {"eps_argmaxable_BSL", "eps_argmaxable_DFT", "one_argmaxable_DFT"}
    assert tables["table_4_2"].iloc[-1]["tiny"] == len(dsd["test"])  # the row of test-set sizes
    assert set(load_tables(root / "multilabel" / "tables")) >= set(TABLES)


def test_bad_criterion_is_rejected(tmp_path):
    with pytest.raises(ValueError, match="criterion"):
        fit(tiny_dataset(), N_LABELS, tmp_path, head="bsl", d=2, seed=0, run={**RUN, "criterion": "f1"})


def test_notebook_shows_the_tables_and_figures(runs, run_notebook):
    root, dirs, _ = runs
    aggregate(dirs, root / "multilabel" / "tables", root / "multilabel" / "figures")
    text = run_notebook("multilabel", root)
    assert "multilabel/tables/table_5_2.csv" in text and "No multilabel results" not in text



@pytest.mark.parametrize("change", ["settings", "data"])
def test_a_checkpoint_of_other_settings_or_data_is_not_resumed(tmp_path, monkeypatch, change):
    """A run interrupted under one learning rate (or on one dataset) and started again under another (or on a
    dataset rebuilt to the same shape) starts over: its head is the fresh run's of the new settings, and the
    stale checkpoint is gone."""
    dsd, run = tiny_dataset(1), dict(RUN)
    real = _interrupt_at_second_evaluation(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        fit(dsd, N_LABELS, tmp_path / "stale", head="dft", d=2, seed=3, run=run)
    assert (tmp_path / "stale" / "checkpoint.pt").exists()
    monkeypatch.setattr(train_mod, "_evaluate", real)
    if change == "settings":
        run = {**run, "lr_classifier": 0.05}
    else:
        dsd = tiny_dataset(2)
    fit(dsd, N_LABELS, tmp_path / "stale", head="dft", d=2, seed=3, run=run)
    fit(dsd, N_LABELS, tmp_path / "fresh", head="dft", d=2, seed=3, run=run)
    assert not (tmp_path / "stale" / "checkpoint.pt").exists()
    with np.load(tmp_path / "fresh" / "head.npz") as a, np.load(tmp_path / "stale" / "head.npz") as b:
        np.testing.assert_array_equal(a["W"], b["W"])
        np.testing.assert_array_equal(a["WP"], b["WP"])
    assert pd.read_csv(tmp_path / "stale" / "curve.csv")["step"].tolist() == [0, 6, 12, 18]

class _RunsCode:
    """A pickle payload: unpickling it calls os.system (what a crafted checkpoint would do)."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        import os

        return os.system, (f"touch {self.marker}",)


def test_a_crafted_checkpoint_cannot_run_code(tmp_path):
    import torch

    marker = tmp_path / "ran"
    torch.save({"model": _RunsCode(marker)}, tmp_path / "checkpoint.pt")
    with pytest.raises(ValueError, match="not a checkpoint of this training loop"):
        fit(tiny_dataset(), N_LABELS, tmp_path, head="bsl", d=2, seed=0, run=RUN)
    assert not marker.exists()


def wide_dataset(n: int, m: int, seed=0) -> DatasetDict:
    """A few training examples and dev/test splits of ``m`` examples over ``n`` labels."""
    rng = np.random.default_rng(seed)

    def split(size):
        labels = [sorted(rng.choice(n, size=rng.integers(1, 4), replace=False).tolist()) for _ in range(size)]
        texts = [" ".join(f"tag{i}" for i in y) for y in labels]
        return Dataset.from_dict({"id": [str(i) for i in range(size)], "text": texts, "labels": labels})

    return DatasetDict(train=split(32), dev=split(m), test=split(m))


def test_no_dense_label_or_score_matrix_of_a_whole_split_is_built(tmp_path, monkeypatch):
    # Dev and test hold m = 2000 examples over n = 8000 labels: a dense bool label matrix of either split is 16 MB,
    # its float32 logits 64 MB. Scored 16 examples at a time, the run's allocations stay under three quarters of the
    # first (its Python rows and the datasets library's own objects peak at 8.2 MiB with datasets 5.2), and a version
    # that builds either fails. (The DFT head starts every label at probability k/n, so its predicted
    # sets are small: an untrained BSL predicts about half the labels, and its predicted sets alone hold m n / 2
    # indices whatever the code does.)
    import tracemalloc

    n, m = 8000, 2000
    dsd = wide_dataset(n, m)
    run = {**RUN, "k_active": 3, "max_epochs": 1, "max_steps": 1}
    monkeypatch.setattr(train_mod, "_EVAL_BATCH", 16)
    fit(tiny_dataset(), N_LABELS, tmp_path / "warm", head="dft", d=2, seed=0, run=run)  # imports (torch's optimiser
    tracemalloc.start()                                                       # loads ~60 MB of modules) come first
    try:
        rec = fit(dsd, n, tmp_path / "wide", head="dft", d=2, seed=0, run=run)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert rec["steps"] == 1 and rec["stopped_by"] == "max_steps"
    assert peak < m * n * 3 // 4, f"peak {peak / 2**20:.1f} MiB: a whole split was made dense"


def test_verification_streams_the_label_sets(monkeypatch):
    # The core holds a call's assignments as an (m, n) sign matrix, and its working memory grows with m (about
    # 0.8 GB for 1024 assignments over BioASQ's 20000 labels): verification hands it CHUNK distinct assignments at
    # a time, never a whole split, and the verdicts are those of one call over all of them.
    from argmaxable.multilabel import verify as verify_mod

    n, m = 300, 60
    rng = np.random.default_rng(0)
    W = rng.standard_normal((n, 3))
    gold = [sorted(rng.choice(n, size=int(rng.integers(1, 3)), replace=False).tolist()) for _ in range(m)]
    npz = {"W": W, "WP": W, "Wb": np.zeros(n), "feature_bound": 1.0, "k": 2,
           "pred_test": np.zeros(0, dtype=np.int64), "pred_test_offsets": np.zeros(m + 1, dtype=np.int64)}
    cfg = VerifyConfig(splits=["test"], encoder_splits=[])
    whole = verify_arrays(npz, {"test": gold}, cfg)
    sizes = []
    real = verify_mod.check_assignments

    def counted(W, items, *args, **kwargs):
        sizes.append(len(items))
        return real(W, items, *args, **kwargs)

    monkeypatch.setattr(verify_mod, "check_assignments", counted)
    monkeypatch.setattr(verify_mod, "CHUNK", 8)
    streamed = verify_arrays(npz, {"test": gold}, cfg)
    distinct = len({tuple(y) for y in gold} | {()})  # the gold sets and the (empty) predicted one
    assert max(sizes) == 8 and sum(sizes) == distinct
    pd.testing.assert_frame_equal(streamed, whole)
