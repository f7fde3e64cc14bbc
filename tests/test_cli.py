"""The command line: results against oracles (002 Fig. 1's toy, Cover's count), files written by suffix, and
one-line errors with exit status 2 for user mistakes."""

from __future__ import annotations

import itertools
import math
import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from argmaxable import __version__
from argmaxable.cli import main

TOY = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0], [0.1, 0.1]])  # 002 Fig. 1: c4 lies inside the triangle


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


def test_check_softmax_toy(toy, tmp_path, capsys):
    assert main(["check", "softmax", str(toy), "--out", str(tmp_path / "out.csv"), "--workers", "1"]) == 0
    out = capsys.readouterr().out
    assert "3 argmaxable, 1 unargmaxable, 0 undecided" in out
    assert "unargmaxable: 3" in out
    table = pd.read_csv(tmp_path / "out.csv")
    assert table["status"].tolist() == ["argmaxable"] * 3 + ["unargmaxable"]
    assert (tmp_path / "out.csv.meta.json").is_file()


def test_check_softmax_bias_makes_every_class_argmaxable(tmp_path, capsys):
    """b_i = -||w_i||^2 / 2 makes every class argmaxable (002 appendix, prevention)."""
    path = tmp_path / "layer.pt"
    import torch

    W = torch.from_numpy(TOY)
    torch.save({"weight": W, "bias": -(W**2).sum(1) / 2}, path)
    assert main(["check", "softmax", str(path), "--out", str(tmp_path / "o.parquet")]) == 0
    assert "4 argmaxable, 0 unargmaxable" in capsys.readouterr().out
    assert (pd.read_parquet(tmp_path / "o.parquet")["status"] == "argmaxable").all()
    assert main(["check", "softmax", str(path), "--no-bias"]) == 0
    assert "unargmaxable: 3" in capsys.readouterr().out


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
    assert "cannot read" in capsys.readouterr().err
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
    assert capsys.readouterr().out.startswith(f"{tmp_path}: 30 x 4 weights, no bias")
    assert main(["check", "softmax", str(tmp_path), "--weight-key", "wte"]) == 2
