"""The SLURM profile and the comparison behind `make test-slurm` (the cluster run itself is scripts/test_slurm.sh)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parents[1]
PROFILE = ROOT / "workflow/profiles/slurm/config.yaml"
COMPARE = ROOT / "scripts/compare_results.py"


def test_profile_names_only_real_rules_and_leaves_cpus_to_threads():
    profile = yaml.safe_load(PROFILE.read_text())
    assert profile["executor"] == "slurm"
    rules = set(re.findall(r"^\s*rule (\w+):", "".join(p.read_text() for p in (ROOT / "workflow/rules").glob("*.smk")),
                           flags=re.M))
    assert set(profile["set-resources"]) <= rules, set(profile["set-resources"]) - rules
    # cpus_per_task would override the rules' threads (taken from the config) and allocate idle CPUs.
    resources = [profile["default-resources"], *profile["set-resources"].values()]
    assert not any("cpus_per_task" in r for r in resources)
    assert all(isinstance(r.get("mem_mb", 0), int) and isinstance(r.get("runtime", 0), int) for r in resources)


def write_results(root: Path, statuses: list[str], seconds: float) -> None:
    (root / "detect/m").mkdir(parents=True)
    (root / "detect/logs").mkdir()
    pd.DataFrame({"category": range(len(statuses)), "status": statuses}).to_parquet(root / "detect/m/c.parquet")
    pd.DataFrame({"model": ["m"], "seconds": [seconds]}).to_csv(root / "detect/t.csv", index=False)
    (root / "detect/logs/x.csv").write_text(f"time\n{seconds}\n")  # logs are never compared


def compare(a: Path, b: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(COMPARE), str(a), str(b)], capture_output=True, text=True)


def test_compare_results_ignores_wall_time_and_reports_a_changed_verdict(tmp_path):
    write_results(tmp_path / "a", ["argmaxable", "unargmaxable"], seconds=1.0)
    write_results(tmp_path / "b", ["argmaxable", "unargmaxable"], seconds=9.0)
    write_results(tmp_path / "c", ["argmaxable", "argmaxable"], seconds=1.0)
    same = compare(tmp_path / "a", tmp_path / "b")
    assert same.returncode == 0 and "2 tables and 0 datasets equal" in same.stdout
    changed = compare(tmp_path / "a", tmp_path / "c")
    assert changed.returncode == 1 and "table detect/m/c.parquet differs" in changed.stderr
    (tmp_path / "b/detect/t.csv").unlink()
    missing = compare(tmp_path / "a", tmp_path / "b")
    assert missing.returncode == 1 and f"table detect/t.csv only in {tmp_path / 'a'}" in missing.stderr
