"""The paper rehearsal (argmaxable.rehearsal): replicas that are what the manifest says, and its CI slice.

Oracles that are not our code: scipy's LP certifies each planted row never wins (a convex combination of other
rows matches its weights with a higher bias); the format readers (safetensors, torch.load, numpy.load) read the
replicas' files back; the slice runs Snakemake over one replica of each checkpoint layout through the local hub,
with a server error and a dropped connection, to the report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import linprog

from argmaxable.config import load_config
from argmaxable.rehearsal.blobs import decode
from argmaxable.rehearsal.replicas import PLANTED, head_arrays, manifest, repo_files, url_files, vocabulary

ROOT = Path(__file__).resolve().parents[1]
# one replica of each checkpoint layout: safetensors (GPT-2, planted), shards and a gated repo (Llama-2-7b), a zip
# pytorch_model.bin (FAIR, planted), a legacy one (OPUS-MT), a Nematus .npz by URL (WMT'17, planted)
SLICE = ["gpt2", "llama2_7b", "wmt19_en_de", "opus_mt_ja_en", "wmt17_zh_en_l2r_1"]


@pytest.fixture(scope="module")
def tiny():
    return {e.key: e for e in manifest(load_config(["experiment=paper"]).model, "tiny")}


def test_the_manifest_covers_the_papers_models(tiny):
    """149 detection models (ACL Tables 4-8) and the 4 top-m models, each with a family, a pinned commit, and the
    planted rows inside its vocabulary."""
    paper = [e for e in tiny.values() if e.key not in ("gpt2_xl", "llama2_7b", "t5_large", "tinyllama")]
    assert len(paper) == 149 and len(tiny) == 153
    assert {e.family for e in paper} == {"bert", "roberta", "xlm-roberta", "gpt2", "marian", "fsmt", "bergamot",
                                         "wmt17"}
    assert len({e.commit for e in tiny.values()}) == 153 and all(len(e.commit) == 40 for e in tiny.values())
    assert {k for k, e in tiny.items() if e.planted} == set(PLANTED)
    for e in tiny.values():
        assert all(0 < i < e.n - 1 for i in e.planted) and len(set(e.planted)) == len(e.planted)
        tokens, counted = vocabulary(e)
        assert len(set(tokens)) == len(tokens) == e.n and len(counted) == e.counted


@pytest.mark.parametrize("key", sorted(PLANTED))
def test_planted_rows_never_win(tiny, key):
    """Each inside row: a convex combination of other rows equals its weights (so its logit is never above theirs
    all) with a higher bias where the model has one (scipy's LP); each tie group: equal rows and biases, as
    stored."""
    e = tiny[key]
    bias = (1, e.n) if e.family == "bergamot" else (e.n,) if e.bias else None
    W_blob, b_blob = head_arrays(e, (e.n, e.d), bias)
    W = decode(W_blob.read(0, W_blob.size), e.dtype).reshape(e.n, e.d).astype(np.float64)
    b = decode(b_blob.read(0, b_blob.size), e.dtype).astype(np.float64) if b_blob is not None else np.zeros(e.n)
    for t in e.inside:
        others = np.delete(np.arange(e.n), [t, *(i for g in e.ties for i in g[1:])])
        # maximise sum(lam * b) - b_t subject to lam >= 0, sum lam = 1, W[others].T lam = W[t]
        res = linprog(-b[others], A_eq=np.vstack([W[others].T, np.ones(len(others))]),
                      b_eq=np.append(W[t], 1.0), bounds=(0, None), method="highs")
        assert res.status == 0 and (-res.fun > b[t] + 0.1 or not e.bias), (t, res.message)
    for group in e.ties:
        assert (W[group] == W[group[0]]).all() and (b[group] == b[group[0]]).all()


def test_replica_files_read_back_with_the_formats_own_readers(tiny, tmp_path):
    """A legacy pytorch_model.bin (torch.load), a Nematus .npz (numpy.load) and sharded safetensors with their
    index (safetensors): the head the manifest describes, at the tensors' true names."""
    import torch
    from safetensors.numpy import load_file

    files = repo_files(tiny["opus_mt_ja_en"], "tiny")
    assert tiny["opus_mt_ja_en"].layout == ["pytorch_model.bin:legacy"]
    path = tmp_path / "pytorch_model.bin"
    path.write_bytes(files["pytorch_model.bin"].read(0, files["pytorch_model.bin"].size))
    state = torch.load(path, weights_only=True)
    assert state["model.shared.weight"].shape == (300, 32) and state["final_logits_bias"].shape == (1, 300)
    assert json.loads(files["vocab.json"].read(0, 10**7))["<pad>"] == 299
    (npz_path, npz), (vocab_path, _) = url_files(tiny["wmt17_zh_en_l2r_1"], "tiny").items()
    (tmp_path / "m.npz").write_bytes(npz.read(0, npz.size))
    with np.load(tmp_path / "m.npz") as arrays:
        assert arrays["Wemb_dec"].shape == (300, 32) and arrays["ff_logit_b"].shape == (300,)
    assert vocab_path.endswith("zh-en/vocab.en.json") and npz_path.startswith("wmt17_systems/zh-en/")
    files = repo_files(tiny["llama2_7b"], "tiny")
    index = json.loads(files["model.safetensors.index.json"].read(0, 10**7))["weight_map"]
    shard = index["lm_head.weight"]
    assert len(set(index.values())) == 2 and shard.endswith("-of-00002.safetensors")
    (tmp_path / shard).write_bytes(files[shard].read(0, files[shard].size))
    assert load_file(tmp_path / shard)["lm_head.weight"].dtype == np.float16


def test_the_rehearsal_slice_runs_to_the_report(tmp_path):
    """`scripts/rehearse_paper.py` at tiny scale over one replica of each layout, with a hub checkpoint answering 500
    twice and a mirrored download dropping its connection: rc 0, the planted rows found by name and nothing else,
    the report written."""
    run = subprocess.run([sys.executable, "scripts/rehearse_paper.py", "--work", str(tmp_path), "--scale", "tiny",
                          "--fault", "--models", *SLICE], cwd=ROOT, capture_output=True, text=True, timeout=3000)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    record = json.loads((tmp_path / "rehearsal.json").read_text())
    totals = record["totals"]
    assert totals["problems"] == [] and totals["planted_found"] == totals["planted"] == 10  # gpt2 4, FAIR 2, WMT17 4
    assert totals["http"]["statuses"].get("500") == 2 and totals["http"]["faults_left"] == [0, 0]
    assert {m["model"] for m in record["models"]} == set(SLICE)
    assert all(m["fetched MB"] < m["repo MB"] for m in record["models"])
    assert (tmp_path / "results" / "report.html").is_file() and (tmp_path / "results" / "detect" / "figures" /
                                                                 "fig6_unargmaxable_per_model.png").is_file()
    detect = (tmp_path / "results" / "detect" / "tables" / "detect.md").read_text()
    assert all(f"`{key}`" in detect or key in detect for key in ("gpt2", "wmt19-en-de", "opus-mt-ja-en"))
    readme = tmp_path / "README.md"
    readme.write_text("a\n<!-- generated:rehearsal -->\nold\n<!-- /generated:rehearsal -->\nb\n")
    subprocess.run([sys.executable, "scripts/rehearse_paper.py", "--work", str(tmp_path), "--readme", str(readme)],
                   cwd=ROOT, check=True, timeout=300)
    block = readme.read_text()
    assert "old" not in block and block.startswith("a\n<!-- generated:rehearsal -->\n5 replicas (fsmt 1, gpt2 1, " \
        "llama 1, marian 1, wmt17 1) at tiny scale") and "10 planted rows, 10 unargmaxable found; every " in block


# no hub model among them: a Nematus .npz and a Bergamot .npz, both by URL
URL_ONLY = ["wmt17_en_de_l2r_1", "bergamot_en_de_student_tiny11"]


def test_a_subset_without_hub_models_pins_nothing(tmp_path, monkeypatch):
    """The workflow's copy for a subset with no hub model: nothing asked of the local hub (which serves only the
    selected replicas), every config's revision as declared, the mirror pointed at the local one."""
    from argmaxable.rehearsal.replicas import local_hub
    from argmaxable.rehearsal.run import DETECTION, _tree

    entries = manifest(load_config([*DETECTION, f"model=[{','.join(URL_ONLY)}]"]).model, "tiny")
    with local_hub(entries, "tiny") as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        tree = _tree(tmp_path, hub, entries)
        hub.settle()
        assert hub.log == []
        assert hub.mirror_url("statmt") in (tree / "config" / "config.yaml").read_text()
    gpt2 = Path("config") / "model" / "gpt2.yaml"  # a hub model's declaration, not pinned
    assert (tree / gpt2).read_text() == (ROOT / gpt2).read_text()


def test_a_broken_model_costs_that_model_and_a_rerun_finishes_it(tmp_path):
    """One replica broken (its files answer 404): the other model is checked, verified and tabled, the summary
    names the broken one by key, job and its log's line, rc 1; the same run again, unbroken, downloads and checks
    only the broken one (the other's outputs untouched) and ends with rc 0."""
    broken, whole = URL_ONLY
    script = [sys.executable, "scripts/rehearse_paper.py", "--work", str(tmp_path), "--scale", "tiny", "--models",
              *URL_ONLY]
    run = subprocess.run([*script, "--break", broken], cwd=ROOT, capture_output=True, text=True, timeout=1500)
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    totals = json.loads((tmp_path / "rehearsal.json").read_text())["totals"]
    [failed] = totals["failed"]
    assert failed["model"] == broken and failed["rule"] == "download_model", failed
    assert failed["reason"].startswith("argmaxable:") and "404" in failed["reason"], failed
    assert totals["problems"] == [f"{broken}: download_model failed: {failed['reason']}"]
    assert totals["planted_found"] == totals["planted"] == 4  # Bergamot's: two inside, a tie pair
    assert f"- `{broken}`: download_model: " in (tmp_path / "rehearsal.md").read_text()
    table = (tmp_path / "results" / "detect" / "tables" / "detect.md").read_text()
    assert "en-de.student.tiny11" in table and "en-de.l2r(1)" not in table
    checked = tmp_path / "results" / "detect" / whole / "categories.parquet"
    stamp = checked.stat().st_mtime_ns
    again = subprocess.run(script, cwd=ROOT, capture_output=True, text=True, timeout=1500)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    record = json.loads((tmp_path / "rehearsal.json").read_text())
    assert record["totals"]["failed"] == [] and record["totals"]["planted_found"] == 4
    assert checked.stat().st_mtime_ns == stamp
    assert (tmp_path / "results" / "detect" / broken / "categories.parquet").is_file()


def test_thin_rows_and_clusters_are_where_the_manifest_says():
    """Every biased translation replica has as many thin rows as the ACL tables print potentially unargmaxable
    tokens for its model (366 for the WMT'17 zh-en l2r ensemble's third member, "≤ 2" as 2), every replica
    near-duplicate clusters, all on distinct rows clear of the planted ones."""
    entries = {e.key: e for e in manifest(load_config(["experiment=paper"]).model)}
    models = load_config(["experiment=paper"]).model
    assert len(entries["wmt17_zh_en_l2r_3"].thin) == 366 and len(entries["wmt17_cs_en_l2r_1"].thin) == 2
    assert sum(len(e.thin) for e in entries.values()) > 1000
    for key, e in entries.items():
        printed = str((models[key].get("paper") or {}).get("potentially_unargmaxable") or "0")
        count = int("".join(c for c in printed if c.isdigit()) or 0)
        assert len(e.thin) == (min(count, e.n // 20) if e.bias else 0), key
        assert len(e.clusters) == max(1, e.n // 1600) and all(len(g) == 4 for g in e.clusters)
        rows = [i for pair in e.thin for i in pair] + [i for g in e.clusters for i in g] + e.planted
        assert len(set(rows)) == len(rows) and all(5 <= i < e.n - 7 for i in rows)


def test_a_thin_row_wins_in_its_corner_and_loses_at_its_lifted_start():
    """A Bergamot teacher's two thin rows (32000 x 1024): each is the largest logit at the corner 100 sign(w) of its
    base row w (float64 products over every row), and loses to its base at its row lifted into the box, where the
    check starts: argmaxable, left by reflection to the exact stage, which proves it."""
    import argmaxable as am

    [e] = [e for e in manifest(load_config(["experiment=paper"]).model) if e.key == "bergamot_et_en_teacher_bigx2_1"]
    assert len(e.thin) == 2
    W_blob, b_blob = head_arrays(e, (e.n, e.d), (1, e.n))
    W = W_blob.values(0, W_blob.numel).reshape(e.n, e.d)
    b = b_blob.values(0, e.n)
    W64, b64 = W.astype(np.float64), b.astype(np.float64)
    for row, base in e.thin:
        corner = 100 * np.sign(W64[base])
        assert np.argmax(W64 @ corner + b64) == row
        start = W64[row] * 2.0 ** np.floor(np.log2(100 / np.abs(W).max()))
        assert W64[base] @ start + b64[base] > W64[row] @ start + b64[row]
    res = am.check_categories(W, b=b, bound=100.0)
    thin = [row for row, _ in e.thin]
    assert (res.status[thin] == "argmaxable").all() and (res.steps[thin] == -1).all()
    assert am.verify_certificate(res, W, b)[thin].all()
