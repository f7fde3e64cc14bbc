"""The rehearsal's stand-ins at tiny sizes, read by the same loaders as the real files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from argmaxable.multilabel import standins
from argmaxable.multilabel.datasets import build, load_built
from argmaxable.multilabel.datasets.bioasq import iter_articles
from argmaxable.multilabel.datasets.schema import DatasetConfig

MIMIC = standins.Mimic3(splits={"train": 60, "dev": 10, "test": 12}, codes=80, mean_tokens=40.0, mean_codes=4.0,
                        max_codes=12, types=300)
BIOASQ = standins.BioASQ(articles=400, headings=60, mean_headings=5.0, max_headings=9, types=300, journals=20)
ROOT = Path(__file__).resolve().parents[1]
OPENIMAGES = standins.OpenImages(rows={"train": 3000, "validation": 400, "test": 500},
                                 images={"train": 160, "validation": 40, "test": 50}, classes=90, trainable=50,
                                 shard=30, shard_classes=40, max_positive=12, dev_size=10, test_size=20)


def built(tmp_path, cfg: DatasetConfig):
    out = tmp_path / f"built_{cfg.name}"
    build(cfg, out, tmp_path)
    dsd, names = load_built(out)
    return dsd, names, json.loads((out / "stats.json").read_text())


def test_mimic3_standin_reads_as_caml_output(tmp_path):
    assert standins.write_mimic3(tmp_path / "mimic3", MIMIC) == MIMIC.splits
    header = (tmp_path / "mimic3" / "train_full.csv").read_text().splitlines()[0]
    assert header == "SUBJECT_ID,HADM_ID,TEXT,LABELS,length"
    dsd, names, stats = built(tmp_path, DatasetConfig(name="mimic3"))
    assert stats["split_sizes"] == MIMIC.splits and stats["n_labels"] == MIMIC.codes  # every code on some note
    assert stats["k"] == MIMIC.max_codes  # a training note at the bound (thesis: k = 80)
    assert names[0] == "401.9"  # CAML's most frequent code leads the Zipf ranking
    lengths = [len(t.split()) for t in dsd["train"]["text"]]
    assert lengths == sorted(lengths)  # CAML sorts each split by length
    assert all(t == t.lower() and not any(w.isnumeric() for w in t.split()) for t in dsd["test"]["text"])


def test_bioasq_standin_streams_in_the_real_framing(tmp_path):
    standins.write_bioasq(tmp_path / "bioasq", BIOASQ)
    path = tmp_path / "bioasq" / "allMeSH_2021.json"
    raw = path.read_bytes()
    assert raw.startswith(b'{"articles":[\n') and raw.endswith(b"]}\n")
    raw.decode("latin-1")
    with pytest.raises(UnicodeDecodeError):
        raw.decode("utf-8")  # latin-1 bytes beyond ASCII, as in the real file
    articles = list(iter_articles(path))
    assert len(articles) == BIOASQ.articles
    assert list(articles[0]) == ["journal", "meshMajor", "year", "abstractText", "pmid", "title"]
    assert max(len(a["meshMajor"]) for a in articles) == BIOASQ.max_headings
    cfg = DatasetConfig(name="bioasq", max_records=BIOASQ.articles, num_labels=40, min_label_freq=5,
                        max_active_labels=8, train_size=200, dev_size=20, test_size=40, seed=0)
    dsd, _, stats = built(tmp_path, cfg)
    assert stats["n_labels"] == 40 and stats["k"] <= 8  # the most frequent headings; the k filter held
    assert {i for y in dsd["test"]["labels"] for i in y} == set(range(40))  # label-covering test split


def test_openimages_standin_builds_with_its_shard_and_true_row_counts(tmp_path):
    linked = standins.write_openimages(tmp_path / "openimages", OPENIMAGES)
    root = tmp_path / "openimages"
    for split, name in (("train", "oidv6-train-annotations-human-imagelabels.csv"),
                        ("validation", "validation-annotations-human-imagelabels.csv"),
                        ("test", "test-annotations-human-imagelabels.csv")):
        lines = (root / name).read_text().splitlines()
        assert lines[0] == "ImageID,Source,LabelName,Confidence" and len(lines) - 1 == OPENIMAGES.rows[split]
    assert len((root / "oidv6-class-descriptions.csv").read_text().splitlines()) == 1 + OPENIMAGES.classes
    cfg = DatasetConfig(name="openimages", train_id_prefix="1", dev_size=OPENIMAGES.dev_size,
                        test_size=OPENIMAGES.test_size)
    dsd, _, stats = built(tmp_path, cfg)
    assert stats["split_sizes"]["train"] == OPENIMAGES.shard == linked["train"]
    assert stats["n_labels"] == OPENIMAGES.shard_classes and stats["k"] == OPENIMAGES.max_positive
    assert all(i.startswith("1") for i in dsd["train"]["id"])
    jpegs = {p.stat().st_ino for p in (root / "images").iterdir()}
    assert len(list((root / "images").iterdir())) == sum(linked.values()) and len(jpegs) <= standins.DISTINCT_JPEGS


def test_pubmedbert_replica_loads_through_the_encoder_path(tmp_path):
    import torch

    from argmaxable.multilabel.encoders import build_encoder
    from argmaxable.multilabel.schema import EncoderConfig

    hub = standins.PUBMEDBERT  # the hub's config.json of microsoft/BiomedNLP-BiomedBERT-base-uncased-abstract
    assert (hub["vocab_size"], hub["hidden_size"], hub["num_hidden_layers"], hub["max_position_embeddings"]) == (
        30522, 768, 12, 512)
    words = standins.bert_words(BIOASQ)
    # A shrunk member of the family, as the rehearsal's config names it: written where the config points (under the
    # stand-ins' folder), at the shape its arch gives; an encoder named elsewhere (a hub name) is not written.
    arch = {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 64}
    replica = tmp_path / "models" / "pubmedbert"
    encoders = [{"kind": "hf", "pretrained": str(replica), "arch": arch},
                {"kind": "hf", "pretrained": "microsoft/BiomedNLP-BiomedBERT-base-uncased-abstract", "arch": {}}]
    for name in ("mimic3", "bioasq", "openimages"):  # the datasets already written: only the encoders are left to write
        (tmp_path / name).mkdir()
        (tmp_path / name / "manifest.json").write_text("{}")
    assert standins.write_all(tmp_path, encoders, bio=BIOASQ) == {str(replica): "PubMedBERT replica"}
    assert sorted(p.name for p in replica.iterdir()) == ["config.json", "model.safetensors", "vocab.txt"]
    config = json.loads((replica / "config.json").read_text())
    assert config["architectures"] == ["BertForMaskedLM"] and config["hidden_size"] == 32
    assert config["vocab_size"] == hub["vocab_size"] == len((replica / "vocab.txt").read_text().splitlines())
    enc = build_encoder(EncoderConfig(kind="hf", pretrained=str(replica), max_tokens=16, arch=arch)).eval()
    batch = enc.collate([{"text": " ".join(words[:5])}, {"text": "J Méd\nAbc."}])
    np.testing.assert_array_equal(batch["input_ids"][:, 0], [2, 2])  # [CLS]
    assert not (batch["input_ids"] == 1).any()  # no [UNK]: the stand-ins' words and characters are all known
    with torch.no_grad():
        assert enc(batch).shape == (2, 32)
    # The shape the config names is the one that runs: a model of another shape is refused in one line.
    with pytest.raises(ValueError, match=r"encoder\.arch\.hidden_size is 64 but the model in .* has 32") as err:
        build_encoder(EncoderConfig(kind="hf", pretrained=str(replica), arch={**arch, "hidden_size": 64}))
    assert "\n" not in str(err.value)


def test_tables_name_a_shrunk_encoder_with_its_shape():
    from argmaxable.multilabel.schema import encoder_label
    from argmaxable.multilabel.setup_tables import table_a_4

    bert = {"kind": "hf", "pretrained": "data/rehearsal/models/pubmedbert_replica",
            "arch": {"num_hidden_layers": 2, "hidden_size": 128}}
    assert encoder_label(bert) == "pubmedbert_replica, shrunk (num_hidden_layers 2, hidden_size 128)"
    assert encoder_label({"kind": "hf", "pretrained": "microsoft/BiomedNLP-BiomedBERT-base-uncased-abstract",
                          "arch": {}}) == "microsoft/BiomedNLP-BiomedBERT-base-uncased-abstract"
    assert encoder_label({"kind": "timm", "pretrained": "tresnet_l", "arch": {"layers": [1, 1, 1, 1]}}) == (
        "tresnet_l, shrunk (layers [1, 1, 1, 1])")
    assert encoder_label({"kind": "cnn", "filters": 500}) == "CNN (CAML)"
    stats = {"bioasq": {"n_labels": 20000, "split_sizes": {"train": 1, "dev": 1, "test": 1}}}
    run = {"encoder": bert, "d": [50], "lr_encoder": 5e-5, "lr_classifier": 1e-3, "batch_size": 32, "patience": 10,
           "eval_every": 500, "criterion": "loss", "metric_k": 10}
    column = table_a_4(stats, {"bioasq": run}).set_index("attribute")["bioasq (ours)"]
    assert (column["encoder"], column["encoder dim e"]) == (encoder_label(bert), "128")


@pytest.mark.slow
def test_the_three_standins_give_the_paper_mode_tables_and_report(tmp_path):
    # Built, trained (tiny CNN, one step) and verified, the three stand-ins make the multi-label tables and the
    # report of the paper experiment, and of the rehearsal, which declares every item substitute data. A report
    # whose declaration reads a debtags column stops at Fig. 4.3 in paper mode.
    from argmaxable.config import load_config, to_plain
    from argmaxable.multilabel.aggregate import aggregate
    from argmaxable.multilabel.schema import VerifyConfig
    from argmaxable.multilabel.setup_tables import make_setup_tables
    from argmaxable.multilabel.train import train_run
    from argmaxable.multilabel.verify import verify_run
    from argmaxable.report import make_report

    data, results = tmp_path / "data", tmp_path / "results"
    standins.write_mimic3(data / "mimic3", MIMIC)
    standins.write_bioasq(data / "bioasq", BIOASQ)
    standins.write_openimages(data / "openimages", OPENIMAGES)
    cfgs = {"mimic3": DatasetConfig(name="mimic3"),
            "bioasq": DatasetConfig(name="bioasq", max_records=BIOASQ.articles, num_labels=40, min_label_freq=5,
                                    max_active_labels=8, train_size=200, dev_size=20, test_size=40),
            "openimages": DatasetConfig(name="openimages", train_id_prefix="1", dev_size=10, test_size=20)}
    run = {"encoder": {"kind": "cnn", "embed_dim": 4, "filters": 6, "width": 2, "vocab_min_count": 1},
           "d": [2], "k_active": 3, "metric_k": 3, "batch_size": 8, "max_steps": 1, "device": "cpu"}
    dirs = []
    for name, cfg in cfgs.items():
        build(cfg, results / "datasets" / name, data)
    for name in cfgs:
        # OpenImages' runs read BioASQ's texts: a tiny CNN stands in for TResNet-L (timm is not installed here)
        source = results / "datasets" / ("bioasq" if name == "openimages" else name)
        for head in ("bsl", "dft"):
            out = results / "multilabel" / name / head / "d2" / "seed0"
            train_run(source, out, head=head, d=2, seed=0, run=run)
            verify_run(source, out, out / "verify.parquet", verify=VerifyConfig(splits=["test"], encoder_splits=[]))
            dirs.append(out)
    aggregate(dirs, results / "multilabel/tables", results / "multilabel/figures")
    for experiment in ("paper", "rehearsal"):
        config = to_plain(load_config([f"experiment={experiment}"]))
        make_setup_tables({n: str(results / "datasets" / n) for n in cfgs}, config["multilabel"]["runs"],
                          {"table_4_1": str(results / "multilabel/tables/table_4_1.csv"),
                           "table_a_4": str(results / "multilabel/tables/table_A_4.csv")})
        items = make_report(ROOT / "workflow/report", results, results / "report.md", results / "report.html",
                            experiment=experiment, families=["datasets", "multilabel"], config=config)
        ours = [a for a in items if a.family in ("datasets", "multilabel")]
        assert len(ours) == 10 and not [a.item for a in ours if a.status in ("missing", "not run")]
        assert all(a.status == "substitute data" for a in ours) == (experiment == "rehearsal")
        assert "multilabel/tables/table_4_2.csv" in (results / "report.md").read_text()
