"""The paper's target-script filter (ACL 2022 §4.2) on real vocabulary entries of each script, and the readers of
each released vocabulary format (vocab.json, vocab.txt, tokenizer.json, FSMT's vocab-tgt.json, Marian YAML)."""

from __future__ import annotations

import json

import pytest

from argmaxable.detect.vocab import in_script, read_vocab, script_classes, strip_markers
from argmaxable.detect.weights import WeightsError

# Entries of the OPUS-MT (SentencePiece '▁'), FAIR WMT'19 (BPE '</w>') and subword-nmt ('@@') vocabularies.
KEPT = {
    "GREEK": ["▁του", "▁και", "ματα", "ή", "▁Ευρώπη", "ἀὐῆ"],
    "CYRILLIC": ["▁Предварительны", "ния", "▁в", "привет</w>", "при@@", "Ё"],
    "HEBREW": ["▁של", "▁את", "ים", "בְּ"],  # with a point: HEBREW POINT SHEVA is a mark of the script
    "ARABIC": ["▁في", "ال", "▁من", "ة", "مُ"],
    "LATIN": ["▁erecti", "▁the", "ing</w>", "th@@", "é", "▁Straße"],
}
DROPPED = {
    "GREEK": ["▁the", "▁Ελλάδα2", "▁αβc", "▁", "▁,", "ματα.", "▁в"],
    "CYRILLIC": ["▁1990", "▁–", "▁Москва)", "▁ε", "</w>"],
    "HEBREW": ["▁١٢", "▁של!", "▁في"],
    "ARABIC": ["١٢", "▁٣", "،", "▁of", "▁של"],  # Arabic-Indic digits and the Arabic comma are not letters
    "LATIN": ["▁1", "▁'", "▁ſ̈", "▁Ελ", "▁dž5"],
}
SPECIALS = ["<unk>", "</s>", "<pad>", "<s>", "[UNK]", "[CLS]", "<|endoftext|>"]


@pytest.mark.parametrize("script", list(KEPT))
def test_target_script_filter_on_real_entries(script):
    for token in KEPT[script] + SPECIALS:
        assert in_script(token, script), (token, script)
    for token in DROPPED[script]:
        assert not in_script(token, script), (token, script)


def test_markers_and_indices():
    assert strip_markers("▁Предварительны") == "Предварительны"
    assert strip_markers("th@@") == "th" and strip_markers("ing</w>") == "ing"
    tokens = ["<pad>", "▁του", "▁the", "", "ματα", "▁1990"]
    assert script_classes(tokens, "greek").tolist() == [0, 1, 4]


def test_vocabulary_readers(tmp_path):
    (tmp_path / "bert").mkdir()
    (tmp_path / "bert" / "vocab.txt").write_text("[PAD]\n[UNK]\nthe\n##ing\n", encoding="utf-8")
    assert read_vocab(tmp_path / "bert", 5)[0] == ["[PAD]", "[UNK]", "the", "##ing", ""]

    marian = tmp_path / "marian"
    marian.mkdir()
    (marian / "vocab.json").write_text(json.dumps({"</s>": 0, "▁του": 1, "▁في": 2, "<pad>": 3}), encoding="utf-8")
    tokens, files = read_vocab(marian, 4)
    assert tokens == ["</s>", "▁του", "▁في", "<pad>"] and files == [marian / "vocab.json"]
    (marian / "target_vocab.json").write_text(json.dumps({"</s>": 0, "▁και": 1}), encoding="utf-8")
    assert read_vocab(marian, 2)[0] == ["</s>", "▁και"]  # separate vocabularies: the output side's

    fsmt = tmp_path / "fsmt"
    fsmt.mkdir()
    (fsmt / "vocab-src.json").write_text(json.dumps({"the</w>": 0}), encoding="utf-8")
    (fsmt / "vocab-tgt.json").write_text(json.dumps({"<s>": 0, "в</w>": 1, "при@@": 2}), encoding="utf-8")
    assert read_vocab(fsmt, 3)[0] == ["<s>", "в</w>", "при@@"]

    xlmr = tmp_path / "xlmr"
    xlmr.mkdir()
    tok = {"model": {"type": "Unigram", "vocab": [["<s>", 0.0], ["▁the", -3.1], ["▁του", -9.2]]},
           "added_tokens": [{"id": 3, "content": "<mask>"}]}
    (xlmr / "tokenizer.json").write_text(json.dumps(tok), encoding="utf-8")
    assert read_vocab(xlmr, 4)[0] == ["<s>", "▁the", "▁του", "<mask>"]

    gpt2 = tmp_path / "gpt2"
    gpt2.mkdir()
    (gpt2 / "vocab.json").write_text(json.dumps({"!": 0, "Ġthe": 1}), encoding="utf-8")
    (gpt2 / "added_tokens.json").write_text(json.dumps({"<|endoftext|>": 2}), encoding="utf-8")
    assert read_vocab(gpt2, 3)[0] == ["!", "Ġthe", "<|endoftext|>"]

    listed = tmp_path / "tokens.json"  # a trained head's tokens in row order, duplicates kept
    listed.write_text(json.dumps(["the", "of", "the"]), encoding="utf-8")
    assert read_vocab(listed, 3)[0] == ["the", "of", "the"]

    yml = tmp_path / "vocab.deen.yml"
    yml.write_text('"</s>": 0\n"<unk>": 1\n"▁Haus": 2\n', encoding="utf-8")
    assert read_vocab(yml, 3)[0] == ["</s>", "<unk>", "▁Haus"]
    assert read_vocab(tmp_path / "bert" / "..", 3) == (None, [])  # no vocabulary in a directory: no tokens
    with pytest.raises(WeightsError, match=r"SentencePiece \.spm models are not read"):
        (tmp_path / "vocab.spm").write_bytes(b"\x00")
        read_vocab(tmp_path / "vocab.spm", 3)
    with pytest.raises(WeightsError, match="does not exist"):
        read_vocab(tmp_path / "missing.json", 3)


@pytest.mark.parametrize(("name", "text"), [
    ("vocab.json", '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}"),  # json's decoder recursed past its limit
    ("tokenizer.json", '{"model": {"vocab": {"a": 0}}, "added_tokens": [{"id": 1}]}'),  # no "content"
    ("tokenizer.json", '{"model": {"vocab": [[["a"], 0.0]]}}'),  # a piece that is no text
    ("vocab.yml", "a: [1, 2]\n"),  # an id that is no integer
    ("vocab.yml", "a: 0\n  b: : [\n"),  # not YAML
])
def test_a_vocabulary_that_is_not_one_is_one_line(tmp_path, name, text):
    (tmp_path / name).write_text(text)
    with pytest.raises(WeightsError, match=rf"{name}' is not a vocabulary") as err:
        read_vocab(tmp_path / name, 2)
    assert "\n" not in str(err.value)
