"""The softmax head of a GGUF model (llama.cpp's format): the header read by
:func:`argmaxable.detect.formats.gguf_header` (the parser the head-only fetch uses too), the tensors dequantised by the
``gguf`` package that ships with llama.cpp.

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

from argmaxable.detect.formats import GGUFHeader, Tensor, gguf_header, gguf_values
from argmaxable.detect.source import Local, Source, WeightsError

HEAD, TIED_HEAD, NORM = "output.weight", "token_embd.weight", "output_norm.weight"
# tokenizer.ggml.token_type codes (llama.cpp's llama_token_type; gguf.TokenType).
TOKEN_TYPES = {1: "normal", 2: "unknown", 3: "control", 4: "user_defined", 5: "unused", 6: "byte"}


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


def _open(path: Path) -> tuple[Local, GGUFHeader]:
    if not path.is_file():
        raise WeightsError(f"GGUF file {str(path)!r} does not exist")
    source = Local(path)
    return source, gguf_header(source)


def dequantize(source: Source, tensor: Tensor) -> np.ndarray:
    """A located GGUF tensor as float32 (rows, cols), dequantised as llama.cpp does (``gguf.quants``)."""
    from gguf.constants import GGMLQuantizationType
    from gguf.quants import dequantize as ggml_dequantize

    kind = GGMLQuantizationType(tensor.info["type"])
    try:
        values = ggml_dequantize(gguf_values(source, tensor), kind)
    except NotImplementedError:
        raise WeightsError(f"the gguf package cannot dequantise {tensor.name} of type {kind.name}") from None
    values = np.ascontiguousarray(values, dtype=np.float32)
    return values if values.flags.writeable else values.copy()


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
    files = [_open(p) for p in paths]
    located = {name: (source, t) for source, header in files for name, t in header.tensors.items()}
    absent = [name for _, header in files for name in header.absent]
    tied = HEAD not in located
    name = TIED_HEAD if tied else HEAD
    if name not in located:
        raise WeightsError(f"{str(paths[0])!r}: no {HEAD!r} and no {TIED_HEAD!r} tensor: not a language model")
    holder, header = next(f for f in files if name in f[1].tensors)
    header.require(holder, [name])
    W = dequantize(*located[name])  # (n, d): ggml's shape [d, n] is numpy's (n, d)
    if W.ndim != 2:
        raise WeightsError(f"{str(paths[0])!r}: head {name} has shape {W.shape}, not (n, d)")
    norm = dequantize(*located[NORM]).reshape(-1) if NORM in located and NORM not in absent else None
    source, meta = next(((s, h) for s, h in files if "tokenizer.ggml.tokens" in h.fields), files[0])
    tokens = meta.text(source, "tokenizer.ggml.tokens")
    codes = meta.fields.get("tokenizer.ggml.token_type")
    if (tokens is not None and not isinstance(tokens, list)) or (codes is not None and not (
            isinstance(codes, np.ndarray) and codes.dtype.kind in "iu")):
        raise WeightsError(f"{str(paths[0])!r}: tokenizer.ggml.tokens is not a list of strings, or token_type not "
                           "a list of integers")
    n = W.shape[0]
    for what, values in (("tokens", tokens), ("token types", codes)):
        if values is not None and len(values) != n:
            raise WeightsError(f"{str(paths[0])!r}: {len(values)} {what} for the head's {n} rows")
    return GGUFHead(
        W=W, tensor=name, tied=tied, stored_type=located[name][1].dtype,
        tokens=tokens,
        token_types=None if codes is None else [TOKEN_TYPES.get(int(c), f"type_{int(c)}") for c in codes],
        tokenizer=str(meta.text(source, "tokenizer.ggml.model") or ""),
        norm=norm, architecture=str(files[0][1].text(files[0][0], "general.architecture") or ""), absent=absent,
    )
