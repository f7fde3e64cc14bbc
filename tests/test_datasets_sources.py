"""Each dataset source on tiny fixtures written here in its real format: apt lists (debtags), CAML csv
(MIMIC-III), allMeSH json in latin-1 (BioASQ), image-level label csv (OpenImages v6)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from argmaxable.config import load_config
from argmaxable.multilabel.datasets import MissingDataError, build, debtags, load_built
from argmaxable.multilabel.datasets.schema import DatasetConfig


def built(tmp_path: Path, cfg: DatasetConfig, data_root: Path):
    """Build into tmp_path/out and return (splits, label names, stats) after checking the common contract."""
    out = tmp_path / "out"
    build(cfg, out, data_root)
    dsd, names = load_built(out)
    stats = json.loads((out / "stats.json").read_text())
    assert set(dsd) == {"train", "dev", "test"}
    assert stats["n_labels"] == len(names) == len(set(names))
    assert stats["split_sizes"] == {s: len(dsd[s]) for s in dsd}
    assert stats["k"] == max(len(y) for y in dsd["train"]["labels"])
    assert sum(stats["histogram_active"]["train"].values()) == len(dsd["train"])
    assert (out / "active_labels.png").is_file() and (out / "active_labels.pdf").is_file()
    inputs = json.loads((out / "active_labels.png.meta.json").read_text())["inputs"]
    assert list(inputs) == [str(out / "stats.json")]  # where the input lives, not the temporary build directory
    assert not list(tmp_path.glob(".out.*"))  # the temporary build directory is gone
    return dsd, names, stats


def labels_of(split) -> set[int]:
    return {i for y in split["labels"] for i in y}


def test_every_dataset_config_composes():
    for overrides in ([], ["experiment=paper"]):
        cfg = load_config(overrides)
        for name, ds in cfg.datasets.items():
            assert ds.name == name


# ----------------------------------------------------------------------------------------------- debtags

TAGS = {  # package -> debtags; every tag is on >= 2 packages except "x11::rare"
    "alpha": "interface::commandline, role::program, use::editing",
    "beta": "interface::commandline, role::program",
    "gamma": "role::shared-lib, devel::library",
    "delta": "role::shared-lib, devel::library, implemented-in::c",
    "eps": "role::program, use::editing, x11::rare",
    "zeta": "implemented-in::c, role::program",
    "eta": "interface::commandline, implemented-in::c",
    "theta": "devel::library, role::shared-lib",
    "iota": "use::editing, interface::commandline",
    "kappa": "role::program, implemented-in::c",
    "lambda": "role::program",
    "mu": "devel::library",
}


def write_apt_lists(root: Path) -> Path:
    """An InRelease, a Packages (with and without Tag, a folded Tag field) and a Translation-en."""
    lists = root / "lists"
    lists.mkdir()
    (lists / "mirror_debian_dists_testsuite_InRelease").write_text(
        "-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA256\n\nOrigin: Debian\nSuite: testing\n"
        "Codename: testsuite\nDate: Sat, 01 Jan 2000 00:00:00 UTC\nMD5Sum:\n 0 0 main/x\n"
    )
    packages, translations = [], []
    for i, (pkg, tags) in enumerate(TAGS.items()):
        tag_field = tags.replace(", ", ",\n ", 1) if i == 0 else tags  # folded continuation line
        packages.append(f"Package: {pkg}\nVersion: 1.0\nDescription: {pkg} short\nDescription-md5: md5{i}\n"
                        f"Tag: {tag_field}\nSection: misc\n")
        if pkg != "mu":  # mu keeps only its short description
            translations.append(f"Package: {pkg}\nDescription-md5: md5{i}\nDescription-en: {pkg} short\n"
                                f" First line of {pkg}.\n .\n Second paragraph.\n")
    packages.append("Package: untagged\nVersion: 1\nDescription: no tags\nDescription-md5: md5x\n")
    (lists / "mirror_debian_dists_testsuite_main_binary-amd64_Packages").write_text("\n".join(packages))
    (lists / "mirror_debian_dists_testsuite_main_i18n_Translation-en").write_text("\n".join(translations))
    # A later list with another record of "alpha": the first list (by file name) wins.
    (lists / "zz_debian_dists_other_main_binary-amd64_Packages").write_text(
        "Package: alpha\nVersion: 2.0\nDescription: other\nDescription-md5: other\nTag: role::other\n"
    )
    return lists


def test_debtags_from_apt_lists(tmp_path):
    df, info = debtags.read_apt_lists(write_apt_lists(tmp_path))
    assert df["package"].tolist() == sorted(TAGS)  # "untagged" is dropped
    row = df.set_index("package").loc["alpha"]
    assert row["tags"] == ["interface::commandline", "role::program", "use::editing"]
    assert row["text"] == "alpha\nalpha short\nFirst line of alpha.\n\nSecond paragraph."
    assert df.set_index("package").loc["mu", "text"] == "mu\nmu short"
    assert info["n_with_long_description"] == len(TAGS) - 1
    assert info["releases"][0]["Codename"] == "testsuite"
    assert len(info["lists"]) == 3 and all(len(h) == 64 for h in info["lists"].values())
    # Provenance names archive paths; the host ("mirror", "zz") apt put in front of each file name is dropped.
    assert sorted(info["lists"]) == ["debian/dists/other/main/binary-amd64/Packages",
                                     "debian/dists/testsuite/main/binary-amd64/Packages",
                                     "debian/dists/testsuite/main/i18n/Translation-en"]
    assert info["releases"][0]["file"] == "debian/dists/testsuite/InRelease"


def test_debtags_snapshot_roundtrip_and_covering_build(tmp_path, monkeypatch):
    monkeypatch.setattr(debtags, "SNAPSHOT_SIZES", {"test": 3, "dev": 2, "train": None})
    monkeypatch.setattr(debtags, "SNAPSHOT_MIN_FREQ", 2)
    lists = write_apt_lists(tmp_path)
    snap = tmp_path / "snap" / "debtags.parquet"
    debtags.make_snapshot(snap, lists)
    meta = json.loads(snap.with_suffix(".meta.json").read_text())
    counts = meta["split"]["counts"]
    assert counts["dev"] == 2 and counts["test"] >= 3 and sum(counts.values()) == len(TAGS)
    df = debtags.load_snapshot(snap)
    assert len(df) == len(TAGS) and set(df.columns) == {"package", "text", "tags", "split"}
    snap.write_bytes(snap.read_bytes() + b"\0")
    with pytest.raises(ValueError, match="sha256"):
        debtags.load_snapshot(snap)

    cfg = DatasetConfig(name="debtags", source="apt", path=str(lists), min_label_freq=2)
    dsd, names, stats = built(tmp_path, cfg, tmp_path)
    assert "x11::rare" not in names and len(names) == 6  # the tag on one package is dropped
    assert labels_of(dsd["test"]) == labels_of(dsd["train"]) == set(range(6))  # covering, both ways
    assert labels_of(dsd["dev"]) <= labels_of(dsd["train"])
    assert stats["split_sizes"] == counts


# ----------------------------------------------------------------------------------------------- MIMIC-III

CAML = {  # split -> rows (SUBJECT_ID, HADM_ID, TEXT, LABELS); 99.9 occurs only in test
    "train": [(1, 10, "chest pain", "401.9;428.0"), (2, 20, "fever", "038.9"), (3, 30, "cough", "401.9")],
    "dev": [(4, 40, "dyspnea", "428.0")],
    "test": [(5, 50, "sepsis", "038.9;99.9"), (6, 60, "none", "")],
}


def test_mimic3_caml_files(tmp_path):
    root = tmp_path / "mimic3"
    root.mkdir()
    for split, rows in CAML.items():
        lines = ["SUBJECT_ID,HADM_ID,TEXT,LABELS,length"]
        lines += [f'{s},{h},"{t}",{y},{len(t.split())}' for s, h, t, y in rows]
        (root / f"{split}_full.csv").write_text("\n".join(lines) + "\n")
    dsd, names, stats = built(tmp_path, DatasetConfig(name="mimic3"), tmp_path)
    assert sorted(names) == ["038.9", "401.9", "428.0", "99.9"]  # counted from the files: union of codes
    assert names[0] == "401.9"  # most frequent first
    assert dsd["train"][0]["id"] == "1_10" and dsd["train"][0]["text"] == "chest pain"
    assert [names[i] for i in dsd["test"][0]["labels"]] == ["038.9", "99.9"]
    assert stats["split_sizes"] == {"train": 3, "dev": 1, "test": 1}  # the note without codes is dropped
    assert stats["k"] == 2 and stats["labels_not_in_train"]["test"] == 1


def test_mimic3_missing_files_say_where_and_why(tmp_path):
    with pytest.raises(MissingDataError, match=r"PhysioNet.*train_full\.csv") as err:
        build(DatasetConfig(name="mimic3"), tmp_path / "out", tmp_path)
    assert str(tmp_path / "mimic3") in str(err.value)


# ----------------------------------------------------------------------------------------------- BioASQ


def write_allmesh(path: Path, articles: list[dict]) -> None:
    """allMeSH_2021.json layout: a header line, one article per line, latin-1."""
    lines = [json.dumps(a, ensure_ascii=False) for a in articles]
    text = '{"articles":[\n' + ",\n".join(lines) + "]}\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("latin-1"))


def test_bioasq_streams_latin1_and_covers(tmp_path):
    heads = ["Humans", "Mice", "Liver", "Brain", "Neoplasms"]
    articles = [
        {"journal": "J Méd", "title": f"Título {i}", "abstractText": f"Abstract {i}.", "pmid": str(1000 + i),
         "year": 2020, "meshMajor": [heads[i % 5], heads[(i + 1) % 5]]}
        for i in range(20)
    ]
    articles[3]["meshMajor"].append("Rare Heading")  # on one article only: below min_label_freq
    articles[4]["meshMajor"] = heads  # five headings: over max_active_labels
    articles.append({"journal": "J", "title": "late", "abstractText": "", "pmid": "9",
                     "meshMajor": ["Late Heading"] * 3})  # beyond max_records
    write_allmesh(tmp_path / "bioasq" / "allMeSH_2021.json", articles)
    cfg = DatasetConfig(name="bioasq", max_records=20, num_labels=4, min_label_freq=2, max_active_labels=3,
                        train_size=10, dev_size=2, test_size=4, seed=1)
    dsd, names, stats = built(tmp_path, cfg, tmp_path)
    assert len(names) == 4 and set(names) < set(heads)  # top 4 of the 5 headings (each on 8-9 articles)
    assert labels_of(dsd["train"]) == labels_of(dsd["test"]) == set(range(4))
    ids = {r["id"] for s in dsd.values() for r in s}
    assert "1004" not in ids and "9" not in ids
    assert stats["split_sizes"] == {"train": 10, "dev": 2, "test": 4}
    first = next(r for s in dsd.values() for r in s if r["id"] == "1000")
    assert first["text"] == "J Méd\nTítulo 0\nAbstract 0."


def test_bioasq_missing_file(tmp_path):
    with pytest.raises(MissingDataError, match=r"allMeSH_2021\.json"):
        build(DatasetConfig(name="bioasq", dev_size=1, test_size=1), tmp_path / "out", tmp_path)


# ----------------------------------------------------------------------------------------------- OpenImages


OPENIMAGES_IDS = ["1aa", "1bb", "1cc", "v1", "v2", "t1", "t2"]  # the images of the splits below


def write_openimages(tmp_path: Path) -> Path:
    """Label CSVs, the trainable class list and 8x8 JPEGs of every image the splits keep."""
    from PIL import Image

    root = tmp_path / "openimages"
    (root / "images").mkdir(parents=True)
    for image_id in OPENIMAGES_IDS:
        Image.new("RGB", (8, 8), (200, 10, 10)).save(root / "images" / f"{image_id}.jpg")
    (root / "oidv6-classes-trainable.txt").write_text("/m/a\n/m/b\n/m/c\n/m/d\n")
    header = "ImageID,Source,LabelName,Confidence\n"
    rows = {
        "oidv6-train-annotations-human-imagelabels.csv": [
            "1aa,verification,/m/a,1", "1aa,verification,/m/b,1", "1aa,verification,/m/c,0",
            "1bb,crowdsource-verification,/m/b,1", "1bb,verification,/m/x,1",  # /m/x is not trainable
            "1cc,verification,/m/c,1", "2zz,verification,/m/d,1",  # 2zz: not in the "1" shard
        ],
        "validation-annotations-human-imagelabels.csv": [
            "v1,verification,/m/a,1", "v2,verification,/m/d,1", "v2,verification,/m/b,1",
            "v3,verification,/m/a,1",  # beyond the first dev_size=2 images
        ],
        "test-annotations-human-imagelabels.csv": ["t1,verification,/m/c,1", "t2,verification,/m/d,1"],
    }
    for name, lines in rows.items():
        (root / name).write_text(header + "\n".join(lines) + "\n")
    return root


def test_openimages_label_csvs(tmp_path):
    root = write_openimages(tmp_path)
    cfg = DatasetConfig(name="openimages", train_id_prefix="1", dev_size=2, test_size=10)
    dsd, names, stats = built(tmp_path, cfg, tmp_path)
    assert sorted(names) == ["/m/a", "/m/b", "/m/c"]  # trainable, positive, seen in train; /m/d only elsewhere
    assert dsd["train"]["id"] == ["1aa", "1bb", "1cc"]
    assert [sorted(names[i] for i in y) for y in dsd["train"]["labels"]] == [["/m/a", "/m/b"], ["/m/b"], ["/m/c"]]
    assert dsd["dev"]["id"] == ["v1", "v2"] and dsd["test"]["id"] == ["t1"]  # t2 had only /m/d
    assert dsd["train"][0]["image_path"] == str(root / "images" / "1aa.jpg")
    assert stats["examples_dropped_without_labels"] == {"train": 0, "dev": 0, "test": 1}


def test_openimages_missing_images_stop_the_build_naming_them(tmp_path):
    root = write_openimages(tmp_path)
    for image_id in ("1bb", "t1"):
        (root / "images" / f"{image_id}.jpg").unlink()
    with pytest.raises(MissingDataError) as err:
        build(DatasetConfig(name="openimages", train_id_prefix="1", dev_size=2, test_size=10), tmp_path / "out",
              tmp_path)
    message = str(err.value)
    assert "2 of 7 images missing" in message and "1bb.jpg, t1.jpg" in message and "\n" not in message
    assert not (tmp_path / "out").exists()


def test_openimages_missing_files(tmp_path):
    with pytest.raises(MissingDataError, match=r"oidv6-classes-trainable\.txt"):
        build(DatasetConfig(name="openimages"), tmp_path / "out", tmp_path)


def test_a_missing_encoder_checkpoint_stops_the_build_naming_it_and_its_url(tmp_path):
    # The checkpoint a multi-label run of this dataset reads is one of the dataset's files: its absence stops the
    # build (hours before train_head would), in one line with where the download block fetches it from.
    write_openimages(tmp_path)
    ckpt = tmp_path / "openimages" / "Open_ImagesV6_TRresNet_L_448.pth"
    config = {"multilabel": {"enabled": True, "runs": {"openimages": {"encoder": {"checkpoint": str(ckpt)}}}},
              "datasets": {"openimages": {"download": {"files": {ckpt.name: "https://example.org/asl/x.pth"}}}}}
    cfg = DatasetConfig(name="openimages", train_id_prefix="1", dev_size=2, test_size=10)
    with pytest.raises(MissingDataError) as err:
        build(cfg, tmp_path / "out", tmp_path, config=config)
    message = str(err.value)
    assert str(ckpt) in message and "https://example.org/asl/x.pth" in message and "\n" not in message
    ckpt.write_bytes(b"weights")
    build(cfg, tmp_path / "out", tmp_path, config=config)
    assert (tmp_path / "out" / "labels.json").is_file()
