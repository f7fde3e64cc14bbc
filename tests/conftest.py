"""Fixtures shared by several test files."""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def _execute(name: str, results: Path) -> str:
    """Run ``notebooks/<name>.ipynb`` with ``ARGMAXABLE_RESULTS=results``; return all its text output."""
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
    return "\n".join(texts)


@pytest.fixture
def run_notebook():
    """``run_notebook(name, results_dir) -> str``: execute a notebook, return its text output."""
    return _execute
