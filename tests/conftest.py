"""Fixtures shared by several test files."""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest
from hypothesis import settings
from nbclient import NotebookClient

# The property tests draw the same examples on every run, so whether a submission passes never depends on the
# draw; `make fuzz` (HYPOTHESIS_PROFILE=explore) draws new ones, and a failure it finds becomes an @example.
settings.register_profile("repeatable", derandomize=True, print_blob=True)
settings.register_profile("explore", derandomize=False, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def _execute(name: str, results: Path, *, executed: bool = False):
    """Run ``notebooks/<name>.ipynb`` with ``ARGMAXABLE_RESULTS=results``; return all its text output (and, with
    ``executed``, the executed notebook beside it)."""
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    os.environ["ARGMAXABLE_RESULTS"] = str(results)  # the kernel inherits the environment
    try:
        NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}}
                       ).execute()
    finally:
        del os.environ["ARGMAXABLE_RESULTS"]
    texts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            texts.append(out.get("text", ""))
            texts.extend(str(v) for k, v in out.get("data", {}).items() if k.startswith("text/"))
    text = "\n".join(texts)
    return (text, nb) if executed else text


@pytest.fixture
def run_notebook():
    """``run_notebook(name, results_dir[, executed=True])``: execute a notebook, return its text output (and the
    executed notebook)."""
    return _execute
