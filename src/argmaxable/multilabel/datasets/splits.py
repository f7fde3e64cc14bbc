"""Label vocabularies and label-covering splits shared by the dataset sources.

The thesis (§4.1.2 and Appendix A.6.1) builds BioASQ splits "making sure that all individual labels occur in
both the train and test sets", so that an unargmaxable test assignment cannot be blamed on a label the model
never saw. :func:`covering_split` does this greedily: rarest label first, each split that must cover the label
takes the first still-unassigned example holding it (in a seeded random order); the remaining examples then
fill the splits up to their sizes in the same order. Deterministic for a given seed and input order.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np

UNUSED = ""  # split name of examples that no split takes (e.g. beyond BioASQ's 100k/5k/10k)


def frequent_labels(
    label_lists: Iterable[Iterable[str]], *, min_freq: int = 1, num_labels: int | None = None
) -> list[str]:
    """Labels on at least ``min_freq`` examples, most frequent first (ties by name), at most ``num_labels``.

    Parameters
    ----------
    label_lists : iterable of iterables of str
        Active labels of each example.
    min_freq : int, default 1
        Minimum number of examples a label must occur on.
    num_labels : int, optional
        Keep only this many of the most frequent labels.

    Examples
    --------
    >>> frequent_labels([["a", "b"], ["b"], ["c", "b"], ["a"]], min_freq=2)
    ['b', 'a']
    """
    counts = Counter(label for labels in label_lists for label in set(labels))
    ranked = sorted((label for label, c in counts.items() if c >= min_freq), key=lambda x: (-counts[x], x))
    return ranked if num_labels is None else ranked[:num_labels]


def covering_split(
    labels: Sequence[Sequence[int]],
    sizes: dict[str, int | None],
    *,
    cover: Sequence[str] = ("train", "test"),
    seed: int = 0,
) -> np.ndarray:
    """Assign examples to splits so that every label occurs in each split of ``cover``.

    Parameters
    ----------
    labels : sequence of sequences of int
        Active label ids of each example (ids are non-negative ints).
    sizes : dict of str to int or None
        Target size of each split, filled in this order; ``None`` takes every example left over. A split
        named in ``cover`` can exceed its size when covering needs more examples than that.
    cover : sequence of str, default ("train", "test")
        Splits that must hold at least one example of every label that has enough examples.
    seed : int, default 0
        Seed of the random example order.

    Returns
    -------
    numpy.ndarray of str, shape (len(labels),)
        Split name of each example; :data:`UNUSED` (empty string) for examples no split took.

    Examples
    --------
    >>> covering_split([[0], [0, 1], [1], [0], [1]], {"test": 2, "train": None}).tolist()
    ['test', 'train', 'train', 'train', 'test']
    """
    unknown = [s for s in cover if s not in sizes]
    if unknown:
        raise ValueError(f"covering_split: cover splits {unknown} are not in sizes {list(sizes)}")
    names = list(sizes)
    n_ex = len(labels)
    rank = np.empty(n_ex, dtype=np.int64)
    rank[np.random.default_rng(seed).permutation(n_ex)] = np.arange(n_ex)
    assign = np.full(n_ex, -1, dtype=np.int64)  # index into names, -1 = unassigned
    owner, starts = _examples_by_label(labels, rank)
    _cover(labels, owner, starts, [names.index(split) for split in cover], assign)
    _fill(rank, [sizes[split] for split in names], assign)
    return np.array([*names, UNUSED], dtype=object)[assign].astype(str)


def _examples_by_label(labels: Sequence[Sequence[int]], rank: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Inverted index: for each label, its examples in random (rank) order.

    Returns ``owner`` (the examples, grouped by label) and ``starts``: label l's examples are
    ``owner[starts[l]:starts[l + 1]]``.
    """
    n_ex = len(labels)
    lens = np.fromiter((len(y) for y in labels), dtype=np.int64, count=n_ex)
    flat = np.fromiter((i for y in labels for i in y), dtype=np.int64, count=int(lens.sum()))
    owner = np.repeat(np.arange(n_ex), lens)
    order = np.lexsort((rank[owner], flat))
    flat, owner = flat[order], owner[order]
    n_labels = int(flat.max()) + 1 if flat.size else 0
    return owner, np.searchsorted(flat, np.arange(n_labels + 1))


def _cover(labels: Sequence[Sequence[int]], owner: np.ndarray, starts: np.ndarray, cover: list[int],
           assign: np.ndarray) -> None:
    """Rarest label first, each cover split (an index into the split names) takes the first unassigned example
    holding it; writes the splits into ``assign``."""
    covered = np.zeros((len(cover), len(starts) - 1), dtype=bool)
    cursor = starts[:-1].copy()
    for label in np.argsort(np.diff(starts), kind="stable"):
        for c, split in enumerate(cover):
            if covered[c, label]:
                continue
            p = cursor[label]
            while p < starts[label + 1] and assign[owner[p]] >= 0:
                p += 1
            cursor[label] = p
            if p == starts[label + 1]:
                break  # too few examples; the builder drops labels missing from train
            ex = owner[p]
            assign[ex] = split
            covered[c, list(labels[ex])] = True


def _fill(rank: np.ndarray, sizes: list[int | None], assign: np.ndarray) -> None:
    """Fill each split (in order) up to its size with unassigned examples in random order (``None``: all left)."""
    free = np.argsort(rank)
    free = free[assign[free] < 0]
    taken = 0
    for s, size in enumerate(sizes):
        need = len(free) - taken if size is None else max(0, size - int(np.sum(assign == s)))
        assign[free[taken : taken + need]] = s
        taken += min(need, len(free) - taken)
