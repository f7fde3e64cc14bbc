"""Download -> filter -> check -> table on tiny models in each released format: every transformers family the
paper checks (save_pretrained, OPUS-MT's as a legacy non-zip pytorch_model.bin), served from a pre-filled
Hugging Face cache with the download patterns of the real configs; Nematus and Marian .npz releases from
file:// URLs. The verdicts must equal a check of the model's own output layer (probed through the module, not
our loader), the target-script counts those of the tokens we planted, and a sharded check the same table."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pytest
import torch
from scipy.spatial import ConvexHull
from test_detect_loaders import output_layer, saved

import argmaxable as am
from argmaxable.config import load_config
from argmaxable.detect.check import check_model, check_model_shard, make_detect_table, merge_model_shards
from argmaxable.detect.download import download_model

DETECT = {"bound": 100.0, "patience": 50, "eps": 1e-8, "solver": "highs", "workers": 1}
PAPER = load_config(["experiment=paper"]).model  # the real configs' download patterns
CONFIG_OF = {"bert": "bert_base_cased", "roberta": "roberta_base", "xlm-roberta": "xlm_roberta_base",
             "gpt2": "gpt2", "marian": "opus_mt_ar_el", "fsmt": "wmt19_en_ru"}
N = 53  # rows of the tiny models (test_detect_loaders.MODELS)
GREEK = ["▁του", "▁και", "ματα", "ή", "▁Ευρώπη"]
ARABIC = ["▁في", "ال", "▁من", "ة"]


def vocabulary(kind: str, path) -> list[str]:
    """Write the family's own vocabulary file(s) for N rows; return the tokens by id."""
    words = [f"w{i}" for i in range(N)]
    if kind == "bert":
        tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words[5:]]
        (path / "vocab.txt").write_text("\n".join(tokens) + "\n", encoding="utf-8")
    elif kind == "xlm-roberta":
        tokens = ["<s>", "<pad>", "</s>", "<unk>", *[f"▁{w}" for w in words[4:]]]
        tok = {"model": {"type": "Unigram", "vocab": [[t, -1.0] for t in tokens[:-1]]},
               "added_tokens": [{"id": N - 1, "content": "<mask>"}]}
        tokens[-1] = "<mask>"
        (path / "tokenizer.json").write_text(json.dumps(tok), encoding="utf-8")
    elif kind == "marian":  # opus-mt-ar-el: one shared vocabulary of both scripts, <pad> last
        tokens = ["</s>", "<unk>", *GREEK, *ARABIC, *[f"▁{i}" for i in range(N - 12)], "<pad>"]
        tokens[20] = "▁Ελλάδα2"  # digits: not counted
        (path / "vocab.json").write_text(json.dumps({t: i for i, t in enumerate(tokens)}), encoding="utf-8")
    elif kind == "fsmt":  # wmt19-en-ru: its target vocabulary, BPE end-of-word and continuation markers
        tokens = ["<s>", "<pad>", "</s>", "<unk>", "в</w>", "при@@", "ния</w>", *[f"{w}</w>" for w in words[7:]]]
        (path / "vocab-tgt.json").write_text(json.dumps({t: i for i, t in enumerate(tokens)}), encoding="utf-8")
        (path / "vocab-src.json").write_text(json.dumps({"the</w>": 0}), encoding="utf-8")
    else:  # gpt2, roberta: byte-level BPE vocab.json
        tokens = [f"Ġ{w}" for w in words]
        (path / "vocab.json").write_text(json.dumps({t: i for i, t in enumerate(tokens)}), encoding="utf-8")
    return tokens


def hub_cache(cache, repo: str, files, commit: str = "0123456789abcdef0123456789abcdef01234567"):
    """Lay ``files`` out as the Hugging Face cache holds a downloaded revision (refs/main -> snapshot)."""
    root = cache / f"models--{repo.replace('/', '--')}"
    shutil.copytree(files, root / "snapshots" / commit)
    (root / "refs").mkdir()
    (root / "refs" / "main").write_text(commit)
    return commit


@pytest.fixture
def offline_hub(tmp_path, monkeypatch):
    import huggingface_hub.constants as constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)  # a pre-filled cache, no network
    return tmp_path / "hub"


@pytest.mark.parametrize("kind", list(CONFIG_OF))
def test_hub_family_download_filter_check_table(tmp_path, offline_hub, kind):
    model = saved(kind, tmp_path / "saved")
    if kind == "marian":  # the legacy (torch < 1.6) non-zip pickle, as early hub uploads are
        from safetensors.torch import load_file

        state = load_file(str(tmp_path / "saved" / "model.safetensors"))
        (tmp_path / "saved" / "model.safetensors").unlink()
        torch.save(state, tmp_path / "saved" / "pytorch_model.bin", _use_new_zipfile_serialization=False)
    tokens = vocabulary(kind, tmp_path / "saved")
    (tmp_path / "saved" / "README.md").write_text("not matched by allow_patterns")
    cfg = {**PAPER[CONFIG_OF[kind]]}
    repo = cfg["download"]["repo"]
    commit = hub_cache(offline_hub, repo, tmp_path / "saved")

    root = tmp_path / "data" / "models" / CONFIG_OF[kind]
    manifest = download_model(cfg, root)
    assert manifest["source"] == f"huggingface:{repo}" and manifest["revision"] == commit
    assert "README.md" not in manifest["files"] and "config.json" in manifest["files"]

    summary = check_model(cfg, DETECT, tmp_path / "categories.parquet", tmp_path / "summary.json", root=root)
    table = pd.read_parquet(tmp_path / "categories.parquet")
    W, b = output_layer(model)
    ref = am.check_categories(W, b=b, bound=DETECT["bound"], patience=DETECT["patience"], eps=DETECT["eps"])
    assert table["status"].tolist() == ref.status.tolist()
    assert table["token"].tolist() == tokens
    whole = summary["whole_vocabulary"]
    assert whole["unargmaxable"] == int((ref.status == "unargmaxable").sum())
    if cfg.get("script"):
        counted = [t for t in tokens if am.detect.vocab.in_script(t, cfg["script"])]
        expected = {"marian": ["</s>", "<unk>", *GREEK, "<pad>"],
                    "fsmt": ["<s>", "<pad>", "</s>", "<unk>", "в</w>", "при@@", "ния</w>"]}[kind]
        assert counted == expected and summary["counted"] == len(expected)
        mask = table["counted"].to_numpy()
        assert summary["unargmaxable"] == int((table["status"][mask] == "unargmaxable").sum())
    else:
        assert summary["counted"] == N and summary["unargmaxable"] == whole["unargmaxable"]
    out = make_detect_table([tmp_path / "summary.json"], [tmp_path / "detect.md"])
    assert out["whole vocabulary # unargmaxable"].tolist() == [whole["unargmaxable"]]


def test_script_filter_counts_only_target_tokens(tmp_path, offline_hub):
    """opus-mt-ar-el with a Greek and an Arabic token planted inside the hull (no bias): the paper's count
    has the Greek one only, the whole vocabulary both; Qhull (not our code) gives the whole set."""
    model = saved("marian", tmp_path / "saved")
    emb = model.get_output_embeddings().weight  # tied: (N, 8)
    with torch.no_grad():
        emb[2] = emb[10:].mean(0)  # "▁του" at a centroid: strictly inside the hull
        emb[7] = emb[12:].mean(0)  # "▁في"
        model.final_logits_bias.zero_()
    model.save_pretrained(tmp_path / "saved")
    tokens = vocabulary("marian", tmp_path / "saved")
    cfg = {**PAPER["opus_mt_ar_el"]}
    hub_cache(offline_hub, cfg["download"]["repo"], tmp_path / "saved")
    download_model(cfg, tmp_path / "m")
    summary = check_model(cfg, DETECT, tmp_path / "c.parquet", tmp_path / "s.json", root=tmp_path / "m")
    W = emb.detach().numpy()
    inside = np.ones(N, bool)
    inside[ConvexHull(W).vertices] = False
    assert inside[2] and inside[7]
    assert summary["whole_vocabulary"]["unargmaxable"] == int(inside.sum())
    greek = [i for i in np.flatnonzero(inside) if i in (0, 1, 2, 3, 4, 5, 6, N - 1)]
    assert summary["unargmaxable_categories"] == greek and "▁του" in summary["unargmaxable_tokens"]
    assert "▁في" not in summary["unargmaxable_tokens"] and summary["unargmaxable"] == len(greek)
    assert tokens[2] == "▁του"


def _npz_release(path, kind: str):
    rng = np.random.default_rng(3)
    W, b = rng.normal(size=(30, 4)), rng.normal(size=30)
    if kind == "nematus":  # Edinburgh WMT'17: tied decoder embeddings, bias ff_logit_b
        np.savez(path, Wemb=rng.normal(size=(7, 4)), Wemb_dec=W, ff_logit_b=b)
    else:  # Marian (Bergamot): untied output layer stored d x n, bias (1, n)
        np.savez(path, Wemb=rng.normal(size=(30, 4)), decoder_ff_logit_out_W=W.T, decoder_ff_logit_out_b=b[None])
    return W, b


@pytest.mark.parametrize("key", ["wmt17_en_de_l2r_1", "bergamot_en_de_student_tiny11"])
def test_npz_release_by_url_then_sharded_check(tmp_path, key):
    W, b = _npz_release(tmp_path / "release.npz", "nematus" if key.startswith("wmt17") else "marian")
    cfg = {**PAPER[key], "download": {**PAPER[key]["download"], "url": (tmp_path / "release.npz").as_uri()}}
    root = tmp_path / "m"
    manifest = download_model(cfg, root)
    assert set(manifest["files"]) == {"model.npz"}
    single = check_model(cfg, DETECT, tmp_path / "one.parquet", tmp_path / "one.json", root=root)
    ref = am.check_categories(W, b=b, bound=DETECT["bound"], patience=DETECT["patience"], eps=DETECT["eps"])
    assert pd.read_parquet(tmp_path / "one.parquet")["status"].tolist() == ref.status.tolist()
    tables, facts = [], []
    for shard in range(3):
        tables.append(tmp_path / f"shard{shard}.parquet")
        facts.append(tmp_path / f"shard{shard}.json")
        check_model_shard(cfg, DETECT, shard, 3, tables[-1], facts[-1], root=root)
    assert [len(pd.read_parquet(t)) for t in tables] == [10, 10, 10]
    merged = merge_model_shards(cfg, tables, facts, tmp_path / "merged.parquet", tmp_path / "merged.json")
    one, both = pd.read_parquet(tmp_path / "one.parquet"), pd.read_parquet(tmp_path / "merged.parquet")
    # An unargmaxable class's certificate may come from another class's LP (shared supports, core/supports.py),
    # and which classes share a job differs between the runs: only its bound, rounds and message may differ.
    provenance = ["radius_upper", "lp_rounds", "message"]
    pd.testing.assert_frame_equal(both.drop(columns=provenance), one.drop(columns=provenance))
    moved = ~np.logical_and.reduce([one[c].eq(both[c]) | (one[c].isna() & both[c].isna()) for c in provenance])
    assert (one.loc[moved, "status"] == "unargmaxable").all() and (both.loc[moved, "radius_upper"] <= 1e-8).all()
    drop = ("seconds",)
    assert {k: v for k, v in merged.items() if k not in drop} == {k: v for k, v in single.items() if k not in drop}
    with pytest.raises(ValueError, match="do not cover"):
        merge_model_shards(cfg, tables[:2], facts[:2], tmp_path / "x.parquet", tmp_path / "x.json")


def test_hub_model_missing_offline_is_one_line(tmp_path, offline_hub):
    from argmaxable.fetch import DownloadError

    with pytest.raises(DownloadError) as err:
        download_model(PAPER["gpt2"], tmp_path / "gpt2")
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("cannot download model 'gpt2' from openai-community/gpt2: ")
    assert "may be offline" in msg and not (tmp_path / "gpt2").exists()
