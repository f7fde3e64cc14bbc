"""The command line: results against oracles (ACL 2022 Fig. 1's toy, Cover's count), files written by suffix, and
one-line errors with exit status 2 for user mistakes."""

from __future__ import annotations

import itertools
import math
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from argmaxable import __version__
from argmaxable.cli import main

TOY = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0], [0.1, 0.1]])  # ACL 2022 Fig. 1: c4 lies inside the triangle


@pytest.fixture
def toy(tmp_path):
    path = tmp_path / "toy.npz"
    np.savez(path, W=TOY)
    return path


def test_version_and_help_through_the_entry_point():
    out = subprocess.run([sys.executable, "-m", "argmaxable.cli", "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == f"argmaxable {__version__}"
    out = subprocess.run([sys.executable, "-m", "argmaxable.cli", "check", "softmax", "--help"],
                         capture_output=True, text=True)
    assert out.returncode == 0 and "--weight-key" in out.stdout and "--out" in out.stdout


def test_package_version_is_the_project_version():
    pyproject = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
    assert __version__ == pyproject["project"]["version"]


def test_check_softmax_toy(toy, tmp_path, capsys):
    assert main(["check", "softmax", str(toy), "--out", str(tmp_path / "out.csv"), "--workers", "1"]) == 0
    out = capsys.readouterr().out
    assert "3 argmaxable, 1 unargmaxable, 0 undecided" in out
    assert "unargmaxable tokens: 3\n" in out and "never emitted by greedy decoding, 1: 3\n" in out
    table = pd.read_csv(tmp_path / "out.csv")
    assert table["status"].tolist() == ["argmaxable"] * 3 + ["unargmaxable"]
    assert (tmp_path / "out.csv.meta.json").is_file()


def test_check_softmax_bias_makes_every_class_argmaxable(tmp_path, capsys):
    """b_i = -||w_i||^2 / 2 makes every class argmaxable (ACL 2022 appendix, prevention)."""
    path = tmp_path / "layer.pt"
    import torch

    W = torch.from_numpy(TOY)
    torch.save({"weight": W, "bias": -(W**2).sum(1) / 2}, path)
    assert main(["check", "softmax", str(path), "--out", str(tmp_path / "o.parquet")]) == 0
    assert "4 argmaxable, 0 unargmaxable" in capsys.readouterr().out
    assert (pd.read_parquet(tmp_path / "o.parquet")["status"] == "argmaxable").all()
    assert main(["check", "softmax", str(path), "--no-bias"]) == 0
    assert "unargmaxable tokens: 3\n" in capsys.readouterr().out


def test_check_assignments_cover_count(tmp_path, capsys):
    """Cover (thesis Thm 5.1): n = 6 rows in general position in d = 2 give 2 * (C(5,0) + C(5,1)) = 12
    argmaxable assignments out of 2^6."""
    W = np.random.default_rng(0).normal(size=(6, 2))
    np.save(tmp_path / "W.npy", W)
    Y = np.array(list(itertools.product([False, True], repeat=6)))
    np.save(tmp_path / "Y.npy", Y)
    assert main(["check", "assignments", str(tmp_path / "W.npy"), str(tmp_path / "Y.npy"),
                 "--out", str(tmp_path / "a.csv")]) == 0
    expected = 2 * (math.comb(5, 0) + math.comb(5, 1))
    assert f"64 assignments checked: {expected} argmaxable" in capsys.readouterr().out
    assert (pd.read_csv(tmp_path / "a.csv")["status"] == "argmaxable").sum() == expected


def test_check_assignments_text_labels(toy, tmp_path, capsys):
    # x with x1, x2 > 0 switches labels 0, 1, 3 on and 2 off; label 0 alone needs x1 + x2 > 0 and < 0.
    (tmp_path / "labels.txt").write_text("# active labels per line\n0 1 3\n0\n")
    assert main(["check", "assignments", str(toy), str(tmp_path / "labels.txt")]) == 0
    out = capsys.readouterr().out
    assert "2 assignments checked: 1 argmaxable, 1 unargmaxable" in out and "unargmaxable: 1" in out


@pytest.mark.parametrize(("argv", "message"), [
    (["--weight-key", "nope"], "no weight key 'nope' in .* keys found: W"),
    (["--bound", "-1"], "'bound' parameter must be a positive number"),
    (["--solver", "cplex"], "'solver' parameter must be one of"),
    (["--out", "x.json"], r"--out must end in .parquet or .csv"),
])
def test_user_errors_are_one_line(toy, capsys, argv, message):
    assert main(["check", "softmax", str(toy), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("argmaxable: error: ") and err.count("\n") == 1
    assert re.search(message, err)


def test_file_errors(tmp_path, capsys):
    (tmp_path / "bad.npz").write_bytes(b"junk")
    assert main(["check", "softmax", str(tmp_path / "bad.npz")]) == 2
    assert "bad.npz': unreadable zip directory (File is not a zip file)" in capsys.readouterr().err
    assert main(["check", "softmax", str(tmp_path / "absent.safetensors")]) == 2
    assert "does not exist" in capsys.readouterr().err
    np.save(tmp_path / "W.npy", TOY)
    (tmp_path / "labels.txt").write_text("0 x\n")
    assert main(["check", "assignments", str(tmp_path / "W.npy"), str(tmp_path / "labels.txt")]) == 2
    assert "labels.txt:1: expected label indices" in capsys.readouterr().err


def test_no_traceback_from_the_console_script(tmp_path):
    out = subprocess.run([sys.executable, "-m", "argmaxable.cli", "check", "softmax", str(tmp_path / "x.npz")],
                         capture_output=True, text=True)
    assert out.returncode == 2 and "Traceback" not in out.stderr and "does not exist" in out.stderr


def test_config_show(capsys):
    assert main(["config", "show", "detect.bound=5"]) == 0
    out = capsys.readouterr().out
    assert "bound: 5.0" in out and "experiment: offline" in out
    assert main(["config", "show", "detect.nope=1"]) == 2
    assert "argmaxable: error:" in capsys.readouterr().err


def test_check_softmax_huggingface_directory(tmp_path, capsys):
    """A save_pretrained directory is read through its logits layer: GPT-2's tied wte, no bias."""
    import transformers

    config = transformers.GPT2Config(vocab_size=30, n_embd=4, n_layer=1, n_head=2, n_positions=8,
                                     bos_token_id=0, eos_token_id=0)
    transformers.GPT2LMHeadModel(config).save_pretrained(tmp_path)
    assert main(["check", "softmax", str(tmp_path)]) == 0
    assert capsys.readouterr().out.startswith(f"head: huggingface:{tmp_path}\n{tmp_path}: 30 x 4 weights, no bias")
    assert main(["check", "softmax", str(tmp_path), "--weight-key", "wte"]) == 2


# Hostile files are one line; the table and its evidence are one unit, checked together.


def _npz_bytes(**arrays) -> bytes:
    import io

    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def _hostile_npz(kind: str) -> bytes:
    """A .npz cut short, empty, with a flipped data byte (CRC), or whose member declares a huge shape."""
    import io
    import struct
    import zipfile

    data = _npz_bytes(W=TOY)
    if kind == "truncated":
        return data[: len(data) // 2]
    if kind == "empty":
        return b""
    if kind == "crc":
        flipped = bytearray(data)
        flipped[data.index(b"\x93NUMPY") + 130] ^= 0xFF  # inside W's values
        return bytes(flipped)
    header = "{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000000, 1000000), }"
    header = header.ljust(117) + "\n"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("W.npy", b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + b"\0" * 64)
    return buf.getvalue()


@pytest.mark.parametrize("kind", ["truncated", "empty", "crc", "huge"])
def test_hostile_npz_files_are_one_line(tmp_path, capsys, kind):
    weights = tmp_path / "w.npz"
    weights.write_bytes(_hostile_npz(kind))
    out = tmp_path / "t.csv"
    assert main(["check", "softmax", str(weights), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    expected = {"truncated": "unreadable zip directory", "empty": "unreadable zip directory",
                "crc": "tensor 'W' fails its zip CRC-32 check",
                "huge": "member W.npy is not one array of its declared shape"}[kind]
    assert err.startswith("argmaxable: error: ") and err.count("\n") == 1 and f"w.npz': {expected}" in err, err
    assert list(tmp_path.iterdir()) == [weights]  # nothing written
    np.savez(weights, W=TOY)
    evidence = tmp_path / "e.evidence.npz"
    evidence.write_bytes(_hostile_npz(kind))
    assert main(["verify", str(evidence), str(weights)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("argmaxable: error: ") and err.count("\n") == 1 and "not a" in err


def test_other_hostile_inputs_are_one_line(toy, tmp_path, capsys):
    import json

    import transformers

    (tmp_path / "labels.txt").write_text(f"0 1\n{2**64}\n")
    assert main(["check", "assignments", str(toy), str(tmp_path / "labels.txt")]) == 2
    assert "label indices outside [0, 4): [18446744073709551616]" in capsys.readouterr().err
    assert main(["check", "softmax", str(toy), "--out", str(tmp_path / "t.csv"), "--workers", "1"]) == 0
    capsys.readouterr()
    evidence = tmp_path / "t.csv.evidence.npz"
    with np.load(evidence) as z:
        fields = {k: z[k] for k in z.files}
    np.savez(evidence, **{**fields, "settings": json.dumps([1, 2])})
    assert main(["verify", str(evidence), str(toy)]) == 2
    assert "its settings are a JSON list, not an object" in capsys.readouterr().err
    hf = tmp_path / "hf"
    config = transformers.GPT2Config(vocab_size=8, n_embd=4, n_layer=1, n_head=2, n_positions=4, bos_token_id=0,
                                     eos_token_id=0)
    transformers.GPT2LMHeadModel(config).save_pretrained(hf)
    config = json.loads((hf / "config.json").read_text())
    (hf / "config.json").write_text(json.dumps({**config, "architectures": ["pipeline"]}))
    capsys.readouterr()  # save_pretrained's progress bar
    assert main(["check", "softmax", str(hf)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "architecture 'pipeline', which is not a transformers model class" in err


def test_an_out_name_too_long_for_its_evidence_fails_before_writing(toy, tmp_path, capsys):
    out = tmp_path / ("x" * 230 + ".csv")
    assert main(["check", "softmax", str(toy), "--out", str(out)]) == 2
    assert "--out name is too long" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == [toy]


def _outputs(tmp_path):
    return {p.name: p.read_bytes() for p in sorted(tmp_path.iterdir()) if p.name.startswith("t.csv")}


def test_an_interrupted_write_leaves_the_old_set(toy, tmp_path, monkeypatch, capsys):
    from argmaxable.core import CheckResult

    out = str(tmp_path / "t.csv")
    assert main(["check", "softmax", str(toy), "--out", out, "--workers", "1"]) == 0
    old = _outputs(tmp_path)
    assert set(old) == {"t.csv", "t.csv.meta.json", "t.csv.evidence.npz"}

    def interrupted(self, path, W=None):
        raise KeyboardInterrupt  # Ctrl-C once the table and its sidecar are staged

    monkeypatch.setattr(CheckResult, "write_npz", interrupted)
    assert main(["check", "softmax", str(toy), "--out", out, "--workers", "1", "--bound", "3"]) == 130
    assert _outputs(tmp_path) == old and len(list(tmp_path.iterdir())) == 4  # no staged file left


@pytest.fixture
def sigint_raises():
    """Ctrl-C raises KeyboardInterrupt, as in an interactive Python: a shell that starts the suite in the
    background starts it with SIGINT ignored (a non-interactive shell does so for a command started with `&`),
    and the signal would then never arrive."""
    import signal

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_a_signal_during_the_renames_waits_for_the_new_set(toy, tmp_path, monkeypatch, capsys, sigint_raises):
    import os
    import signal

    out = str(tmp_path / "t.csv")
    assert main(["check", "softmax", str(toy), "--out", out, "--workers", "1"]) == 0
    real = os.replace

    def replace_then_interrupt(src, dst):
        real(src, dst)
        os.kill(os.getpid(), signal.SIGINT)  # held back until every file is in place

    monkeypatch.setattr(os, "replace", replace_then_interrupt)
    assert main(["check", "softmax", str(toy), "--out", out, "--workers", "1", "--bound", "3"]) == 130
    monkeypatch.setattr(os, "replace", real)
    new = _outputs(tmp_path)
    assert set(new) == {"t.csv", "t.csv.meta.json", "t.csv.evidence.npz"}
    assert '"bound": 3.0' in new["t.csv.meta.json"].decode()
    assert main(["verify", out, str(toy), "--bound", "3"]) == 0  # the evidence is the new table's


def test_verify_compares_the_table_with_its_evidence(toy, tmp_path, capsys):
    out = tmp_path / "t.parquet"
    assert main(["check", "softmax", str(toy), "--out", str(out), "--activation", "relu", "--workers", "1"]) == 0
    capsys.readouterr()
    assert main(["verify", str(out), str(toy), "--activation", "relu"]) == 0
    text = capsys.readouterr().out
    assert "4 of 4 verdicts verified" in text and "lower 0" in text and "matches its evidence" in text
    assert main(["verify", str(out), str(toy), "--lower", "0"]) == 0
    assert main(["verify", str(out), str(toy)]) == 2  # not the recorded box: the default applies, and is refused
    assert "records lower=0.0 (each of 2) but lower=-100.0 (each of 2) applies (the default)" in \
        capsys.readouterr().err
    assert main(["verify", str(out), str(toy), "--lower", "-1"]) == 2  # not the recorded box
    capsys.readouterr()
    frame = pd.read_parquet(out)
    frame["status"] = "argmaxable"
    frame.to_parquet(out)
    assert main(["verify", str(out), str(toy), "--activation", "relu"]) == 1
    assert "does not match its evidence: column 'status' differs at 2 rows" in capsys.readouterr().out


def test_verify_fails_on_forged_or_empty_evidence(tmp_path, capsys):
    from argmaxable.core import CheckResult

    rng = np.random.default_rng(0)
    W = rng.normal(size=(300, 6))
    np.savez(tmp_path / "w.npz", W=W)
    out = tmp_path / "t.csv"
    assert main(["check", "softmax", str(tmp_path / "w.npz"), "--out", str(out), "--workers", "1"]) == 0
    evidence = tmp_path / "t.csv.evidence.npz"
    res = CheckResult.load(evidence, W=W)
    forged = CheckResult.load(evidence, W=W)
    forged.status[:] = "unargmaxable"
    forged.answers["eps"][:] = "no"
    forged.certificates = [(np.array([i for i in range(300) if i != t][:2]), np.array([9e307, 9e307]))
                           for t in range(300)]
    forged.save(evidence)
    assert main(["verify", str(evidence), str(tmp_path / "w.npz")]) == 1
    assert "evidence fails for" in capsys.readouterr().out
    res.status[:] = "undecided"
    res.answers["eps"][:] = "undecided"
    res.save(evidence)
    assert main(["verify", str(evidence), str(tmp_path / "w.npz")]) == 1
    assert "every item is undecided" in capsys.readouterr().out


def test_verify_checks_answers_and_radii(tmp_path, capsys):
    """A forged "yes" at radius > 1, a "no" without a certificate and an inflated radius are refused."""
    import copy

    import argmaxable as am

    rng = np.random.default_rng(0)
    W, b = rng.normal(size=(20, 2)), rng.normal(size=20)  # 20 lines in the plane: cells of every size near 0
    sets = [np.flatnonzero(W @ x + b > 0).tolist() for x in rng.normal(size=(12, 2)) * 2] + [list(range(20)), [0]]
    res = am.check_assignments(W, sets, b, workers=1)
    assert am.verify_certificate(res, W, b, items=sets).all()
    assert (res.status == "unargmaxable").any() and (res.answers["1"] == "yes").any()
    forged = copy.deepcopy(res)
    forged.answers["1"] = np.where(res.status == "unargmaxable", "yes", res.answers["1"])
    assert not am.verify_certificate(forged, W, b, items=sets)[res.status == "unargmaxable"].any()
    no = np.flatnonzero((res.status == "argmaxable") & (res.answers["1"] == "no"))
    assert no.size  # an argmaxable "not 1-argmaxable" answer carries the certificate that bounds its radius by 1
    forged = copy.deepcopy(res)
    forged.certificates[no[0]] = (np.zeros(0, dtype=np.int64), np.zeros(0))
    assert not am.verify_certificate(forged, W, b, items=sets)[no[0]]
    forged = copy.deepcopy(res)
    forged.radius = np.where(res.status == "argmaxable", res.radius * 10 + 1, res.radius)
    assert not am.verify_certificate(forged, W, b, items=sets)[res.status == "argmaxable"].any()


# Every column of a table is checked against its evidence and the model, or refused.

def _slab(tmp_path):
    """W = [[1, 0], [-1, 0], [0, 1]], b = [.1, .1, 0]: label sets {0, 1} live in the slab |x_1| < 0.1 (radius 0.1,
    so not 1-argmaxable)."""
    np.savez(tmp_path / "slab.npz", W=np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0]]), b=np.array([0.1, 0.1, 0.0]))
    (tmp_path / "labels.txt").write_text("0 1\n0 1 2\n0 1\n")
    return str(tmp_path / "slab.npz"), str(tmp_path / "labels.txt")


def test_a_forged_one_argmaxable_column_is_refused(tmp_path, capsys):
    """With the evidence's "1" answers deleted (or renamed to a threshold no check
    answers), a table saying "yes" used to verify, "answers and radii included"."""
    from argmaxable.core import CheckResult

    layer, labels = _slab(tmp_path)
    out = tmp_path / "t2.parquet"
    assert main(["check", "assignments", layer, labels, "--out", str(out)]) == 0
    assert main(["verify", str(out), layer, "--labels", labels]) == 0
    evidence = tmp_path / "t2.parquet.evidence.npz"
    honest = CheckResult.load(evidence)
    for answers in ({"eps": honest.answers["eps"]}, {"eps": honest.answers["eps"], "0.001": honest.answers["1"]}):
        forged = CheckResult.load(evidence)
        forged.answers = answers
        forged.save(evidence)
        frame = pd.read_parquet(out)
        frame["one_argmaxable"] = "yes"
        frame.to_parquet(out)
        capsys.readouterr()
        assert main(["verify", str(out), layer, "--labels", labels]) == 2
        captured = capsys.readouterr()
        assert "verdicts verified" not in captured.out
        assert captured.err.count("\n") == 1 and "answers radius > eps and radius > 1" in captured.err
    honest.save(evidence)
    assert main(["verify", str(out), layer, "--labels", labels]) == 1  # the table's "yes" against the evidence's "no"
    assert "column 'one_argmaxable' differs at 3 rows" in capsys.readouterr().out


def test_a_table_column_that_cannot_be_checked_is_refused(toy, tmp_path, capsys):
    out = tmp_path / "t.parquet"
    assert main(["check", "softmax", str(toy), "--out", str(out), "--workers", "1"]) == 0
    frame = pd.read_parquet(out)
    frame.insert(1, "token", ["a", "b", "c", "d"])
    frame.to_parquet(out)
    capsys.readouterr()
    assert main(["verify", str(out), str(toy)]) == 1
    assert "column 'token' cannot be checked against the evidence without the names" in capsys.readouterr().out
    frame = frame.drop(columns="token").assign(verified="yes")
    frame.to_parquet(out)
    assert main(["verify", str(out), str(toy)]) == 1
    assert "column 'verified' cannot be checked" in capsys.readouterr().out


def _named_layer(tmp_path, tokens):
    np.savez(tmp_path / "w.npz", W=np.random.default_rng(0).normal(size=(len(tokens), 2)))
    (tmp_path / "vocab.txt").write_text("\n".join(tokens) + "\n")
    return [str(tmp_path / "w.npz"), "--vocab", str(tmp_path / "vocab.txt")]


def test_verify_checks_the_token_names(tmp_path, capsys):
    """Tokens swapped between rows of a --out table used to match its evidence."""
    args = _named_layer(tmp_path, ["the", "of", "and", "to", "in", "is"])
    out = tmp_path / "t.csv"
    assert main(["check", "softmax", *args, "--out", str(out), "--workers", "1"]) == 0
    raw = pd.read_csv(out, keep_default_na=False)
    assert main(["verify", str(out), *args]) == 0
    capsys.readouterr()
    swapped = raw.copy()
    swapped.loc[[0, 2], "token"] = swapped.loc[[2, 0], "token"].to_numpy()
    swapped.to_csv(out, index=False)
    assert main(["verify", str(out), *args]) == 1
    assert "column 'token' differs at 2 rows" in capsys.readouterr().out
    raw.to_csv(out, index=False)
    assert main(["verify", str(out), str(tmp_path / "w.npz")]) == 1  # no names to check the column against
    assert "column 'token' cannot be checked" in capsys.readouterr().out


def test_a_vocabulary_of_another_length_is_refused(tmp_path, capsys):
    """A dictionary two tokens short (PP-OCRv4's leaves out the CTC blank and the space) named every
    row after the first wrongly; now one line, nothing written."""
    np.savez(tmp_path / "w.npz", W=np.random.default_rng(0).normal(size=(6, 2)))
    (tmp_path / "short.txt").write_text("a\nb\nc\nd\n")
    out = tmp_path / "t.csv"
    assert main(["check", "softmax", str(tmp_path / "w.npz"), "--vocab", str(tmp_path / "short.txt"),
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "names 4 tokens (ids 0..3) for the head's 6 rows" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["short.txt", "w.npz"]


def test_out_into_a_missing_directory_is_refused_before_the_check(toy, tmp_path, capsys, monkeypatch):
    import argmaxable as am

    def never(*args, **kwargs):
        raise AssertionError("the check ran")

    monkeypatch.setattr(am, "check_categories", never)
    assert main(["check", "softmax", str(toy), "--out", str(tmp_path / "missing" / "t.csv")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "directory" in err and "does not exist; create it first" in err
    assert not (tmp_path / "missing").exists()


def test_highs_banner_stays_off_stdout(tmp_path):
    np.savez(tmp_path / "w.npz", W=np.random.default_rng(0).normal(size=(300, 3)))  # needs the exact LP
    out = subprocess.run([sys.executable, "-m", "argmaxable.cli", "check", "softmax", str(tmp_path / "w.npz"),
                          "--workers", "1"], capture_output=True, text=True)
    assert out.returncode == 0 and "300 categories checked" in out.stdout
    assert "HiGHS" not in out.stdout


def test_csv_tokens_never_run_as_formulas_and_verify_reads_them_back(tmp_path, capsys):
    """A token such as =HYPERLINK(...) went into the CSV as it is, a formula to a spreadsheet."""
    tokens = ["the", '=HYPERLINK("http://x")', "-ing", "'s", "+1", "@sum"]
    args = _named_layer(tmp_path, tokens)
    out = tmp_path / "t.csv"
    assert main(["check", "softmax", *args, "--out", str(out), "--workers", "1"]) == 0
    raw = pd.read_csv(out, keep_default_na=False)
    assert raw["token"].tolist() == ["the", "'=HYPERLINK(\"http://x\")", "'-ing", "''s", "'+1", "'@sum"]
    capsys.readouterr()
    assert main(["verify", str(out), *args]) == 0 and "matches its evidence" in capsys.readouterr().out


# The check's summary, as a practitioner reads it: what the box is, what a verdict means for decoding, and every
# count traceable to a column of the table written.

TIED = np.vstack([TOY, TOY[:1], TOY[:1]])  # rows 4 and 5 equal row 0: a tie group whose merged row wins; 3 inside


@pytest.fixture
def tied(tmp_path):
    path = tmp_path / "tied.npz"
    np.savez(path, W=TIED)
    return path


def test_check_states_the_box_and_what_a_verdict_means_for_decoding(toy, capsys):
    assert main(["check", "softmax", str(toy), "--workers", "1", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "box: |x_j| <= 100 for each of the 2 inputs x_j of the layer; eps 1e-08: a token is argmaxable" in out
    assert "greedy decoding never emits it" in out and "sampling still can" in out
    assert main(["check", "softmax", str(toy), "--lower", "0", "--workers", "1", "--no-progress"]) == 0
    assert "box: 0 <= x_j <= 100 for each of the 2 inputs" in capsys.readouterr().out


def test_ties_greedy_decoding_emits_are_listed_apart_from_tokens_never_emitted(tied, capsys):
    assert main(["check", "softmax", str(tied), "--workers", "1", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "emitted by greedy decoding on a tie (first index wins; never the strict argmax), 1: 0\n" in out
    assert "never emitted by greedy decoding, 3: 3, 4, 5\n" in out


def test_every_count_of_the_summary_is_a_column_of_the_table(tied, tmp_path, capsys):
    out_path = tmp_path / "t.csv"
    assert main(["check", "softmax", str(tied), "--out", str(out_path), "--workers", "1", "--no-progress"]) == 0
    out = capsys.readouterr().out
    table = pd.read_csv(out_path, keep_default_na=False)
    status = table["status"].value_counts()
    assert f"{status['argmaxable']} argmaxable, {status['unargmaxable']} unargmaxable, 0 undecided" in out
    ties = table[table["kind"] == "tie"]
    inside = table[table["kind"].isin(["near-tie", "strictly inside"])]
    assert (f"{status['unargmaxable']} unargmaxable: {len(ties)} ties in {ties['tie_group'].nunique()} groups of equal "
            f"rows, {len(inside)} strictly inside the others' hull ({(table['kind'] == 'near-tie').sum()} of them "
            "near-ties)") in out
    assert (len(ties), ties["tie_group"].nunique(), len(inside)) == (3, 1, 1)
    emits = table.loc[table["greedy_decoding"] == "emits on a tie", "category"].tolist()
    never = table.loc[table["greedy_decoding"] == "never emits", "category"].tolist()
    assert (emits, never) == ([0], [3, 4, 5])
    assert f"on a tie (first index wins; never the strict argmax), {len(emits)}: 0" in out
    assert f"never emitted by greedy decoding, {len(never)}: 3, 4, 5" in out
    assert main(["verify", str(out_path), str(tied)]) == 0  # the new columns are checked against the evidence too


def test_radius_bounds_that_are_no_radius_are_empty_with_the_reason(tied, tmp_path, capsys):
    """A tie's certificate bounds its radius by -inf and a row inside the hull's by a negative number: neither is a
    radius. The table leaves them empty and says why; the evidence keeps the bounds."""
    layer, out_path = tmp_path / "biased.npz", tmp_path / "t.parquet"
    b = np.zeros(len(TIED))
    b[3] = -1.0  # row 3, inside the hull, loses by 1 at the origin: its region is empty by a margin
    np.savez(layer, W=TIED, b=b)
    assert main(["check", "softmax", str(layer), "--out", str(out_path), "--workers", "1", "--no-progress"]) == 0
    table = pd.read_parquet(out_path)
    evidence = am_load(out_path, TIED)
    upper = np.asarray(evidence.radius_upper)
    assert upper[3] < 0 and np.isneginf(upper[[4, 5]]).all()  # what the table used to show
    assert not (table["radius_upper"] < 0).any() and not np.isinf(table["radius_upper"]).any()
    notes = dict(zip(table["category"], table["radius_note"], strict=True))
    assert notes[4] == notes[5] == "no region: a row exactly equal to another's"
    assert notes[3] == "no region: the certificate bounds the radius below zero"
    assert [notes[i] != "" for i in range(len(TIED))] == (upper < 0).tolist()  # a note exactly where a bound is blank
    assert np.array_equal(table["radius_upper"].notna(), (upper >= 0))


def am_load(table, W):
    from argmaxable.cli import evidence_path
    from argmaxable.core import CheckResult

    return CheckResult.load(evidence_path(table), W=W)


def test_hardest_to_reach_is_stated_in_the_units_of_the_box(toy, capsys):
    assert main(["check", "softmax", str(toy), "--workers", "1", "--no-progress"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("hardest to reach by the "))
    radius = float(re.search(r"radius >= (\S+) \(column radius\)", line).group(1))
    res = __import__("argmaxable").check_categories(TOY, workers=1)
    assert radius == float(f"{np.nanmin(res.radius):.3g}")
    assert "in the units of x" in line and "far below the region's own radius" in line


def test_progress_names_each_step_on_stderr(toy, tmp_path, capsys):
    assert main(["check", "softmax", str(toy), "--out", str(tmp_path / "t.csv"), "--workers", "1", "--progress"]) == 0
    steps = [x for x in capsys.readouterr().err.replace("\r", "\n").splitlines() if x.startswith("argmaxable: ")]
    assert [s.split(" ")[1] for s in steps] == ["reading", "checking", "sorting", "writing"]
    assert steps[1] == "argmaxable: checking its 4 categories"


@pytest.mark.parametrize(("argv", "message"), [
    (["--bound", "-5"], "'bound' parameter must be a positive number"),
    (["--bound", "abc"], "argument --bound: invalid float value: 'abc'"),
    (["--eps", "-1"], "'eps' parameter"),
    (["--lower", "5", "--upper", "1"], "The box is empty or flat"),
])
def test_bad_values_are_refused_before_any_output(toy, capsys, argv, message):
    with pytest.raises(SystemExit) if "abc" in argv else _no_exit() as stop:
        assert main(["check", "softmax", str(toy), *argv]) == 2
    if stop is not None:
        assert stop.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and message in captured.err


def _no_exit():
    import contextlib

    return contextlib.nullcontext()


def test_a_vocab_given_with_a_gguf_is_refused_before_any_output(tmp_path, capsys):
    from test_detect_gguf import head_rows, write_gguf

    path = write_gguf(tmp_path / "m.gguf", head_rows(4), qtype="F32")
    (tmp_path / "vocab.txt").write_text("a\n")
    assert main(["check", "softmax", str(path), "--vocab", str(tmp_path / "vocab.txt")]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "names its" in captured.err and captured.err.count("\n") == 1


def test_the_highs_banner_is_silent_in_the_cli_and_the_python_api(tmp_path):
    np.savez(tmp_path / "w.npz", W=np.random.default_rng(0).normal(size=(300, 3)))  # needs the exact LP
    cli = subprocess.run([sys.executable, "-m", "argmaxable.cli", "check", "softmax", str(tmp_path / "w.npz"),
                          "--workers", "1", "--no-progress"], capture_output=True, text=True)
    api = subprocess.run([sys.executable, "-c", "import numpy as np, argmaxable as am; res = am.check_categories("
                          "np.random.default_rng(0).normal(size=(300, 3)), workers=1); print(res.counts())"],
                         capture_output=True, text=True)
    for run in (cli, api):
        assert run.returncode == 0 and "HiGHS" not in run.stdout + run.stderr, run.stderr
    assert "unargmaxable" in api.stdout
