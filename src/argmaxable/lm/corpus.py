"""The language model's text: debtags package descriptions, a word vocabulary, token ids per split.

Words are those of the multi-label CNN encoder (:func:`argmaxable.text.tokenize`: lower-cased,
alphanumeric, package-style names such as ``lib-foo2.0`` kept whole). The vocabulary is built from the
training split only, deterministically: ``<eos>`` (row 0: ends every description and pads the context before
its first word), ``<unk>`` (row 1: every word outside the vocabulary), then the most frequent words, ties
broken alphabetically. Each token's training count and frequency rank (1 = most frequent) are recorded, so
tables can say which tokens are rare.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import numpy as np
import pandas as pd

from argmaxable.text import tokenize

EOS, UNK = "<eos>", "<unk>"  # rows 0 and 1 of every vocabulary


def build_vocab(texts: Iterable[str], size: int) -> pd.DataFrame:
    """The ``size`` output tokens of the model, from the training texts.

    Parameters
    ----------
    texts : iterable of str
        Training descriptions.
    size : int
        Number of tokens, ``<eos>`` and ``<unk>`` included (at least 3).

    Returns
    -------
    pandas.DataFrame
        One row per token in row order: ``token``, ``count`` (occurrences in the training texts; for ``<eos>``
        the number of texts, for ``<unk>`` the words left out) and ``rank`` (1 = most frequent, by count).

    Examples
    --------
    >>> build_vocab(["a b a", "c a"], 4)[["token", "count", "rank"]].values.tolist()
    [['<eos>', 2, 2], ['<unk>', 1, 3], ['a', 3, 1], ['b', 1, 4]]
    """
    if size < 3:
        raise ValueError(f"The 'size' parameter of build_vocab must be at least 3 (<eos>, <unk>, a word). "
                         f"Got {size!r}.")
    counts, docs = Counter(), 0
    for text in texts:
        counts.update(tokenize(text))
        docs += 1
    kept = sorted(counts, key=lambda w: (-counts[w], w))[: size - 2]
    left_out = sum(counts.values()) - sum(counts[w] for w in kept)
    vocab = pd.DataFrame({"token": [EOS, UNK, *kept], "count": [docs, left_out, *(counts[w] for w in kept)]})
    # rank by count, ties in row order, so the ranking is as deterministic as the vocabulary
    vocab["rank"] = vocab["count"].rank(method="first", ascending=False).astype(int)
    return vocab


def encode(texts: Iterable[str], tokens: list[str]) -> np.ndarray:
    """One stream of token ids: each text's words followed by ``<eos>``; unknown words map to ``<unk>``.

    Returns
    -------
    numpy.ndarray of int64, shape (total tokens,)
    """
    index = {t: i for i, t in enumerate(tokens)}
    unk, eos = index[UNK], index[EOS]
    ids: list[int] = []
    for text in texts:
        ids.extend(index.get(w, unk) for w in tokenize(text))
        ids.append(eos)
    return np.asarray(ids, dtype=np.int64)


def windows(ids: np.ndarray, context: int) -> tuple[np.ndarray, np.ndarray]:
    """Every (previous ``context`` tokens, next token) pair of a stream that starts after an ``<eos>``.

    Returns
    -------
    (numpy.ndarray (N, context), numpy.ndarray (N,))
        Contexts and targets, N = len(ids); positions before the stream's start read ``<eos>`` (id 0).
    """
    padded = np.concatenate([np.zeros(context, dtype=np.int64), ids])  # (context + N,)
    ctx = np.lib.stride_tricks.sliding_window_view(padded, context)[:-1]  # (N, context)
    return np.ascontiguousarray(ctx), ids
