"""The small language model family: vocabulary, a tiny LM trained on CPU, saved like a released model,
downloaded (kind ``trained``), loaded with its tokens, checked, and reported (tables and Table 9's ranges)."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import argmaxable as am
from argmaxable.config import load_config
from argmaxable.detect.check import check_model
from argmaxable.detect.download import download_model
from argmaxable.detect.loaders import load_model
from argmaxable.lm.corpus import build_vocab, encode, windows
from argmaxable.lm.model import WindowLM, softmax_head
from argmaxable.lm.prevention import check_head, make_table
from argmaxable.lm.report import FIGURES, TABLES, by_box, make_report
from argmaxable.lm.schema import LMConfig
from argmaxable.lm.train import HEAD_KEY, MODEL_KEY, train_lm
from argmaxable.text import tokenize

REPO = Path(__file__).resolve().parents[1]
# A tiny corpus with clear next-word structure (so a few hundred steps learn it) and a long tail of rare words.
TRAIN = [f"the {a} reads the {b} file and writes the {b} log" for a in ("tool", "daemon", "library")
         for b in ("config", "data", "text", "image")] * 20 + ["an odd zebra", "a quiet yak"]
HELDOUT = ["the tool reads the data file and writes the data log",
           "the daemon reads the text file and writes the text log"]
DETECT = {"bound": 100.0, "patience": 2500, "eps": 1e-8, "solver": "highs", "workers": 1}


def tiny_cfg(**changes) -> dict:
    cfg = asdict(LMConfig())
    cfg.update(vocab_size=14, context=2, embed_dim=8, hidden=16, train_tokens=150 * 64, batch_size=64, lr=0.02,
               **changes)
    return cfg


def test_vocabulary_counts_and_ranks_follow_the_training_text():
    vocab = build_vocab(TRAIN, 8)
    counts = Counter(w for t in TRAIN for w in tokenize(t))
    words = vocab["token"][2:].tolist()
    assert vocab["token"][:2].tolist() == ["<eos>", "<unk>"]
    assert words == sorted(counts, key=lambda w: (-counts[w], w))[:6]  # most frequent, ties alphabetical
    assert vocab["count"][2:].tolist() == [counts[w] for w in words]
    assert vocab.loc[0, "count"] == len(TRAIN)  # one <eos> per description
    assert vocab.loc[1, "count"] == sum(counts.values()) - sum(counts[w] for w in words)
    assert sorted(vocab["rank"]) == list(range(1, 9)) and vocab.loc[vocab["count"].idxmax(), "rank"] == 1
    with pytest.raises(ValueError, match="'size' parameter of build_vocab must be at least 3"):
        build_vocab(TRAIN, 2)


def test_windows_pair_each_token_with_the_tokens_before_it():
    ids = encode(["a b", "c"], ["<eos>", "<unk>", "a", "b"])
    assert ids.tolist() == [2, 3, 0, 1, 0]  # c is unknown; each text ends with <eos>
    ctx, target = windows(ids, 2)
    assert ctx.tolist() == [[0, 0], [0, 2], [2, 3], [3, 0], [0, 1]] and target.tolist() == ids.tolist()


def test_window_lm_rejects_an_unknown_activation():
    with pytest.raises(ValueError, match="'activation' parameter of WindowLM must be one of"):
        WindowLM(5, 2, 4, 4, 2, "softplus")


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """A tiny LM (14 tokens, d = 2) trained, downloaded as kind 'trained', checked and reported."""
    tmp = tmp_path_factory.mktemp("lm")
    cfg = tiny_cfg()
    build_vocab(TRAIN, cfg["vocab_size"]).to_parquet(tmp / "vocab.parquet")
    key = MODEL_KEY.format(d=2)
    record = train_lm(tmp / "vocab.parquet", tmp / "lm" / key, tmp / "act.parquet", d=2, cfg=cfg,
                      texts={"train": TRAIN, "heldout": HELDOUT})
    model = {"name": key, "source": "file", "activation": "gelu",
             "params": {"path": "head.safetensors", "weight_key": "weight", "bias_key": "bias"},
             "download": {"kind": "trained", "path": str(tmp / "lm" / key)}}
    download_model(model, tmp / "data" / key)
    check_model(model, DETECT, tmp / "categories.parquet", tmp / "summary.json", root=tmp / "data" / key)
    tables = make_report([key], tmp / "vocab.parquet", [tmp / "lm" / key], [tmp / "act.parquet"],
                         [tmp / "categories.parquet"], [tmp / "out" / f"{t}.csv" for t in TABLES],
                         [tmp / "out" / f"{f}.png" for f in FIGURES])
    return {"tmp": tmp, "cfg": cfg, "key": key, "model": model, "record": record, "tables": tables}


def test_tiny_lm_learns_and_its_head_loads_like_a_released_model(tiny_run):
    tmp, key, record = tiny_run["tmp"], tiny_run["key"], tiny_run["record"]
    assert record["heldout_perplexity"] < 3 < record["n"]  # far below uniform over 14 tokens: it learned
    layer = load_model(tiny_run["model"], root=tmp / "data" / key)
    from safetensors.torch import load_file

    state = load_file(tmp / "lm" / key / "lm.safetensors")
    np.testing.assert_array_equal(layer.W, state["head.weight"].numpy())
    np.testing.assert_array_equal(layer.b, state["head.bias"].numpy())
    assert layer.W.shape == (14, 2) and layer.activation == "gelu"
    assert layer.tokens == pd.read_parquet(tmp / "vocab.parquet")["token"].tolist()


def test_training_is_deterministic(tiny_run, tmp_path):
    tmp, cfg = tiny_run["tmp"], tiny_run["cfg"]
    train_lm(tmp / "vocab.parquet", tmp_path / "again", tmp_path / "act.parquet", d=2, cfg=cfg,
             texts={"train": TRAIN, "heldout": HELDOUT})
    first = (tmp / "lm" / tiny_run["key"] / "head.safetensors").read_bytes()
    assert (tmp_path / "again" / "head.safetensors").read_bytes() == first


def test_tiny_lm_check_agrees_with_sampled_argmaxes(tiny_run):
    """Every token that wins the argmax at some sampled input is argmaxable; unargmaxable ones never win."""
    tmp = tiny_run["tmp"]
    layer = load_model(tiny_run["model"], root=tmp / "data" / tiny_run["key"])
    cats = by_box(pd.read_parquet(tmp / "categories.parquet"))["paper"]  # the paper's box, as checked below
    x = np.random.default_rng(0).uniform(-100, 100, (200_000, 2))
    winners = np.unique((x @ layer.W.T.astype(np.float64) + layer.b).argmax(axis=1))
    status = cats.set_index("category")["status"]
    assert (status[winners] == "argmaxable").all()
    assert (status == "unargmaxable").sum() > 0  # 14 tokens in d = 2: some cannot win
    res = am.check_categories(layer.W, b=layer.b, bound=100.0, eps=1e-8, patience=2500, solver="highs", workers=1,
                              progress=False)
    assert am.verify_certificate(res, layer.W, b=layer.b).all()
    assert res.status.tolist() == cats["status"].tolist()


def test_report_names_unargmaxable_tokens_and_activation_ranges(tiny_run):
    tmp, tables = tiny_run["tmp"], tiny_run["tables"]
    cats = by_box(pd.read_parquet(tmp / "categories.parquet"))["paper"]
    vocab = pd.read_parquet(tmp / "vocab.parquet")
    listed = tables["lm_unargmaxable_tokens"]
    listed = listed[listed["box"] == "paper"].reset_index(drop=True)
    unarg = cats.loc[cats["status"] == "unargmaxable", "category"]
    assert sorted(listed["category"]) == sorted(unarg)
    assert listed["token"].tolist() == vocab["token"][listed["category"]].tolist()
    assert listed["rank"].is_monotonic_increasing  # most frequent first
    row = tables["lm_models"].set_index("box").loc["paper"]
    assert row["# unargmaxable"] == len(unarg) and row["d"] == 2
    assert row["most frequent unargmaxable tokens (rank)"].startswith(f"{listed['token'][0]} ({listed['rank'][0]})")
    t9 = tables["lm_table9"]
    assert t9["source"].str.startswith("002 Table 9").sum() == 2 and t9["source"].iloc[2].startswith("substitute")
    assert t9["origin"].tolist() == ["paper", "paper", "ours"]  # the report reads the ours rows only
    assert t9["min"].iloc[2] >= -0.1701  # GELU's minimum: the head's inputs respect the activation's bound
    act = tables["lm_activations"].set_index("quantity")
    assert act.loc["all coordinates", "values"] == 2 * act.loc["x_0", "values"]
    assert act.loc["all coordinates", "min"] == min(act.loc["x_0", "min"], act.loc["x_1", "min"])
    for name in [*TABLES]:
        assert (tmp / "out" / f"{name}.csv").is_file()
    assert (tmp / "out" / f"{FIGURES[0]}.png").stat().st_size > 0


def test_offline_default_has_a_checked_model_per_d_and_paper_turns_the_lm_off():
    cfg = load_config()
    assert list(cfg.lm.d) == [4, 8, 16, 32, 64]
    for d in cfg.lm.d:
        model = cfg.model[MODEL_KEY.format(d=d)]
        assert model.download.kind == "trained" and model.download.path == f"results/lm/{MODEL_KEY.format(d=d)}"
        assert model.activation == cfg.lm.activation
    assert not load_config(["experiment=paper"]).lm.enabled


def test_dry_run_names_a_missing_lm_model(tmp_path):
    out = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "1", "-s", str(REPO / "Snakefile"),
                          "-d", str(tmp_path), "--config", "overrides=model=[random_uniform]"],
                         capture_output=True, text=True, cwd=REPO)
    assert out.returncode != 0
    assert "lm.d asks for model 'debtags_lm_d4', which is not in the model list" in out.stderr
    assert "Traceback" not in out.stderr


def test_report_gives_one_row_per_box_of_a_two_box_detection_table(tiny_run, tmp_path):
    """Detection tables that check the activation's box too (column ``box``) give a row per d and box."""
    tmp, key = tiny_run["tmp"], tiny_run["key"]
    paper = by_box(pd.read_parquet(tmp / "categories.parquet"))["paper"].drop(columns="box")
    gelu = paper.assign(status="unargmaxable")  # stand-in verdicts: only the bookkeeping is under test
    pd.concat([paper.assign(box="paper"), gelu.assign(box="gelu")]).to_parquet(tmp_path / "two.parquet")
    tables = make_report([key], tmp / "vocab.parquet", [tmp / "lm" / key], [tmp / "act.parquet"],
                         [tmp_path / "two.parquet"], [tmp_path / "lm_models.csv"], [tmp_path / "fig.png"])
    rows = tables["lm_models"].set_index("box")["# unargmaxable"]
    assert rows.to_dict() == {"paper": int((paper["status"] == "unargmaxable").sum()), "gelu": len(paper)}
    assert (tables["lm_unargmaxable_tokens"]["box"] == "gelu").sum() == len(paper)


def test_guaranteed_heads_lose_no_token_where_the_plain_head_loses_some(tiny_run):
    """Prevention on the tiny corpus (14 tokens, d = 2): the spherical and DFT heads train, save the W of their
    weights(), keep every token (and the DFT head every sampled top-1 ranking) with verified certificates, and
    the table puts them beside the plain run, which loses tokens."""
    tmp, cfg = tiny_run["tmp"], tiny_run["cfg"]
    runs, checks = [], []
    for head in ("spherical", "dft"):
        run = tmp / "prevention" / HEAD_KEY.format(head=head, d=2)
        record = train_lm(tmp / "vocab.parquet", run, tmp / f"act_{head}.parquet", d=2, cfg=cfg, head=head,
                          texts={"train": TRAIN, "heldout": HELDOUT})
        assert record["model"] == f"{head}_d2" and record["heldout_perplexity"] < 14  # better than uniform
        check = check_head(run, tmp / f"check_{head}.parquet", rankings=5, seed=0, check=DETECT).iloc[0]
        assert check["tokens argmaxable"] == 14 and check["token certificates verified"]
        runs.append(run)
        checks.append(tmp / f"check_{head}.parquet")
    assert check["rankings argmaxable"] == check["rankings sampled"] == 5 and check["ranking certificates verified"]
    table = make_table([tmp / "lm" / tiny_run["key"]], [tmp / "categories.parquet"], runs, checks,
                       [tmp / "prev.parquet", tmp / "prev.md"], [tmp / "prev.png"]).set_index("head")
    assert table.loc["linear", "tokens unargmaxable"] == (by_box(pd.read_parquet(tmp / "categories.parquet"))[
        "paper"]["status"] == "unargmaxable").sum() > 0
    assert table.loc[["spherical", "dft"], "tokens unargmaxable"].tolist() == [0, 0]
    assert table.loc["linear", "held-out perplexity"] == round(tiny_run["record"]["heldout_perplexity"], 1)
    assert (tmp / "prev.png").stat().st_size > 0 and "spherical" in (tmp / "prev.md").read_text()


def test_softmax_head_refuses_an_odd_dft_width_and_an_unknown_head():
    with pytest.raises(ValueError, match="even width d = 2k"):
        softmax_head("dft", 3, 10)
    with pytest.raises(ValueError, match="'head' parameter must be one of"):
        softmax_head("mos", 4, 10)


def test_dry_run_names_a_prevention_width_without_its_plain_baseline(tmp_path):
    out = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "1", "-s", str(REPO / "Snakefile"),
                          "-d", str(tmp_path), "--config", "overrides=lm.prevention.d=[4,12]"],
                         capture_output=True, text=True, cwd=REPO)
    assert out.returncode != 0
    assert "lm.prevention.d has 12, which lm.d lacks (its plain run is the baseline)" in out.stderr
    assert "Traceback" not in out.stderr
