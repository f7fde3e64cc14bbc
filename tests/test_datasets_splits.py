"""Label vocabularies and label-covering splits (thesis A.6.1: every label occurs in train and test)."""

from __future__ import annotations

import numpy as np
import pytest

from argmaxable.multilabel.datasets.splits import UNUSED, covering_split, frequent_labels


def random_labels(n_examples: int, n_labels: int, seed: int) -> list[list[int]]:
    """Zipf-like label frequencies, as in real MLC data (thesis Fig. 5.1): a few frequent, many rare."""
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, n_labels + 1)
    return [sorted(rng.choice(n_labels, size=rng.integers(1, 6), replace=False, p=p / p.sum()).tolist())
            for _ in range(n_examples)]


def labels_in(labels, split, name):
    return {i for y, s in zip(labels, split, strict=True) if s == name for i in y}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_label_with_two_examples_is_in_train_and_test(seed):
    labels = random_labels(3000, 400, seed)
    counts = np.bincount([i for y in labels for i in y], minlength=400)
    split = covering_split(labels, {"test": 300, "dev": 150, "train": 1500}, seed=seed)
    coverable = set(np.flatnonzero(counts >= 2).tolist())
    assert coverable <= labels_in(labels, split, "train")
    assert coverable <= labels_in(labels, split, "test")
    assert labels_in(labels, split, "dev") <= labels_in(labels, split, "train")
    sizes = {s: int(np.sum(split == s)) for s in ("train", "dev", "test", UNUSED)}
    assert sizes["dev"] == 150 and sizes["train"] == 1500
    assert sizes["test"] >= 300  # covering may need more examples than the target size
    assert sum(sizes.values()) == 3000


def test_split_is_deterministic_and_seeded():
    labels = random_labels(500, 50, 7)
    sizes = {"test": 50, "dev": 50, "train": None}
    a = covering_split(labels, sizes, seed=3)
    assert (a == covering_split(labels, sizes, seed=3)).all()
    assert (a != covering_split(labels, sizes, seed=4)).any()
    assert UNUSED not in set(a)  # train=None takes the rest


def test_a_label_on_one_example_goes_to_train_first():
    split = covering_split([[0, 1], [1], [1], [1]], {"test": 1, "train": None})
    assert split[0] == "train"


def test_cover_split_must_be_sized():
    with pytest.raises(ValueError, match="cover splits"):
        covering_split([[0]], {"train": None}, cover=("train", "test"))


def test_frequent_labels_ranks_and_thresholds():
    lists = [["a", "b"], ["b", "b"], ["c", "b"], ["a"], ["c"], ["d"]]
    assert frequent_labels(lists) == ["b", "a", "c", "d"]  # b on 3 examples (duplicates count once)
    assert frequent_labels(lists, min_freq=2) == ["b", "a", "c"]
    assert frequent_labels(lists, min_freq=2, num_labels=2) == ["b", "a"]
