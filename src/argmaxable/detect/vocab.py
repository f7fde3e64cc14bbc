"""A model's vocabulary from its own files, and the paper's target-script filter (ACL 2022 §4.2).

:func:`read_vocab` gives each output row its token, read from the files released with the model:
``vocab.json`` (GPT-2, RoBERTa, Marian/OPUS-MT, Nematus: token -> id), ``target_vocab.json`` (Marian with
separate vocabularies) and ``vocab-tgt.json`` (FSMT), ``vocab.txt`` (BERT: one token per line, the line
number is the id), ``tokenizer.json`` (fast tokenizers, incl. XLM-R's unigram list), Marian's YAML
vocabularies (``token: id``) and a JSON list of tokens in row order (our trained heads). Added tokens listed
in ``added_tokens.json`` or ``tokenizer.json`` fill ids the main file lacks.

:func:`script_classes` keeps the tokens the paper counts for translation models whose target script differs
from the source's: "We rely on the script to disambiguate between source and target language and discard
irrelevant tokens from other languages. We also ignore vocabulary tokens containing digits and punctuation"
(ACL 2022 §4.2). A token is kept when, after removing the subword markers, it is non-empty and every character is
a letter or mark whose Unicode name begins with the script's name (``GREEK SMALL LETTER ALPHA``,
``CYRILLIC CAPITAL LETTER BE``, ``HEBREW POINT QAMATS``, ...); special tokens (``<unk>``, ``</s>``,
``<pad>``) are kept as well, since the paper lists ``<unk>`` among the unargmaxable tokens.

:func:`readable_tokens` shows byte-level BPE tokens (GPT-2, RoBERTa, SmolLM2: every byte stored as one printable
character, ``Ġ`` for the space) as the text they decode to (``Ġwith`` -> `` with``), with bytes that print
nothing, or that are no whole UTF-8 character, as ``<0x0A>``.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from argmaxable.detect.source import first_line
from argmaxable.detect.weights import WeightsError

# Output-side vocabulary files in the order they are tried inside a model directory: the target vocabulary
# before a shared one, plain vocabularies before the tokenizer.json that repeats them.
VOCAB_FILES = ("target_vocab.json", "vocab-tgt.json", "vocab.json", "vocab.txt", "tokenizer.json")
ADDED_FILES = ("added_tokens.json", "tokenizer.json")
# SentencePiece's word-start marker, BPE's end-of-word (subword-nmt/XLM/FSMT) and continuation markers.
MARKERS = ("\u2581", "</w>", "@@")
SPECIAL = re.compile(r"^(<[^<>\s]+>|\[[A-Z]+\])$")  # <unk>, </s>, <pad>, <|endoftext|>, [UNK], [CLS]


def _read_json(path: Path) -> dict[int, str]:
    """id -> token from a vocab.json (token -> id), a tokenizer.json (its model's vocab, a dict or a unigram
    list, plus added tokens) or a JSON list of tokens in row order."""
    data = json.loads(path.read_text(encoding="utf-8"))
    if isinstance(data, list) and all(isinstance(t, str) for t in data):
        return dict(enumerate(data))
    if isinstance(data, dict) and isinstance(data.get("model"), dict):  # not a plain vocab holding the word "model"
        vocab = data["model"].get("vocab") or {}
        if isinstance(vocab, list):  # unigram: [[piece, score], ...] in id order
            vocab = {piece: i for i, (piece, _score) in enumerate(vocab)}
        added = {t["content"]: t["id"] for t in data.get("added_tokens") or []}
        data = {**vocab, **added}
    if not isinstance(data, dict) or not all(isinstance(v, int) for v in data.values()):
        raise WeightsError(f"{path} is not a vocabulary (token -> id, or a list of tokens)")
    return {i: token for token, i in data.items()}


def _read_file(path: Path) -> dict[int, str]:
    """id -> token from one vocabulary file, by suffix; a file that is not one (malformed, nested too deep, ids
    or tokens of other types) is one line naming it."""
    try:
        vocab = _parse(path)
    except WeightsError:
        raise
    except Exception as err:  # json, yaml and the structure's own errors (KeyError, TypeError, RecursionError)
        raise WeightsError(f"{str(path)!r} is not a vocabulary ({type(err).__name__}: {first_line(err)})") from None
    if not all(isinstance(i, int) and isinstance(t, str) for i, t in vocab.items()):
        raise WeightsError(f"{str(path)!r} is not a vocabulary (its ids must be integers, its tokens text)")
    return vocab


def _parse(path: Path) -> dict[int, str]:
    suffix = path.suffix.lower()
    if suffix == ".json":
        return _read_json(path)
    if suffix == ".txt":
        return dict(enumerate(path.read_text(encoding="utf-8").splitlines()))
    if suffix in (".yml", ".yaml"):
        import yaml

        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise WeightsError(f"{path} is not a Marian token: id vocabulary")
        return {int(i): str(token) for token, i in data.items()}
    raise WeightsError(f"unsupported vocabulary file {path.name}: give a .json, .txt or .yml vocabulary "
                       "(SentencePiece .spm models are not read)")


def read_vocab(where: str | Path, n: int, exact: bool = False) -> tuple[list[str] | None, list[Path]]:
    """Each of ``n`` output rows' token, from a vocabulary file or the first known one in a directory.

    Parameters
    ----------
    where : path
        A vocabulary file, or a model directory searched for :data:`VOCAB_FILES`.
    n : int
        Rows of the output layer. Ids the vocabulary lacks get ``""``; ids >= n are ignored.
    exact : bool, default False
        Require the vocabulary to name exactly the ids 0..n-1 (a file given for a head: one of another length
        would name rows wrongly).

    Returns
    -------
    tokens : list of str, or None
        None when a directory holds no known vocabulary file.
    files : list of Path
        The files read (for provenance).

    Raises
    ------
    WeightsError
        A named file that is missing or not a vocabulary; with ``exact``, one that does not name ids 0..n-1.
    """
    where = Path(where)
    if where.is_dir():
        main = next((where / f for f in VOCAB_FILES if (where / f).is_file()), None)
        if main is None:
            return None, []
        extra = [where / f for f in ADDED_FILES if (where / f).is_file() and f != main.name]
    elif where.is_file():
        main, extra = where, []
    else:
        raise WeightsError(f"vocabulary file {str(where)!r} does not exist")
    tokens = [""] * n
    ids = set()
    for path in [*extra[::-1], main]:  # the main file last: its ids win
        for i, token in _read_file(path).items():
            ids.add(i)
            if 0 <= i < n:
                tokens[i] = token
    if exact and ids != set(range(n)):
        raise WeightsError(f"vocabulary {str(main)!r} names {len(ids)} tokens (ids {min(ids, default=0)}.."
                           f"{max(ids, default=-1)}) for the head's {n} rows: give one naming each row, in row order "
                           "(a model may add tokens its dictionary lacks, e.g. a CTC blank)")
    return tokens, [main, *extra]


def _byte_chars() -> list[str]:
    """The character byte-level BPE stores for each byte 0..255: printable Latin-1 bytes stand for
    themselves, the other 68 (controls, space, soft hyphen, ...) for the characters from U+0100 on, in byte order."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("\u00a1"), ord("\u00ac") + 1),
            *range(ord("\u00ae"), ord("\u00ff") + 1)]
    chars, shifted = [], 0
    for byte in range(256):
        if byte in keep:
            chars.append(chr(byte))
        else:
            chars.append(chr(256 + shifted))
            shifted += 1
    return chars


BYTE_CHARS = _byte_chars()
_CHAR_BYTES = {c: b for b, c in enumerate(BYTE_CHARS)}


def is_byte_level(tokens: Sequence[str]) -> bool:
    """Whether a vocabulary is byte-level BPE: it holds each of the 256 byte characters as a token of its own."""
    return set(BYTE_CHARS) <= set(tokens)


def _show(text: str) -> str:
    """``text`` with characters that print nothing (newline, tab, controls) as their UTF-8 bytes ``<0xNN>``;
    lone surrogates from undecodable bytes (``surrogateescape``) become the byte they stand for."""
    out = []
    for c in text:
        if 0xDC80 <= ord(c) <= 0xDCFF:
            out.append(f"<0x{ord(c) - 0xDC00:02X}>")
        elif c.isprintable():
            out.append(c)
        else:
            out.extend(f"<0x{b:02X}>" for b in c.encode("utf-8"))
    return "".join(out)


def byte_level_text(token: str) -> str:
    """The text a byte-level BPE token decodes to, unprintable bytes as ``<0xNN>``; tokens that are not made of
    byte characters (added special tokens such as ``<|endoftext|>``) are returned as they are.

    Examples
    --------
    >>> byte_level_text("Ġwith"), byte_level_text("Ċ"), byte_level_text("<|endoftext|>")
    (' with', '<0x0A>', '<|endoftext|>')
    >>> byte_level_text("Ã©"), byte_level_text("Ã")  # é, and the first byte of a two-byte character
    ('é', '<0xC3>')
    """
    if not token or any(c not in _CHAR_BYTES for c in token):
        return token
    return _show(bytes(_CHAR_BYTES[c] for c in token).decode("utf-8", errors="surrogateescape"))


def readable_tokens(tokens: Sequence[str], scheme: str = "auto") -> list[str] | None:
    """Each token as the text it stands for, or None when the names are shown as they are stored.

    ``scheme``: ``byte_level`` (GPT-2's byte characters), ``sentencepiece`` (``▁`` is the space; llama.cpp's
    ``llama`` tokenizer, whose byte tokens are already ``<0x0A>``), ``none``, or ``auto``: byte-level when the
    vocabulary holds all 256 byte characters (:func:`is_byte_level`), else none.
    """
    if scheme == "auto":
        scheme = "byte_level" if is_byte_level(tokens) else "none"
    if scheme == "byte_level":
        return [byte_level_text(t) for t in tokens]
    if scheme == "sentencepiece":
        return [_show(t.replace(MARKERS[0], " ")) for t in tokens]
    return None


def strip_markers(token: str) -> str:
    """The token without SentencePiece/BPE subword markers (:data:`MARKERS`)."""
    for marker in MARKERS:
        token = token.replace(marker, "")
    return token


def is_special(token: str) -> bool:
    """Whether a token is a special symbol such as ``<unk>``, ``</s>`` or ``[CLS]``."""
    return token not in MARKERS and bool(SPECIAL.match(token))  # a bare "</w>" is a marker, not a symbol


def in_script(token: str, script: str) -> bool:
    """Whether the paper counts ``token`` for target script ``script`` (e.g. ``"GREEK"``): see the module doc.

    Examples
    --------
    >>> in_script("▁λόγος", "GREEK"), in_script("λόγος1", "GREEK"), in_script("▁λόγος", "CYRILLIC")
    (True, False, False)
    >>> in_script("<unk>", "CYRILLIC"), in_script("▁", "LATIN")
    (True, False)
    """
    if is_special(token):
        return True
    core = strip_markers(token)
    prefix = script.upper() + " "  # "ARABIC " but not "ARABIC-INDIC DIGIT ZERO"
    return bool(core) and all(unicodedata.category(c)[0] in "LM" and unicodedata.name(c, "").startswith(prefix)
                              for c in core)


def script_classes(tokens: Sequence[str], script: str) -> np.ndarray:
    """Indices of the tokens counted for ``script`` (:func:`in_script`), ascending."""
    return np.array([i for i, t in enumerate(tokens) if in_script(t, script)], dtype=np.int64)

