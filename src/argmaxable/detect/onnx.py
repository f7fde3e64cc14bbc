"""Read the softmax head of an ONNX graph: W (n, d), b (n,), the tokens it scores and what feeds it.

The head is found generically, by walking backwards from the last ``Softmax``/``LogSoftmax`` node (or, in a
graph that returns logits, from the graph output) through the ops that only reshape or cast the logits, to
the matrix product that makes them:

- ``MatMul(x, B)`` with a constant B (d, n): W = Bᵀ;
- ``Gemm(x, B, C)``: W = alpha · (B or Bᵀ when ``transB``)ᵀ, b = beta · C;
- ``MatMulInteger(x_q, B_q, x_zp, B_zp)``, as onnxruntime's dynamic quantisation writes it: W = (B_q - B_zp)ᵀ
  times the constant factors of the ``Mul`` that rescales its output (the input's own scale, an output of
  ``DynamicQuantizeLinear``, belongs to x); dequantised exactly in float64;
- a constant B given by ``DequantizeLinear(B_q, scale, zero_point)``: (B_q - zero_point) · scale in float64.

On the way back, ``Add``/``Sub`` with a constant make the bias and ``Mul``/``Div`` by a constant scale the rows:
the logits are always a ⊙ (x W₀ᵀ) + c, folded into W and b. Constants come from initializers or ``Constant``
nodes. A head fed directly by another constant linear layer (its product and bias, through ``Identity``/``Cast``
only, no activation between: PP-OCRv2's two-layer CTC head) is one affine map of that layer's input: the two
are multiplied, W = W₂ W₁ and b = W₂ b₁ + b₂ in float64, and the head reads the first layer's input.

What feeds the head (the op producing x, past reshapes) names its activation where it is a known one: ``Relu``;
``Tanh``; ``Sigmoid``; x·sigmoid(x) (SiLU/swish); ``Gelu`` or its ``Erf`` form ("gelu"), and ``Gelu`` with
``approximate="tanh"``, ``FastGelu`` or the tanh form ("gelu_tanh", which reaches lower); the hidden state
of an ``LSTM``/``GRU``, which lies in (-1, 1) like tanh's output.

A hostile file is one line: an empty file, a graph with no outputs, or one whose nodes are not in topological
order (ONNX requires it; a cycle breaks it) is refused before any walk.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from argmaxable.detect.safepickle import attribute, load_plain
from argmaxable.detect.weights import WeightsError

# Ops that move, reshape or cast the logits without changing their values along the category axis.
_PASS = {"Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Identity", "Cast", "Dropout"}
_SOFTMAX = ("Softmax", "LogSoftmax")
_PRODUCTS = ("MatMul", "Gemm", "MatMulInteger")
_SAME = {"Identity", "Cast", "Dropout"}  # ops between two stacked linear layers that keep every value in place


@dataclass
class OnnxHead:
    """The softmax head read from an ONNX graph."""

    W: np.ndarray  # (n, d)
    b: np.ndarray | None  # (n,)
    node: str  # the op and node output that computes x Wᵀ, e.g. "Gemm -> 381"
    activation: str | None  # what feeds the head, when known: relu, tanh, sigmoid, silu, gelu, gelu_tanh
    feeding: str  # the op found before the head, e.g. "LSTM -> 361"
    metadata: dict[str, str]  # the model's metadata_props
    precision: str = "float32"  # the stored weights' type (of the last layer's, when two were multiplied)
    tied: bool = False  # whether an embedding lookup (Gather) reads the head's weights too


class _Graph:
    """Lookups over one ONNX graph: producers, consumers and constant values."""

    def __init__(self, model):
        from onnx import numpy_helper

        self._to_array = numpy_helper.to_array
        graph = model.graph
        self.nodes = list(graph.node)  # topologically sorted (ONNX IR; checked by :meth:`order`)
        self.producer = {out: node for node in self.nodes for out in node.output if out}
        self.position = {out: k for k, node in enumerate(self.nodes) for out in node.output if out}
        self.initializers = {t.name: t for t in graph.initializer}
        self.outputs = [o.name for o in graph.output]
        self._values: dict[str, np.ndarray | None] = {}  # const() memo

    def order(self, path: Path) -> None:
        """Refuse a graph whose nodes read a tensor that the same or a later node makes: ONNX requires nodes in
        topological order, and a cycle (which no walk over the graph would leave) cannot be put in one."""
        for k, node in enumerate(self.nodes):
            late = next((i for i in node.input if i and self.position.get(i, -1) >= k), None)
            if late is not None:
                raise WeightsError(f"{str(path)!r}: node {node.name or node.op_type!r} reads {late!r}, which it or a "
                                   "later node makes: the graph is not in topological order (a cycle?)")

    def const(self, name: str) -> np.ndarray | None:
        """The value of ``name`` when it is a constant (initializer, Constant, or a few ops over them)."""
        if name not in self._values:
            self._values[name] = self._fold(name)
        return self._values[name]

    def _fold(self, name: str) -> np.ndarray | None:
        if name in self.initializers:
            return self._to_array(self.initializers[name])
        node = self.producer.get(name)
        if node is None:
            return None
        if node.op_type == "Constant":
            return self._constant(node)
        if node.op_type not in ("Identity", "Cast", "Transpose", "DequantizeLinear"):
            return None
        args = []
        for i in node.input:
            args.append(self.const(i) if i else None)
            if i and args[-1] is None:
                return None
        if node.op_type == "Transpose":
            return np.transpose(args[0], self.attr(node, "perm", None))
        if node.op_type == "DequantizeLinear":
            return _dequantize(*args, axis=self.attr(node, "axis", 1))
        return args[0]

    def _constant(self, node) -> np.ndarray:
        from onnx import helper

        attr = node.attribute[0]
        value = helper.get_attribute_value(attr)
        if attr.name == "value":
            return self._to_array(value)
        if attr.name in ("value_float", "value_floats", "value_int", "value_ints"):
            return np.asarray(value)
        raise WeightsError(f"Constant node {node.output[0]!r} holds a {attr.name!r}, not a numeric tensor")

    @staticmethod
    def attr(node, name: str, default):
        from onnx import helper

        for a in node.attribute:
            if a.name == name:
                return helper.get_attribute_value(a)
        return default

    def dynamic(self, node) -> list[int]:
        """Positions of the node's inputs that are not constants."""
        return [k for k, i in enumerate(node.input) if i and self.const(i) is None]


def _dequantize(q, scale, zero_point=None, *, axis: int = 1) -> np.ndarray:
    """(q - zero_point) · scale in float64, per tensor or per ``axis`` (DequantizeLinear's semantics)."""
    q = q.astype(np.float64)
    zp = np.zeros(1) if zero_point is None else np.asarray(zero_point, dtype=np.float64)
    scale = np.asarray(scale, dtype=np.float64)
    if scale.ndim == 1 and q.ndim > 1:  # per-axis: broadcast along `axis`
        shape = [1] * q.ndim
        shape[axis] = -1
        scale, zp = scale.reshape(shape), zp.reshape(shape) if zp.size > 1 else zp
    return (q - zp) * scale


def _load(path: Path):
    import onnx

    if not path.is_file():
        raise WeightsError(f"ONNX file {str(path)!r} does not exist")
    if path.stat().st_size == 0:
        raise WeightsError(f"ONNX file {str(path)!r} is empty")
    try:
        model = onnx.load(str(path))
    except Exception as err:  # protobuf's DecodeError and onnx's own errors both mean "not a readable graph"
        msg = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise WeightsError(f"cannot read {str(path)!r} as an ONNX model: {msg}") from None
    if not model.graph.output:
        raise WeightsError(f"{str(path)!r} holds no ONNX graph outputs: not a model (or not an ONNX file)")
    return model


def _start(g: _Graph, output: str | None, path: Path) -> str:
    """The tensor holding the logits: the input of the last softmax, else the (named or first) graph output."""
    if output is not None:
        if output not in g.producer:
            raise WeightsError(f"{str(path)!r}: no tensor {output!r}; graph outputs: {', '.join(g.outputs)}")
        return output
    softmaxes = [n for n in g.nodes if n.op_type in _SOFTMAX]
    if softmaxes:
        return softmaxes[-1].input[0]
    return g.outputs[0]


def _scale_factor(g: _Graph, name: str) -> np.ndarray | None:
    """The constant part of a product of constants and DynamicQuantizeLinear scales (the input's own scale
    belongs to x, not to the head); None when ``name`` is anything else."""
    value = g.const(name)
    if value is not None:
        return value.astype(np.float64)
    node = g.producer.get(name)
    if node is None:
        return None
    if node.op_type == "DynamicQuantizeLinear" and name == node.output[1]:
        return np.ones(1)
    if node.op_type == "Mul":
        parts = [_scale_factor(g, i) for i in node.input]
        return None if any(p is None for p in parts) else parts[0] * parts[1]
    return None


def _fold_head(g: _Graph, start: str, path: Path, passes=_PASS
               ) -> tuple[np.ndarray, np.ndarray | None, str, str, str, str]:
    """Walk back from the logits to the matrix product; return W, b, the product's input, its description, the
    stored weight's type and name.

    Invariant: logits = scale ⊙ y + shift along the category axis, where y is the tensor reached so far;
    ``passes`` are the ops walked through unchanged.
    """
    scale, shift, name = np.ones(1), None, start
    while True:
        node = g.producer.get(name)
        if node is None:
            raise WeightsError(f"{str(path)!r}: reached graph input {name!r} without finding a MatMul or Gemm "
                               "before the softmax; name the logits tensor with 'output'")
        op, dyn = node.op_type, g.dynamic(node)
        if op in passes:
            name = node.input[0]
        elif op in ("Add", "Sub") and len(dyn) == 1:
            const = g.const(node.input[1 - dyn[0]]).astype(np.float64).reshape(-1)
            sign = -1.0 if (op == "Sub" and dyn[0] == 0) else 1.0  # y = z - c
            shift = (0.0 if shift is None else shift) + sign * scale * const
            if op == "Sub" and dyn[0] == 1:  # y = c - z
                scale = -scale
            name = node.input[dyn[0]]
        elif op in ("Mul", "Div") and len(dyn) == 1:
            const = g.const(node.input[1 - dyn[0]]).astype(np.float64).reshape(-1)
            if op == "Div" and dyn[0] == 1:
                raise WeightsError(f"{str(path)!r}: the logits are divided by the head's output ({node.name!r})")
            scale = scale * (const if op == "Mul" else 1.0 / const)
            name = node.input[dyn[0]]
        elif op == "Mul" and len(dyn) == 2:  # MatMulInteger's output times (x scale · weight scale)
            factors = [_scale_factor(g, i) for i in node.input]
            k = next((k for k in (0, 1) if factors[k] is not None and factors[1 - k] is None), None)
            if k is None:
                raise WeightsError(f"{str(path)!r}: cannot read the head through Mul node {node.name!r}")
            scale = scale * factors[k].reshape(-1)
            name = node.input[1 - k]
        elif op in _PRODUCTS:
            W, b, x = _product(g, node, scale, shift, path)
            return W, b, x, f"{op} -> {node.output[0]}", str(g.const(node.input[1]).dtype), node.input[1]
        else:
            raise WeightsError(f"{str(path)!r}: {op} node {node.name or node.output[0]!r} stands between the "
                               "logits and the head's MatMul/Gemm; name the logits tensor with 'output'")


def _product(g: _Graph, node, scale: np.ndarray, shift, path: Path) -> tuple[np.ndarray, np.ndarray | None, str]:
    """W (n, d) and b (n,) of the head whose product is ``node``, with the folded ``scale`` and ``shift``."""
    op = node.op_type
    B = g.const(node.input[1]) if len(node.input) > 1 else None
    if B is None or B.ndim != 2 or g.dynamic(node)[:1] != [0]:
        raise WeightsError(f"{str(path)!r}: {op} node {node.name or node.output[0]!r} does not multiply its input "
                           "by a constant 2-D weight matrix")
    bias = None
    if op == "MatMul":
        W0 = B.T  # B is (d, n)
    elif op == "Gemm":
        if g.attr(node, "transA", 0):
            raise WeightsError(f"{str(path)!r}: Gemm node {node.name!r} transposes its input (transA=1)")
        Bt = B.T if g.attr(node, "transB", 0) else B  # (d, n)
        alpha, beta = g.attr(node, "alpha", 1.0), g.attr(node, "beta", 1.0)
        W0 = Bt.T if alpha == 1.0 else alpha * Bt.T.astype(np.float64)
        if len(node.input) > 2 and node.input[2]:
            C = g.const(node.input[2])
            if C is None:
                raise WeightsError(f"{str(path)!r}: Gemm node {node.name!r} adds a non-constant C")
            bias = beta * C.astype(np.float64).reshape(-1)
    else:  # MatMulInteger: the weight's zero point is input 3 (scalar or one per output column)
        zp = g.const(node.input[3]) if len(node.input) > 3 and node.input[3] else None
        W0 = _dequantize(B, np.ones(1), zp, axis=1).T  # (q - zp) in float64; the scale follows in a Mul
    n = W0.shape[0]
    for what, v in (("scale", scale), ("shift", shift)):
        if v is not None and np.size(v) not in (1, n):
            raise WeightsError(f"{str(path)!r}: a {what} of size {np.size(v)} on the logits does not match the "
                               f"{n} outputs of {op} node {node.name or node.output[0]!r}")
    W = W0 if np.all(scale == 1.0) else W0.astype(np.float64) * scale.reshape(-1, 1)
    terms = [t for t in (None if bias is None else scale * bias, shift) if t is not None]
    b = np.broadcast_to(sum(terms), (n,)).copy() if terms else None
    return np.ascontiguousarray(W), b, node.input[0]


def _stacked(g: _Graph, W: np.ndarray, b: np.ndarray | None, x: str, node: str, path: Path
             ) -> tuple[np.ndarray, np.ndarray | None, str, str]:
    """Multiply the head by each constant linear layer feeding it directly (no activation between).

    Returns W = W_k ... W₁ (float64), b, the first layer's input and the products' description; unchanged when
    ``x`` is not the output of such a layer (an activation, a residual sum, an input).
    """
    while True:
        try:
            W1, b1, x1, node1, _, _ = _fold_head(g, x, path, passes=_SAME)
        except WeightsError:  # not a constant linear layer: x is the head's input
            return W, b, x, node
        if W1.shape[0] != W.shape[1]:
            return W, b, x, node
        W64 = W.astype(np.float64)
        inner = np.zeros(W.shape[0]) if b1 is None else W64 @ b1.astype(np.float64)
        W, b = W64 @ W1.astype(np.float64), inner + (0.0 if b is None else b)
        b = None if b1 is None and not np.any(b) else b
        x, node = x1, f"{node} after {node1}"


def _feeding(g: _Graph, name: str) -> tuple[str | None, str]:
    """What produces the head's input x (past reshapes and x's own quantisation): (activation, description)."""
    node = g.producer.get(name)
    while node is not None and (node.op_type in _PASS or node.op_type in ("DynamicQuantizeLinear",
                                                                          "QuantizeLinear", "DequantizeLinear")):
        node = g.producer.get(node.input[0])
    if node is None:
        return None, f"graph input {name!r}"
    op, desc = node.op_type, f"{node.op_type} -> {node.output[0]}"
    simple = {"Relu": "relu", "Tanh": "tanh", "Sigmoid": "sigmoid", "Gelu": "gelu", "BiasGelu": "gelu",
              "FastGelu": "gelu_tanh", "LSTM": "tanh", "GRU": "tanh",
              "DynamicQuantizeLSTM": "tanh"}  # an LSTM/GRU hidden state lies in (-1, 1), as tanh's output
    if op == "Gelu" and g.attr(node, "approximate", b"none") in ("tanh", b"tanh"):
        return "gelu_tanh", f"Gelu (approximate=tanh) -> {node.output[0]}"
    if op in simple:
        return simple[op], desc
    if op == "Mul":
        parents = [g.producer.get(i) for i in node.input]
        for k, p in enumerate(parents):  # x * sigmoid(x) or x * sigmoid(1 * x): SiLU / swish with beta 1
            if p is not None and p.op_type == "Sigmoid":
                arg, other = p.input[0], node.input[1 - k]
                inner = g.producer.get(arg)
                if arg == other or (inner is not None and inner.op_type == "Mul" and other in inner.input
                                    and any(np.all(g.const(i) == 1.0) for i in inner.input if g.const(i) is not None)):
                    return "silu", f"x * sigmoid(x) -> {node.output[0]}"
        if _has_op(g, node, "Erf", depth=3):  # 0.5 x (1 + erf(x / sqrt 2))
            return "gelu", f"x * (1 + erf(x / sqrt 2)) / 2 -> {node.output[0]}"
        if _has_op(g, node, "Tanh", depth=3):  # 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
            return "gelu_tanh", f"x * (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) / 2 -> {node.output[0]}"
    return None, desc


def _has_op(g: _Graph, node, op: str, depth: int) -> bool:
    if node is None or depth < 0:
        return False
    if node.op_type == op:
        return True
    return any(_has_op(g, g.producer.get(i), op, depth - 1) for i in node.input if i)


def read_onnx_head(path: str | os.PathLike, output: str | None = None) -> OnnxHead:
    """Read the softmax head of an ONNX model.

    Parameters
    ----------
    path : path
        An .onnx file (external data, if any, beside it).
    output : str, optional
        The tensor holding the logits. Default: the input of the last Softmax/LogSoftmax node, else the
        graph's first output.

    Returns
    -------
    OnnxHead
        W (n, d) and b (n,) such that logits = W x + b, the head's node (``"MatMul -> y after MatMul -> h"`` when
        stacked linear layers were multiplied), what feeds it, the metadata, the stored weights' type.

    Raises
    ------
    WeightsError
        Unreadable file, or no constant MatMul/Gemm/MatMulInteger reached from the logits through reshapes,
        casts, constant additions and scalings.

    Examples
    --------
    >>> import numpy as np, onnx, tempfile, os
    >>> from onnx import helper, numpy_helper, TensorProto
    >>> W = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0], [0.1, 0.1]], dtype=np.float32)  # (n=4, d=2)
    >>> graph = helper.make_graph(
    ...     [helper.make_node("Gemm", ["x", "W"], ["logits"], transB=1),
    ...      helper.make_node("Softmax", ["logits"], ["p"])], "toy",
    ...     [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
    ...     [helper.make_tensor_value_info("p", TensorProto.FLOAT, [1, 4])],
    ...     [numpy_helper.from_array(W, "W")])
    >>> f = os.path.join(tempfile.mkdtemp(), "toy.onnx")
    >>> onnx.save(helper.make_model(graph), f)
    >>> head = read_onnx_head(f)
    >>> head.W.shape, head.b, head.node
    ((4, 2), None, 'Gemm -> logits')
    """
    path = Path(path)
    model = _load(path)
    g = _Graph(model)
    g.order(path)
    W, b, x, node, precision, weight = _fold_head(g, _start(g, output, path), path)
    names = {weight}
    while (src := g.producer.get(weight)) is not None and src.op_type in ("Transpose", "Identity", "Cast"):
        weight = src.input[0]
        names.add(weight)
    tied = any(n.op_type == "Gather" and n.input[0] in names for n in g.nodes)  # an embedding lookup reads it
    W, b, x, node = _stacked(g, W, b, x, node, path)
    activation, feeding = _feeding(g, x)
    metadata = {p.key: p.value for p in model.metadata_props}
    return OnnxHead(np.ascontiguousarray(W), b, node, activation, feeding, metadata, precision, tied)


def read_tokens(spec: Mapping, root: str | os.PathLike = ".", metadata: Mapping[str, str] | None = None
                ) -> list[str]:
    """The token of each output row, as a model's ``tokens`` setting describes it.

    ``spec`` holds one source and optional additions:

    - ``metadata: KEY``: the ONNX metadata entry KEY, one token per line (PP-OCR's ``character``);
    - ``file: PATH`` with ``variable: NAME``: a list literal assigned to NAME in a Python source file, read
      with :func:`ast.literal_eval` (never executed; ddddocr's ``charsets.py``);
    - ``file: PATH`` alone: a text file, one token per line (LF or CRLF line ends);
    - ``pickle: PATH`` with ``attribute: A.B``: a list of tokens in row order or a dict id -> token at that
      attribute/key path of a pickle, read as plain data (:func:`argmaxable.detect.safepickle.load_plain`; the
      classes listed in ``classes``, ``"module.Name"``, are read as attribute records, every other global is
      refused); ids must be 0..k-1;
    - ``prepend``/``append``: tokens the model adds around that list (e.g. a CTC blank first).

    Paths are relative to ``root``.
    """
    if "metadata" in spec:
        key = spec["metadata"]
        if metadata is None or key not in metadata:
            raise WeightsError(f"tokens: the model has no metadata entry {key!r}; entries: "
                               f"{', '.join(sorted(metadata or {})) or 'none'}")
        tokens = metadata[key].split("\n")
    elif "file" in spec:
        path = Path(root) / spec["file"]
        if not path.is_file():
            raise WeightsError(f"tokens: file {str(path)!r} does not exist")
        text = path.read_text(encoding="utf-8")
        tokens = _python_list(text, spec["variable"], path) if "variable" in spec else text.split("\n")
        if "variable" not in spec:
            tokens = [t.removesuffix("\r") for t in tokens]
            if tokens and tokens[-1] == "":
                tokens.pop()  # the file's final newline
    elif "pickle" in spec:
        tokens = _pickled_tokens(Path(root) / spec["pickle"], spec.get("attribute", ""), spec.get("classes", ()))
    else:
        raise WeightsError(f"tokens: give 'metadata', 'file' or 'pickle' (got keys {sorted(spec)})")
    return [*spec.get("prepend", []), *tokens, *spec.get("append", [])]


def _python_list(source: str, variable: str, path: Path) -> list[str]:
    for stmt in ast.parse(source).body:
        if isinstance(stmt, ast.Assign) and any(getattr(t, "id", None) == variable for t in stmt.targets):
            value = ast.literal_eval(stmt.value)
            if isinstance(value, Sequence) and all(isinstance(v, str) for v in value):
                return list(value)
            raise WeightsError(f"tokens: {variable} in {str(path)!r} is not a list of strings")
    raise WeightsError(f"tokens: no module-level assignment to {variable!r} in {str(path)!r}")


def _pickled_tokens(path: Path, dotted: str, classes) -> list[str]:
    value = attribute(load_plain(path, classes), dotted, path)
    if isinstance(value, dict):
        if sorted(value) != list(range(len(value))):
            raise WeightsError(f"tokens: {dotted or 'the pickle'} in {str(path)!r} is not a dict of ids 0..k-1")
        value = [value[i] for i in range(len(value))]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise WeightsError(f"tokens: {dotted or 'the pickle'} in {str(path)!r} is not a list of strings or a "
                           "dict id -> string")
    return value
