"""A model's vocabulary from its own files, and the paper's target-script filter (002 §4.2).

:func:`read_vocab` gives each output row its token, read from the files released with the model:
``vocab.json`` (GPT-2, RoBERTa, Marian/OPUS-MT, Nematus: token -> id), ``target_vocab.json`` (Marian with
separate vocabularies) and ``vocab-tgt.json`` (FSMT), ``vocab.txt`` (BERT: one token per line, the line
number is the id), ``tokenizer.json`` (fast tokenizers, incl. XLM-R's unigram list), Marian's YAML
vocabularies (``token: id``) and a JSON list of tokens in row order (our trained heads). Added tokens listed
in ``added_tokens.json`` or ``tokenizer.json`` fill ids the main file lacks.

:func:`script_classes` keeps the tokens the paper counts for translation models whose target script differs
from the source's: "We rely on the script to disambiguate between source and target language and discard
irrelevant tokens from other languages. We also ignore vocabulary tokens containing digits and punctuation"
(002 §4.2). A token is kept when, after removing the subword markers, it is non-empty and every character is
a letter or mark whose Unicode name begins with the script's name (``GREEK SMALL LETTER ALPHA``,
``CYRILLIC CAPITAL LETTER BE``, ``HEBREW POINT QAMATS``, ...); special tokens (``<unk>``, ``</s>``,
``<pad>``) are kept as well, since the paper lists ``<unk>`` among the unargmaxable tokens.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from argmaxable.models.weights import WeightsError

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
    """id -> token from one vocabulary file, by suffix."""
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


def read_vocab(where: str | Path, n: int) -> tuple[list[str] | None, list[Path]]:
    """Each of ``n`` output rows' token, from a vocabulary file or the first known one in a directory.

    Parameters
    ----------
    where : path
        A vocabulary file, or a model directory searched for :data:`VOCAB_FILES`.
    n : int
        Rows of the output layer. Ids the vocabulary lacks get ``""``; ids >= n are ignored.

    Returns
    -------
    tokens : list of str, or None
        None when a directory holds no known vocabulary file.
    files : list of Path
        The files read (for provenance).

    Raises
    ------
    WeightsError
        A named file that is missing or not a vocabulary.
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
    for path in [*extra[::-1], main]:  # the main file last: its ids win
        for i, token in _read_file(path).items():
            if 0 <= i < n:
                tokens[i] = token
    return tokens, [main, *extra]


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

