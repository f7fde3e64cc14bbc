"""The layer order of the package (pyproject's import-linter contract, docs/ARCHITECTURE.md): it holds on the tree,
and it fails on an upward import, so `make lint` would stop one."""

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def _lint_imports(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=root, capture_output=True, text=True,
                          env={"PYTHONPATH": str(root / "src"), "PATH": "/usr/bin:/bin"})


def test_the_package_keeps_its_layer_order():
    out = _lint_imports(ROOT)
    assert out.returncode == 0, out.stdout[-2000:]
    assert "2 kept, 0 broken" in out.stdout


def test_an_upward_import_breaks_the_contract(tmp_path):
    shutil.copytree(ROOT / "src" / "argmaxable", tmp_path / "src" / "argmaxable",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    result = tmp_path / "src" / "argmaxable" / "core" / "result.py"
    result.write_text(result.read_text() + "\nfrom argmaxable.config import load_config  # noqa: E402\n")
    out = _lint_imports(tmp_path)
    assert out.returncode == 1
    assert "argmaxable.core.result -> argmaxable.config" in out.stdout
