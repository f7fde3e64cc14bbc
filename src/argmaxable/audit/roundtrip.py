"""The tokenizer round trip (Land & Bartolo 2024, "Fishing for Magikarp" §2.3): every token decoded on its own,
encoded again, and its class by what comes back.

A token that no text encodes to can only reach a model through its id; one whose bytes are not whole UTF-8 can
only be produced as part of a longer sequence. Classes, in the order they are decided:

- ``special/control``: the tokenizer's special tokens and GGUF types ``control``, ``unknown`` and ``unused``
  (text never contains them unless a caller asks the tokenizer to parse special tokens);
- ``round-trips``: the decoded text encodes back to this one id, alone or after an anchor token (a decoder that
  drops a leading space when a token starts the text, as SentencePiece's does, would otherwise hide it);
- ``single byte``: one byte that is not a character on its own (a SentencePiece byte-fallback token ``<0x9F>``, a
  byte-level BPE token of one byte >= 0x80), or a byte token whose character text spells with another id;
- ``partial UTF-8``: several bytes that are no whole UTF-8 sequence (decoded, they hold U+FFFD);
- ``unreachable``: whole text that encodes to other ids (``returned`` names them).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

CLASSES = ("round-trips", "unreachable", "partial UTF-8", "single byte", "special/control")
SPECIAL_TYPES = ("control", "unknown", "unused")  # GGUF token types text never produces
_BYTE_TOKEN = re.compile(r"<0x[0-9A-Fa-f]{2}>")  # SentencePiece's byte-fallback pieces
BATCH = 4096  # tokens decoded and encoded at once


def _byte_level_alphabet() -> dict[str, int]:
    """The characters byte-level BPE (GPT-2's) writes each byte as, mapped back to the byte: printable Latin-1
    characters stand for themselves, the other 68 bytes for U+0100 onwards, in order."""
    keep = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAC + 1), *range(0xAE, 0xFF + 1)]
    chars, extra = {}, 0
    for byte in range(256):
        if byte in keep:
            chars[chr(byte)] = byte
        else:
            chars[chr(256 + extra)] = byte
            extra += 1
    return chars


BYTE_LEVEL = _byte_level_alphabet()


def is_byte_level(tokenizer) -> bool:
    """Whether a fast tokenizer decodes byte-level BPE (its pieces spell bytes in :data:`BYTE_LEVEL`)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return False
    decoder = json.loads(backend.to_str()).get("decoder") or {}
    return "ByteLevel" in json.dumps(decoder)


def piece_bytes(piece: str, byte_level: bool) -> bytes | None:
    """The bytes a stored piece stands for: a byte-level piece through :data:`BYTE_LEVEL`, a byte-fallback piece
    ``<0xNN>`` as its byte, any other piece as UTF-8 (``▁`` as the space); None where a byte-level piece holds a
    character outside the alphabet (an added token)."""
    if _BYTE_TOKEN.fullmatch(piece):
        return bytes([int(piece[3:5], 16)])
    if byte_level:
        try:
            return bytes(BYTE_LEVEL[c] for c in piece)
        except KeyError:
            return None
    return piece.replace("\u2581", " ").encode("utf-8")


def _anchor(tokenizer) -> list[int]:
    """The ids of a short ordinary text put before a token whose text does not encode back alone."""
    return list(tokenizer("a\n", add_special_tokens=False)["input_ids"])


def round_trip(tokenizer, n: int, token_types: Sequence[str] | None = None) -> pd.DataFrame:
    """The round trip of ids 0..n-1 through ``tokenizer`` (a transformers tokenizer): one row per id with its
    ``round_trip`` class (:data:`CLASSES`), the decoded ``text`` and the ids its text encodes to (``returned``;
    empty where it round-trips). Ids beyond the tokenizer's vocabulary (padding rows of the head) are
    ``special/control``."""
    size = len(tokenizer)
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    types = list(token_types) if token_types is not None else [""] * n
    byte_level = is_byte_level(tokenizer)
    anchor = _anchor(tokenizer)
    ids = np.arange(min(n, size))
    pieces = tokenizer.convert_ids_to_tokens(ids.tolist())
    texts = []
    for s in range(0, len(ids), BATCH):
        texts += tokenizer.batch_decode([[int(i)] for i in ids[s : s + BATCH]], skip_special_tokens=False,
                                        clean_up_tokenization_spaces=False)
    encoded = []
    for s in range(0, len(texts), BATCH):
        encoded += tokenizer(texts[s : s + BATCH], add_special_tokens=False)["input_ids"]
    classes, returned = [], []
    retry = []
    for i, (piece, text, back) in enumerate(zip(pieces, texts, encoded, strict=True)):
        raw = piece_bytes(piece or "", byte_level)
        if i in special or types[i] in SPECIAL_TYPES:
            classes.append("special/control")
        elif list(back) == [i]:
            classes.append("round-trips")
        elif types[i] == "byte" or (raw is not None and len(raw) == 1 and raw[0] >= 0x80):
            classes.append("single byte")
        elif (not _is_utf8(raw)) if raw is not None else "\ufffd" in text:
            classes.append("partial UTF-8")
        else:
            classes.append(None)
            retry.append(i)
        returned.append([] if classes[-1] == "round-trips" else [int(v) for v in back])
    if retry:  # in context: after the anchor's text, where a leading space survives decoding
        joined = []
        for s in range(0, len(retry), BATCH):
            joined += tokenizer.batch_decode([[*anchor, i] for i in retry[s : s + BATCH]], skip_special_tokens=False,
                                             clean_up_tokenization_spaces=False)
        again = []
        for s in range(0, len(joined), BATCH):
            again += tokenizer(joined[s : s + BATCH], add_special_tokens=False)["input_ids"]
        for i, back in zip(retry, again, strict=True):
            if list(back) == [*anchor, i]:
                classes[i], returned[i] = "round-trips", []
            else:
                classes[i] = "unreachable"
    rows = pd.DataFrame({"category": ids, "round_trip": classes, "text": texts,
                         "returned": [" ".join(map(str, r)) for r in returned]})
    if n > size:
        pad = pd.DataFrame({"category": np.arange(size, n), "round_trip": "special/control", "text": "",
                            "returned": ""})
        rows = pd.concat([rows, pad], ignore_index=True)
    return rows


def _is_utf8(raw: bytes) -> bool:
    """Whether bytes are whole UTF-8."""
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def class_counts(trip: pd.DataFrame) -> dict[str, int]:
    """Tokens per round-trip class, every class named."""
    counts = trip["round_trip"].value_counts()
    return {c: int(counts.get(c, 0)) for c in CLASSES}


def load_tokenizer(path: str | Path):
    """The tokenizer a model file or directory carries, read offline by transformers: a GGUF file's metadata
    (``gguf_file``), or a directory's tokenizer files. Refused in one line where transformers cannot read it."""
    from transformers import AutoTokenizer

    path = Path(path)
    try:
        if path.is_file() and path.suffix == ".gguf":
            return AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name, local_files_only=True)
        return AutoTokenizer.from_pretrained(str(path), local_files_only=True, trust_remote_code=False)
    except (ValueError, OSError, KeyError, TypeError, RuntimeError) as err:
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise ValueError(f"{str(path)!r}: transformers cannot read its tokenizer ({first})") from None
