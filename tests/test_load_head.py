"""argmaxable.load_head: one reader for every head the CLI takes, each format written by its own library (numpy,
safetensors, torch.save in both of its formats, the gguf package, onnx, transformers' save_pretrained, the local
hub for a hub id), the weight key it chose named, and a file it cannot read answered with every readable kind."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from test_detect_gguf import write_gguf
from test_detect_hub import env, gpt2  # noqa: F401  (fixtures)
from test_detect_loaders import output_layer, saved
from test_detect_onnx import _toy_relu_head

import argmaxable
from argmaxable.cli import main
from argmaxable.detect.weights import WeightsError

RNG = np.random.default_rng(7)
W = RNG.standard_normal((40, 6)).astype(np.float32)
B = RNG.standard_normal(40).astype(np.float32)


def _write(tmp_path, fmt: str):
    """The head (W, B) in ``fmt``, written by the format's own library."""
    from safetensors.numpy import save_file

    if fmt == "npz":
        np.savez(path := tmp_path / "head.npz", W=W, b=B)
    elif fmt == "npy":
        np.save(path := tmp_path / "head.npy", W)
    elif fmt == "safetensors":
        save_file({"lm_head.weight": W, "lm_head.bias": B}, str(path := tmp_path / "head.safetensors"))
    elif fmt in ("torch-zip", "torch-legacy"):
        path = tmp_path / ("pytorch_model.bin" if fmt == "torch-zip" else "model.pt")
        state = {"model": {"decoder": {"weight": torch.from_numpy(W).to(torch.bfloat16), "bias": torch.from_numpy(B)}}}
        torch.save(state, path, _use_new_zipfile_serialization=fmt == "torch-zip")
    return path


@pytest.mark.parametrize("fmt", ["npz", "npy", "safetensors", "torch-zip", "torch-legacy"])
def test_every_weights_format_reads_as_its_library_wrote_it(tmp_path, fmt):
    """bfloat16 in torch's files is read exactly as torch widens it; the keys chosen are recorded."""
    path = _write(tmp_path, fmt)
    keys = {"torch-zip": ("model.decoder.weight", "model.decoder.bias"),
            "torch-legacy": ("model.decoder.weight", "model.decoder.bias")}.get(fmt)
    head = argmaxable.load_head(path, weight_key=keys and keys[0], bias_key=keys and keys[1])
    expected = torch.from_numpy(W).to(torch.bfloat16).float().numpy() if fmt.startswith("torch") else W
    np.testing.assert_array_equal(head.W, expected)
    if fmt == "npy":
        assert head.b is None and head.record()["weight_key"] == "W"
    else:
        np.testing.assert_array_equal(head.b, B)
    assert head.record()["origin"].startswith(str(path)) and head.files[0] == path


def test_gguf_onnx_and_a_model_directory(tmp_path):
    write_gguf(tmp_path / "m.gguf", W[:32, :])
    gguf = argmaxable.load_head(tmp_path / "m.gguf")
    np.testing.assert_array_equal(gguf.W, W[:32, :])
    assert gguf.token_types[:3] == ["control", "unused", "byte"] and gguf.box() == (-100.0, 100.0)
    onnx = argmaxable.load_head(_toy_relu_head(tmp_path / "toy.onnx"))
    assert onnx.activation == "relu" and onnx.box(50) == (0.0, 50.0) and onnx.W.shape == (4, 2)
    model = saved("gpt2", tmp_path / "gpt2")
    local = argmaxable.load_head(tmp_path / "gpt2")
    np.testing.assert_allclose(local.W, output_layer(model)[0], atol=1e-6)


def test_a_hub_id_through_the_local_hub(env, gpt2):  # noqa: F811
    model, tokens, hub = gpt2
    with env.serve(hub):
        head = argmaxable.load_head("gpt2")
    np.testing.assert_allclose(head.W, output_layer(model)[0], atol=1e-6)
    assert head.record()["revision"] == "main" and head.origin.startswith("huggingface:gpt2@")
    assert (head.raw_tokens or head.tokens) == tokens


def test_several_arrays_that_could_be_the_weights_are_refused_naming_them(tmp_path, capsys):
    """An npz with foo (100 x 8) and bar (3): the old reader checked foo silently and named no key."""
    path = tmp_path / "two.npz"
    np.savez(path, foo=RNG.standard_normal((100, 8)), bar=np.zeros(3))
    assert main(["check", "softmax", str(path), "--no-progress"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    with pytest.raises(WeightsError, match=r"several arrays could be its weights: foo \(100 x 8\), bar \(3\); "
                                           r"pass --weight-key"):
        argmaxable.load_head(path)
    out = tmp_path / "t.csv"
    assert main(["check", "softmax", str(path), "--weight-key", "foo", "--no-progress", "--workers", "1",
                 "--patience", "20", "--out", str(out)]) == 0
    assert f"head: {path} (weights 'foo', no bias)" in capsys.readouterr().out
    meta = json.loads(out.with_name("t.csv.meta.json").read_text())
    assert meta["origin"] == f"{path} (weights 'foo', no bias)"


def test_one_unnamed_array_beside_a_known_bias_is_the_weights(tmp_path):
    np.savez(path := tmp_path / "one.npz", logits=W, b=B)
    head = argmaxable.load_head(path)
    assert (head.record()["weight_key"], head.record()["bias_key"]) == ("logits", "b")


@pytest.mark.parametrize("name", ["model", "model.txt", "model.h5"])
def test_a_file_of_no_known_kind_names_every_readable_kind(tmp_path, capsys, name):
    """The old message listed the weights suffixes only: no .gguf, .onnx or hub ids."""
    (tmp_path / name).write_bytes(b"\0" * 16)
    assert main(["check", "softmax", str(tmp_path / name)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    for kind in (".npz", ".safetensors", ".pt/.pth/.bin", ".gguf", ".onnx", "hub id (owner/name"):
        assert kind in err, (kind, err)


def test_options_that_do_not_apply_are_refused_before_reading(tmp_path):
    write_gguf(tmp_path / "m.gguf", W[:32, :])
    with pytest.raises(WeightsError, match="do not apply to a GGUF model"):
        argmaxable.load_head(tmp_path / "m.gguf", weight_key="output.weight")
    with pytest.raises(WeightsError, match="--revision applies to a Hugging Face hub id"):
        argmaxable.load_head(tmp_path / "m.gguf", revision="main")
    with pytest.raises(WeightsError, match=r"names its 32 tokens itself \(with their types\)"):
        argmaxable.load_head(tmp_path / "m.gguf", vocab=tmp_path / "m.gguf")


@pytest.mark.parametrize(("name", "text", "expected"), [
    ("config.json", "[" * 100_000 + "]" * 100_000, "not a readable config.json"),
    ("model.safetensors.index.json", '{"weight_map": ' + "[" * 100_000 + "]" * 100_000 + "}",
     "not a checkpoint index"),
    ("model.safetensors.index.json", '{"weight_map": [1, 2]}', "not a checkpoint index"),
    ("model.safetensors.index.json", '{"weight_map": {"lm_head.weight": 5}}', "not a checkpoint index"),
])
def test_a_model_directorys_json_that_nests_too_deep_or_is_malformed_is_one_line(tmp_path, capsys, name, text,
                                                                                 expected):
    saved("gpt2", tmp_path / "m")
    if name != "config.json":
        (tmp_path / "m" / "model.safetensors").unlink()
    (tmp_path / "m" / name).write_text(text)
    capsys.readouterr()  # save_pretrained's progress
    assert main(["check", "softmax", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and expected in err, err
