"""Format-true stand-ins of the paper's multi-label inputs at their true sizes, for the rehearsal
(the real ones are out of reach offline).

No real record: every note, abstract, heading, image and weight is drawn from a seeded generator. What is real
is the files' framing and the sizes and rates below, each from a named source. ``python -m
argmaxable.multilabel.standins DIR`` writes, under ``DIR`` (the rehearsal's ``data_dir``, ``data/rehearsal``):

- ``mimic3/{train,dev,test}_full.csv``: CAML's output form (jamesmullenbach/caml-mimic at 44a4745,
  ``notebooks/dataproc_mimic_III.ipynb``): columns SUBJECT_ID, HADM_ID, TEXT, LABELS, length; TEXT lower-cased
  ``\\w+`` tokens without numeric-only ones, space-joined; LABELS ';'-joined ICD-9 codes with the period where
  ``datasets.reformat`` puts it; each split sorted by length. Sizes: 47,723 / 1,631 / 3,372 notes (the
  repository's ``*_full_hadm_ids.csv``; thesis §4.1.2); 79,801,387 tokens over 52,726 notes, so 1,513.5 tokens
  a note on average (the notebook's printed counts); 8,921 codes (thesis Table 4.1), the 50 most frequent named
  as the notebook prints them; 15.9 codes a note on average (CAML's paper, Mullenbach et al. 2018, Table 1,
  "MIMIC-III full"); at most 80 (thesis §5.1: k = 80).
- ``bioasq/allMeSH_2021.json``: ``{"articles":[`` then one JSON article a line, latin-1, fields journal,
  meshMajor, year, abstractText, pmid, title (BioASQ participants area, "BioASQ datasets"). 1,000,000 articles:
  the thesis's "1m subset" (A.6.1), which the build reads; headings drawn from 29,369 (the MeSH headings the
  2021 training set covers, as its release states), 12.68 a article on average (the same table's
  "Avg. MeSH/article" for Training v.2021), capped at 60 so that the build's k = 50 filter (thesis §4.1.2) has
  articles to drop.
- ``openimages/``: the v6 human-verified image-level label CSVs (ImageID, Source, LabelName, Confidence) with
  their true row counts, 57,524,352 / 595,339 / 1,799,883 (train / validation / test: together the 59,919,574
  image-level labels the v6 release states), over 1,743,042 / 41,620 / 125,436 images (the train images CVDF
  serves, whose shards the thesis used, and the validation and test splits); 19,957 classes
  (``oidv6-class-descriptions.csv``), 9,605 trainable (``oidv6-classes-trainable.txt``); 108,228 train images
  with IDs starting with "1" (thesis A.6.1), whose positive trainable labels span 8,933 classes (thesis
  Table 4.1) and at most 45 per image (thesis §4.1.2); ``images/<ImageID>.jpg`` for every image the build
  selects, each a hard link to one of :data:`DISTINCT_JPEGS` small synthetic JPEGs.
- the encoders ``--encoders`` names under ``DIR`` (the composed config's, as JSON):
  for a Hugging Face encoder (``encoder.pretrained`` a directory there), a PubMedBERT replica in the hub
  repository's layout (config.json as the hub's, BERT base with vocabulary 30,522, changed by ``encoder.arch``
  where the config shrinks it; vocab.txt; model.safetensors with BertForMaskedLM's tensors), seeded random
  weights, vocabulary built from the stand-ins' words so that they tokenize; for a timm encoder
  (``encoder.checkpoint`` a file there; ``--tresnet``, needs the ``images`` extra), its model (``tresnet_l`` with
  ``encoder.arch``) with a 9,605-class head, seeded random weights, under the ``model`` key as ASL saves it.

Rates no source gives are stated where they are drawn (``ASSUMED``): word and heading frequencies are Zipf with
exponent 1; note lengths, label counts and abstract lengths are log-normal.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

# caml-mimic's notebook, cell "codes_50": MIMIC-III's 50 most frequent codes, most frequent first
CAML_TOP50 = ("401.9", "38.93", "428.0", "427.31", "414.01", "96.04", "96.6", "584.9", "250.00", "96.71",
              "272.4", "518.81", "99.04", "39.61", "599.0", "530.81", "96.72", "272.0", "285.9", "88.56",
              "244.9", "486", "38.91", "285.1", "36.15", "276.2", "496", "99.15", "995.92", "V58.61", "507.0",
              "038.9", "88.72", "585.9", "403.90", "311", "305.1", "37.22", "412", "33.24", "39.95", "287.5",
              "410.71", "276.1", "V45.81", "424.0", "45.13", "V15.82", "511.9", "37.23")
MESH_TOP = ["Humans", "Animals", "Female", "Male", "Mice", "Adult", "Middle Aged", "Aged", "Rats",
            "Adolescent"]  # real MeSH headings (vocabulary, not records) at the head of the frequency ranking
DISTINCT_JPEGS = 256  # distinct synthetic images behind the OpenImages hard links
ASSUMED = {  # rates no source gives (see the module docstring)
    "zipf_exponent": 1.0,
    "note_tokens_sigma": 0.55,  # log-normal spread of note lengths around CAML's mean
    "codes_sigma": 0.6,  # log-normal spread of codes a note around CAML's mean
    "abstract_words_mean": 200.0,
    "abstract_words_sigma": 0.4,
    "title_words_mean": 12.0,
    "headings_sigma": 0.45,
    "openimages_positive_mean": 8.0,  # positive trainable labels of a train image
    "openimages_positive_sigma": 0.6,
}


@dataclass(frozen=True)
class Mimic3:
    splits: dict[str, int] = field(default_factory=lambda: {"train": 47_723, "dev": 1_631, "test": 3_372})
    codes: int = 8_921
    mean_tokens: float = 79_801_387 / 52_726
    mean_codes: float = 15.9
    max_codes: int = 80
    types: int = 150_854  # word types of the discharge summaries (the notebook's "Num types")


@dataclass(frozen=True)
class BioASQ:
    articles: int = 1_000_000
    headings: int = 29_369
    mean_headings: float = 12.68
    max_headings: int = 60
    types: int = 100_000
    journals: int = 5_000


@dataclass(frozen=True)
class OpenImages:
    rows: dict[str, int] = field(default_factory=lambda: {"train": 57_524_352, "validation": 595_339,
                                                          "test": 1_799_883})
    images: dict[str, int] = field(default_factory=lambda: {"train": 1_743_042, "validation": 41_620,
                                                            "test": 125_436})
    classes: int = 19_957
    trainable: int = 9_605
    shard: int = 108_228  # train images whose ID starts with "1"
    shard_classes: int = 8_933
    max_positive: int = 45
    dev_size: int = 5_000  # the first images of validation and test the build keeps (thesis A.6.1)
    test_size: int = 10_000


# ----------------------------------------------------------------------------------------------- shared


def _zipf(n: int) -> np.ndarray:
    """Cumulative Zipf probabilities over ranks 1..n (exponent ``ASSUMED``)."""
    p = 1.0 / np.arange(1, n + 1) ** ASSUMED["zipf_exponent"]
    return np.cumsum(p / p.sum())


def _draw(rng: np.random.Generator, cdf: np.ndarray, size: int) -> np.ndarray:
    """Ranks (0-based) drawn from a cumulative distribution."""
    return np.minimum(np.searchsorted(cdf, rng.random(size)), len(cdf) - 1)


def _lognormal_counts(rng, mean: float, sigma: float, size: int, lo: int, hi: int) -> np.ndarray:
    """Integer counts with the given mean (before clipping to [lo, hi])."""
    return np.clip(np.rint(rng.lognormal(math.log(mean) - sigma**2 / 2, sigma, size)), lo, hi).astype(np.int64)


def _distinct(rng, cdf: np.ndarray, count: int) -> list[int]:
    """``count`` distinct ranks, drawn by frequency (draws repeated until enough are distinct)."""
    out: dict[int, None] = {}
    while len(out) < count:
        out.update(dict.fromkeys(_draw(rng, cdf, 2 * (count - len(out)) + 4).tolist()))
    return list(out)[:count]


_SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]


def _words(n: int) -> np.ndarray:
    """``n`` distinct pronounceable lower-case words (base-70 numerals in syllables), shortest first."""
    out, i = [], 0
    while len(out) < n:
        digits, k = [], i
        while True:
            digits.append(_SYLLABLES[k % len(_SYLLABLES)])
            k //= len(_SYLLABLES)
            if k == 0:
                break
        out.append("".join(reversed(digits)))
        i += 1
    return np.array(out, dtype=object)


def _texts(rng, vocab: np.ndarray, cdf: np.ndarray, lengths: np.ndarray) -> Iterator[str]:
    """Space-joined words of the given lengths, drawn by frequency, in blocks (memory bounded)."""
    for start in range(0, len(lengths), 4096):
        block = lengths[start : start + 4096]
        words = vocab[_draw(rng, cdf, int(block.sum()))]
        for part in np.split(words, np.cumsum(block)[:-1]):
            yield " ".join(part)


# ----------------------------------------------------------------------------------------------- MIMIC-III


def _icd9(rng, n: int, taken: set[str]) -> list[str]:
    """``n`` new synthetic ICD-9 codes in CAML's notation (diagnoses ddd.dd, V/E codes, procedures dd.dd)."""
    out: list[str] = []
    while len(out) < n:
        kind = rng.integers(0, 4)
        if kind == 0:
            code = f"{rng.integers(1, 1000):03d}.{rng.integers(0, 100):02d}"
        elif kind == 1:
            code = f"V{rng.integers(1, 92):02d}.{rng.integers(0, 10)}"
        elif kind == 2:
            code = f"E{rng.integers(800, 1000):03d}.{rng.integers(0, 10)}"
        else:
            code = f"{rng.integers(0, 100):02d}.{rng.integers(0, 100):02d}"
        if code not in taken:
            taken.add(code)
            out.append(code)
    return out


def write_mimic3(root: Path, spec: Mimic3 = Mimic3(), seed: int = 0) -> dict[str, int]:
    """CAML's ``{train,dev,test}_full.csv`` under ``root``; returns rows per split."""
    rng = np.random.default_rng([seed, 3])
    root.mkdir(parents=True, exist_ok=True)
    codes = list(CAML_TOP50[: spec.codes])
    codes += _icd9(rng, spec.codes - len(codes), set(codes))
    code_cdf, vocab, word_cdf = _zipf(spec.codes), _words(spec.types), _zipf(spec.types)
    total = sum(spec.splits.values())
    n_codes = _lognormal_counts(rng, spec.mean_codes, ASSUMED["codes_sigma"], total, 1, spec.max_codes)
    n_codes[0] = spec.max_codes  # a training note at the bound: k = 80 (thesis §5.1)
    labels = [_distinct(rng, code_cdf, int(c)) for c in n_codes]
    unseen = sorted(set(range(spec.codes)) - {c for y in labels for c in y})
    roomy = [y for y in labels[: spec.splits["train"]] if len(y) < spec.max_codes]
    for j, code in enumerate(unseen):  # every code of the vocabulary on some training note
        roomy[j % len(roomy)].append(code)
    lengths = _lognormal_counts(rng, spec.mean_tokens, ASSUMED["note_tokens_sigma"], total, 10,
                                int(20 * spec.mean_tokens))
    texts = _texts(rng, vocab, word_cdf, lengths)
    hadm = rng.permutation(np.arange(100_001, 200_000))[:total]  # MIMIC-III's HADM_IDs are 6-digit
    start = 0
    for split, m in spec.splits.items():
        rows = [(int(rng.integers(1, 100_000)), int(hadm[start + i]), next(texts),
                 ";".join(codes[c] for c in labels[start + i]), int(lengths[start + i])) for i in range(m)]
        rows.sort(key=lambda r: r[4])  # CAML sorts each split by length
        with open(root / f"{split}_full.csv", "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["SUBJECT_ID", "HADM_ID", "TEXT", "LABELS", "length"])
            w.writerows(rows)
        start += m
    return dict(spec.splits)


# ----------------------------------------------------------------------------------------------- BioASQ


def write_bioasq(root: Path, spec: BioASQ = BioASQ(), seed: int = 0) -> int:
    """``allMeSH_2021.json`` under ``root`` in BioASQ's framing; returns the number of articles."""
    rng = np.random.default_rng([seed, 4])
    root.mkdir(parents=True, exist_ok=True)
    names = MESH_TOP[: spec.headings] + [f"Heading {i:05d}" for i in range(len(MESH_TOP), spec.headings)]
    head_cdf, vocab, word_cdf = _zipf(spec.headings), _words(spec.types), _zipf(spec.types)
    journals = [f"J {w.capitalize()} Méd" if i % 7 == 0 else f"J {w.capitalize()} Res"
                for i, w in enumerate(_words(spec.journals))]  # latin-1 beyond ASCII, as real titles have
    n_heads = _lognormal_counts(rng, spec.mean_headings, ASSUMED["headings_sigma"], spec.articles, 1,
                                spec.max_headings)
    abstract = _lognormal_counts(rng, ASSUMED["abstract_words_mean"], ASSUMED["abstract_words_sigma"],
                                 spec.articles, 5, 2000)
    title = _lognormal_counts(rng, ASSUMED["title_words_mean"], 0.3, spec.articles, 2, 60)
    abstracts, titles = _texts(rng, vocab, word_cdf, abstract), _texts(rng, vocab, word_cdf, title)
    with open(root / "allMeSH_2021.json", "w", encoding="latin-1") as fh:
        fh.write('{"articles":[\n')
        for i in range(spec.articles):
            article = {"journal": journals[int(rng.integers(spec.journals))],
                       "meshMajor": [names[h] for h in _distinct(rng, head_cdf, int(n_heads[i]))],
                       "year": str(1946 + int(rng.integers(76))), "abstractText": next(abstracts).capitalize() + ".",
                       "pmid": str(10_000_000 + i), "title": next(titles).capitalize() + "."}
            fh.write(json.dumps(article, ensure_ascii=False) + (",\n" if i + 1 < spec.articles else "]}\n"))
    return spec.articles


# ----------------------------------------------------------------------------------------------- OpenImages


def _mids(rng, n: int) -> list[str]:
    """``n`` distinct synthetic Freebase-style MIDs (``/m/0`` and five characters)."""
    alphabet = np.array(list("0123456789bcdfghjklmnpqrstvwxyz_"))
    out: dict[str, None] = {}
    while len(out) < n:
        for s in alphabet[rng.integers(0, len(alphabet), (n, 5))]:
            out["/m/0" + "".join(s)] = None
    return list(out)[:n]


def _image_ids(rng, n: int, first: str = "", exclude: str = "") -> np.ndarray:
    """``n`` distinct sorted 16-hex-digit ImageIDs, all starting with ``first`` (when given), none with
    ``exclude`` (when given)."""
    ids: set[str] = set()
    while len(ids) < n:
        for v in rng.integers(0, 2**64, n - len(ids), dtype=np.uint64):
            s = f"{int(v):016x}"
            s = first + s[len(first):]
            if not (exclude and s.startswith(exclude)):
                ids.add(s)
    return np.array(sorted(ids), dtype=object)


def _exact_counts(rng, counts: np.ndarray, total: int, floor: np.ndarray) -> np.ndarray:
    """``counts`` nudged up or down one at a time, at random positions and never below ``floor``, until they
    sum to ``total``."""
    counts = np.maximum(counts, floor)
    while (gap := total - int(counts.sum())) != 0:
        pos = rng.integers(0, len(counts), min(abs(gap), len(counts)))
        if gap > 0:
            np.add.at(counts, pos, 1)
        else:
            counts[pos] = np.maximum(counts[pos] - 1, floor[pos])
    return counts


def _label_rows(rng, ids: np.ndarray, rows: np.ndarray, positives: list[list[int]], trainable: int,
                mids: list[str]) -> Iterator[str]:
    """CSV lines of images: their positive trainable labels (Confidence 1), then other verified labels: negatives
    of any class, and positives of classes that are not trainable."""
    sources = ("verification", "crowdsource-verification")
    for i, image in enumerate(ids):
        pos = positives[i]
        others = rng.integers(0, len(mids), int(rows[i]) - len(pos))
        conf = (rng.random(len(others)) < 0.25) & (others >= trainable)
        src = rng.integers(0, 2, int(rows[i]))
        for j, c in enumerate(pos):
            yield f"{image},{sources[src[j]]},{mids[c]},1\n"
        for j, c in enumerate(others):
            yield f"{image},{sources[src[len(pos) + j]]},{mids[c]},{int(conf[j])}\n"


def write_openimages(root: Path, spec: OpenImages = OpenImages(), seed: int = 0) -> dict[str, int]:
    """Label CSVs, class lists and hard-linked JPEGs under ``root``; returns the images linked per split."""
    rng = np.random.default_rng([seed, 5])
    root.mkdir(parents=True, exist_ok=True)
    mids = _mids(rng, spec.classes)
    with open(root / "oidv6-class-descriptions.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["LabelName", "DisplayName"])
        w.writerows((m, f"Object {i:05d}") for i, m in enumerate(mids))
    # Trainable classes are the first `trainable` MIDs; the shard's positives span the first `shard_classes`.
    (root / "oidv6-classes-trainable.txt").write_text("".join(m + "\n" for m in mids[: spec.trainable]))
    shard_cdf, all_cdf = _zipf(spec.shard_classes), _zipf(spec.trainable)
    files = {"train": "oidv6-train-annotations-human-imagelabels.csv",
             "validation": "validation-annotations-human-imagelabels.csv",
             "test": "test-annotations-human-imagelabels.csv"}
    linked: dict[str, list[str]] = {}
    for split, name in files.items():
        n_img = spec.images[split]
        if split == "train":
            ids = np.concatenate([_image_ids(rng, spec.shard, first="1"),
                                  _image_ids(rng, n_img - spec.shard, exclude="1")])
            order = np.argsort(ids)
            ids, in_shard = ids[order], (order < spec.shard)
        else:
            ids, in_shard = _image_ids(rng, n_img), np.zeros(n_img, dtype=bool)
        n_pos = _lognormal_counts(rng, ASSUMED["openimages_positive_mean"], ASSUMED["openimages_positive_sigma"],
                                  n_img, 1, spec.max_positive)
        positives = [_distinct(rng, shard_cdf if s else all_cdf, int(k)) for s, k in zip(in_shard, n_pos, strict=True)]
        if split == "train":  # every shard class on some shard image; one image at the most labels (k = 45)
            shard_rows = np.flatnonzero(in_shard)
            positives[shard_rows[0]] = list(range(spec.max_positive))
            for j, c in enumerate(sorted(set(range(spec.shard_classes)) - {c for i in shard_rows
                                                                             for c in positives[i]})):
                positives[shard_rows[1 + j % (len(shard_rows) - 1)]].append(c)
        n_positive = np.array([len(p) for p in positives])
        extra = rng.poisson(max(spec.rows[split] / n_img - n_positive.mean(), 0.0), n_img)
        rows = _exact_counts(rng, n_positive + extra, spec.rows[split], floor=n_positive)
        with open(root / name, "w", newline="") as fh:
            fh.write("ImageID,Source,LabelName,Confidence\n")
            buffer: list[str] = []
            for line in _label_rows(rng, ids, rows, positives, spec.trainable, mids):
                buffer.append(line)
                if len(buffer) >= 100_000:
                    fh.write("".join(buffer))
                    buffer.clear()
            fh.write("".join(buffer))
        keep = {"train": spec.shard, "validation": spec.dev_size, "test": spec.test_size}[split]
        linked[split] = (ids[in_shard] if split == "train" else ids[:keep]).tolist()
    _link_images(root / "images", [i for ids in linked.values() for i in ids], rng)
    return {split: len(ids) for split, ids in linked.items()}


def _link_images(images: Path, ids: list[str], rng) -> None:
    """``images/<ImageID>.jpg`` for each ID: hard links to :data:`DISTINCT_JPEGS` small synthetic JPEGs."""
    from PIL import Image

    pool = images.parent / ".jpeg_pool"
    pool.mkdir(parents=True, exist_ok=True)
    images.mkdir(parents=True, exist_ok=True)
    sources = []
    for k in range(DISTINCT_JPEGS):
        path = pool / f"{k:03d}.jpg"
        if not path.exists():
            base = rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)
            Image.fromarray(base).resize((128, 128), Image.BILINEAR).save(path, quality=85)
        sources.append(path)
    for i, image in enumerate(ids):
        dest = images / f"{image}.jpg"
        if not dest.exists():
            os.link(sources[i % DISTINCT_JPEGS], dest)


# ----------------------------------------------------------------------------------------------- encoders


PUBMEDBERT = {  # config.json of microsoft/BiomedNLP-BiomedBERT-base-uncased-abstract on the hub (BERT base)
    "vocab_size": 30_522, "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
    "intermediate_size": 3072, "max_position_embeddings": 512, "type_vocab_size": 2, "pad_token_id": 0,
    "hidden_act": "gelu", "layer_norm_eps": 1e-12, "architectures": ["BertForMaskedLM"]}


def write_pubmedbert(directory: Path, words: list[str], seed: int = 0, shape: dict | None = None) -> None:
    """A PubMedBERT replica: the hub's config (:data:`PUBMEDBERT`, or ``shape``), a WordPiece vocabulary holding
    ``words`` (and every character, so any text tokenizes) and BertForMaskedLM's tensors, seeded random."""
    import torch
    from transformers import BertConfig, BertForMaskedLM

    shape = shape or PUBMEDBERT
    directory.mkdir(parents=True, exist_ok=True)
    size = shape["vocab_size"]
    chars = [chr(c) for c in range(33, 127)] + list("éèàöüñç")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *chars, *("##" + c for c in chars)]
    seen = set(vocab)
    vocab += [w for w in words if w not in seen][: size - len(vocab)]
    vocab += [f"##{i}" for i in range(size - len(vocab))]
    (directory / "vocab.txt").write_text("".join(t + "\n" for t in vocab))
    config = BertConfig(**shape)
    torch.manual_seed(seed)
    BertForMaskedLM(config).save_pretrained(directory)


def write_tresnet(path: Path, classes: int = 9_605, seed: int = 0, name: str = "tresnet_l",
                  arch: dict | None = None) -> None:
    """ASL's OpenImages TResNet-L replica: timm's ``name`` (built with ``arch``, its constructor's keyword
    arguments) with a ``classes``-way head, seeded random, saved as ``{"model": state_dict}`` (needs the
    ``images`` extra)."""
    import timm
    import torch

    torch.manual_seed(seed)
    model = timm.create_model(name, pretrained=False, num_classes=classes, **(arch or {}))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    torch.save({"model": model.state_dict()}, tmp)
    os.replace(tmp, path)


# ----------------------------------------------------------------------------------------------- command


def bert_words(bioasq: BioASQ = BioASQ()) -> list[str]:
    """The words of the BioASQ stand-in, most frequent first (the replica's vocabulary)."""
    return _words(bioasq.types).tolist()


def write_all(out: Path, encoders: list[dict], *, seed: int = 0, tresnet: bool = False, mimic: Mimic3 = Mimic3(),
              bio: BioASQ = BioASQ(), oi: OpenImages = OpenImages()) -> dict[str, object]:
    """Every stand-in under ``out`` (``data/rehearsal``) at the given sizes (default: true), each dataset written
    once, with the ``manifest.json`` a download would leave written last (a rerun skips what is complete); then
    the replicas of ``encoders`` (configs as dicts) that live under ``out`` and are missing: Hugging Face ones as
    PubMedBERT's shape with their ``arch``, timm ones (``tresnet``) as their model with their ``arch``."""
    from argmaxable.fetch import MANIFEST, write_manifest

    done: dict[str, object] = {}
    for name, write, spec in (("mimic3", write_mimic3, mimic), ("bioasq", write_bioasq, bio),
                              ("openimages", write_openimages, oi)):
        root = out / name
        if not (root / MANIFEST).exists():
            print(f"writing the {name} stand-in into {root}", file=sys.stderr)
            done[name] = write(root, spec, seed)
            write_manifest(root, dataset=name, sources={"stand-in": "argmaxable.multilabel.standins"}, seed=seed)
    for enc in encoders:
        arch = dict(enc.get("arch") or {})
        if enc["kind"] == "hf" and is_under(out, enc["pretrained"]):
            bert = Path(enc["pretrained"])
            if not (bert / "model.safetensors").exists():
                write_pubmedbert(bert, bert_words(bio), seed, shape={**PUBMEDBERT, **arch})
                done[str(bert)] = "PubMedBERT replica"
        elif enc["kind"] == "timm" and tresnet and is_under(out, enc["checkpoint"]):
            ckpt = Path(enc["checkpoint"])
            if not ckpt.exists():
                write_tresnet(ckpt, oi.trainable, seed, enc["pretrained"], arch)
                done[str(ckpt)] = f"{enc['pretrained']} replica"
    return done


def is_under(root: Path, path: str) -> bool:
    """Whether ``path`` (a config value, maybe a hub name) lies under ``root``: only those are the stand-ins'."""
    return bool(path) and Path(path).resolve().is_relative_to(root.resolve())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m argmaxable.multilabel.standins", description=__doc__.split(
        "\n\n")[0])
    parser.add_argument("out", type=Path, help="where to write (the rehearsal's data_dir: data/rehearsal)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tresnet", action="store_true", help="also the TResNet replicas (needs timm)")
    parser.add_argument("--encoders", type=json.loads, default=[],
                        help="the composed config's encoders (multilabel.runs.*.encoder) as a JSON list; those "
                             "under OUT are written (scripts/rehearse_multilabel.sh passes experiment=rehearsal's)")
    parser.add_argument("--clean", action="store_true", help="remove OUT first")
    args = parser.parse_args(argv)
    if args.clean and args.out.exists():
        shutil.rmtree(args.out)
    print(json.dumps(write_all(args.out, args.encoders, seed=args.seed, tresnet=args.tresnet)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
