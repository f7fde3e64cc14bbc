"""The tool's own install: ``pip install .`` brings what ``argmaxable check / audit / verify`` and the Python API
import, keeps the torch it finds, and none of the pipeline's packages (those are the extra ``pipeline``)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~ \[;]", requirement, maxsplit=1)[0].lower()


def test_the_pipeline_packages_are_an_extra_and_torch_a_range():
    tool = {_name(r) for r in PROJECT["dependencies"]}
    pipeline = {_name(r) for r in PROJECT["optional-dependencies"]["pipeline"]}
    assert {"snakemake", "snakemake-executor-plugin-slurm", "hydra-core", "omegaconf", "datasets",
            "matplotlib"} <= pipeline
    assert not tool & (pipeline - {"torch"})
    torch = next(r for r in PROJECT["dependencies"] if _name(r) == "torch")
    assert "==" not in torch and ">=" in torch  # a range: a CUDA build already installed satisfies it
    assert "torch==" in " ".join(PROJECT["optional-dependencies"]["pipeline"])  # the pipeline keeps its exact pin
    assert "pipeline" in (REPO / "Makefile").read_text().split("$(VENV)/.installed:")[1].split("\n\n")[0]


def _run(*argv, **kwargs) -> subprocess.CompletedProcess:
    out = subprocess.run([str(a) for a in argv], capture_output=True, text=True, **kwargs)
    assert out.returncode == 0, f"{argv}: {out.stdout[-2000:]}{out.stderr[-2000:]}"
    return out


@pytest.mark.slow
def test_the_light_install_checks_a_head_without_the_pipeline(tmp_path):
    """A fresh venv (no system site packages) with the pipeline's torch already in it, then ``pip install .`` from
    a copy of the source: torch stays as it was, no pipeline package comes, and the console script checks a head,
    writes its table and verifies it."""
    source = tmp_path / "source"
    shutil.copytree(REPO / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", venv)
    pip, tool = venv / "bin" / "pip", venv / "bin" / "argmaxable"
    torch_pin = next(r for r in PROJECT["optional-dependencies"]["pipeline"] if _name(r) == "torch")
    _run(pip, "install", "-q", torch_pin)
    before = _run(pip, "list", "--format=freeze").stdout
    installed = _run(pip, "install", source)
    assert "Uninstalling torch" not in installed.stdout
    after = dict(line.split("==", 1) for line in _run(pip, "list", "--format=freeze").stdout.split())
    torch_before = dict(line.split("==", 1) for line in before.split())["torch"]
    assert after["torch"] == torch_before
    pipeline_only = {_name(r) for r in PROJECT["optional-dependencies"]["pipeline"]} - {"torch"}
    assert not pipeline_only & {name.lower() for name in after}
    W = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0], [0.1, 0.1]])  # row 3 lies inside the triangle
    np.savez(tmp_path / "w.npz", W=W)
    _run(tool, "--help")
    out = _run(tool, "check", "softmax", tmp_path / "w.npz", "--out", tmp_path / "t.parquet", "--workers", "1",
               "--no-progress", cwd=tmp_path).stdout
    assert "3 argmaxable, 1 unargmaxable, 0 undecided" in out
    assert "matches its evidence" in _run(tool, "verify", tmp_path / "t.parquet", tmp_path / "w.npz").stdout
    config = subprocess.run([tool, "config", "show"], capture_output=True, text=True, cwd=tmp_path)
    assert config.returncode == 2 and config.stderr.count("\n") == 1 and "argmaxable[pipeline]" in config.stderr
    api = _run(venv / "bin" / "python", "-c", "import numpy as np, argmaxable as am; W = np.load('w.npz')['W']; "
               "print(am.verify_certificate(am.check_categories(W, workers=1), W).all())", cwd=tmp_path)
    assert api.stdout.strip() == "True"
