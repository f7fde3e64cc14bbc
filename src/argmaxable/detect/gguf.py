"""The softmax head of a GGUF model (llama.cpp's format), read with the ``gguf`` package that ships with llama.cpp.

- the head is ``output.weight``, or ``token_embd.weight`` when the model ties them (no ``output.weight``);
- quantised tensors are dequantised by ``gguf.quants.dequantize`` (the numpy port of llama.cpp's ggml
  dequantisers: Q8_0 is 32 int8 values times one fp16 scale per block, k-quants use super-blocks, ...);
- tokens and their types come from the metadata (``tokenizer.ggml.tokens``, ``tokenizer.ggml.token_type``);
- the final norm's weights (``output_norm.weight``) and the head's stored type are kept beside the head;
- a model split by ``gguf-split`` into several GGUF files (the first holds the metadata) is read as one model.
  Byte parts of one file (``model.gguf.part00``, ...) are joined by the download step
  (:func:`argmaxable.detect.download.join_parts`) before anything reads them;
- a file whose later tensors are absent (the first byte parts of a longer file: the header, the metadata and the
  head lie in them) is read as far as it goes: only the tensors whose data lie inside it are built, the head is
  all that must be there, and the tensors left out are named in :attr:`GGUFHead.absent`.

GGUF files hold no bias: the head is ``logits = W x`` where ``x`` is the final RMSNorm's output.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from argmaxable.detect.weights import WeightsError

HEAD, TIED_HEAD, NORM = "output.weight", "token_embd.weight", "output_norm.weight"
# tokenizer.ggml.token_type codes (llama.cpp's llama_token_type; gguf.TokenType).
TOKEN_TYPES = {1: "normal", 2: "unknown", 3: "control", 4: "user_defined", 5: "unused", 6: "byte"}
MAGIC = b"GGUF"


@dataclass
class GGUFHead:
    """The head of a GGUF model and what the file says about it."""

    W: np.ndarray  # (n, d) float32, dequantised
    tensor: str  # output.weight, or token_embd.weight when tied
    tied: bool
    stored_type: str  # the head's GGML type as stored: Q8_0, F16, Q4_K, ...
    tokens: list[str] | None  # (n,) as stored (byte-level BPE 'Ġwith', SentencePiece '▁with', '<0x0A>')
    token_types: list[str] | None  # (n,) names of TOKEN_TYPES
    tokenizer: str  # tokenizer.ggml.model: gpt2 (byte-level BPE), llama (SentencePiece), ...
    norm: np.ndarray | None  # (d,) output_norm.weight, the final RMSNorm's scale (None: not in the file)
    architecture: str
    absent: list[str] = field(default_factory=list)  # tensors whose data lie beyond the end of a cut file


def _field(reader, key: str):
    """A metadata value (a list for arrays), or None when the file lacks it; text that is not UTF-8 is one line
    naming the file and the field."""
    field = reader.fields.get(key)
    if field is None:
        return None
    try:
        return field.contents()
    except UnicodeDecodeError as err:
        raise WeightsError(f"{str(reader.data.filename)!r}: metadata field {key} holds text that is not UTF-8 "
                           f"({err.reason} at byte {err.start} of a value)") from None


def _reader_class():
    """gguf's reader, made to build only the tensors whose data lie inside the file (:class:`GGUFHead.absent`)."""
    from gguf import GGUFReader
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    class CutReader(GGUFReader):
        """A GGUFReader over a file that may stop before its last tensors: those are listed in ``absent``."""

        def _build_tensors(self, start_offs, fields):
            inside, self.absent = [], []
            for info in fields:
                _, _, _, dims, kind, offset = info.parts
                block, size = GGML_QUANT_SIZES[GGMLQuantizationType(int(kind[0]))]
                end = start_offs + int(offset[0]) + int(np.prod(dims, dtype=np.int64)) * size // block
                (inside if end <= len(self.data) else self.absent).append(info)
            self.absent = [bytes(info.parts[1]).decode("utf-8", "replace") for info in self.absent]
            super()._build_tensors(start_offs, inside)

    return CutReader


def _open(path: Path):
    if not path.is_file():
        raise WeightsError(f"GGUF file {str(path)!r} does not exist")
    with open(path, "rb") as f:
        if f.read(4) != MAGIC:
            raise WeightsError(f"{str(path)!r} is not a GGUF file (no GGUF magic); byte parts of a split file "
                               "must be joined in order first")
    try:
        return _reader_class()(path, "r")
    except Exception as err:  # the reader raises ValueError, struct errors, ... on a damaged file
        msg = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise WeightsError(f"cannot read {str(path)!r} as GGUF: {msg}") from None


def dequantize(tensor) -> np.ndarray:
    """A tensor of a GGUFReader as float32 (rows, cols), dequantised as llama.cpp does."""
    from gguf.quants import dequantize as ggml_dequantize

    try:
        values = ggml_dequantize(tensor.data, tensor.tensor_type)
    except NotImplementedError:
        raise WeightsError(f"the gguf package cannot dequantise {tensor.name} of type "
                           f"{tensor.tensor_type.name}") from None
    values = np.ascontiguousarray(values, dtype=np.float32)
    return values if values.flags.writeable else values.copy()  # F32 tensors come back as views of the file


def read_gguf_head(path: str | os.PathLike | Sequence[str | os.PathLike]) -> GGUFHead:
    """The softmax head, tokens, token types and final norm of a GGUF model.

    Parameters
    ----------
    path : path or list of paths
        One .gguf file, or the files of a ``gguf-split`` model in order (each a GGUF file; the head, the norm
        and the tokenizer metadata may lie in any of them).

    Returns
    -------
    GGUFHead

    Raises
    ------
    WeightsError
        A missing or non-GGUF file, no head tensor (or one the file stops inside), a type the gguf package cannot
        dequantise, or tokens that do not match the head's rows.
    """
    paths = [Path(p) for p in ([path] if isinstance(path, (str, os.PathLike)) else path)]
    if not paths:
        raise WeightsError("GGUF source: no file given")
    readers = [_open(p) for p in paths]
    tensors = {t.name: t for r in readers for t in r.tensors}
    absent = [name for r in readers for name in r.absent]
    tied = HEAD not in tensors and HEAD not in absent
    name = TIED_HEAD if tied else HEAD
    if name in absent:
        raise WeightsError(f"{str(paths[0])!r} stops before the end of its head tensor {name}: the file is cut "
                           "short (join all its parts, or the parts up to the head)")
    if name not in tensors:
        raise WeightsError(f"{str(paths[0])!r}: no {HEAD!r} and no {TIED_HEAD!r} tensor: not a language model")
    W = dequantize(tensors[name])  # (n, d): ggml's shape [d, n] is numpy's (n, d)
    if W.ndim != 2:
        raise WeightsError(f"{str(paths[0])!r}: head {name} has shape {W.shape}, not (n, d)")
    norm = dequantize(tensors[NORM]).reshape(-1) if NORM in tensors else None
    meta = next((r for r in readers if "tokenizer.ggml.tokens" in r.fields), readers[0])
    tokens = _field(meta, "tokenizer.ggml.tokens")
    codes = _field(meta, "tokenizer.ggml.token_type")
    n = W.shape[0]
    for what, values in (("tokens", tokens), ("token types", codes)):
        if values is not None and len(values) != n:
            raise WeightsError(f"{str(paths[0])!r}: {len(values)} {what} for the head's {n} rows")
    return GGUFHead(
        W=W, tensor=name, tied=tied, stored_type=tensors[name].tensor_type.name,
        tokens=None if tokens is None else [str(t) for t in tokens],
        token_types=None if codes is None else [TOKEN_TYPES.get(int(c), f"type_{int(c)}") for c in codes],
        tokenizer=str(_field(meta, "tokenizer.ggml.model") or ""),
        norm=norm, architecture=str(_field(readers[0], "general.architecture") or ""), absent=absent,
    )
