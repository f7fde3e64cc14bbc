"""Check that two results directories hold the same results (used by scripts/test_slurm.sh).

Usage: python scripts/compare_results.py RESULTS_A RESULTS_B

Compares every table (``*.parquet``, ``*.csv``) and every built dataset (a directory with ``labels.json``)
under RESULTS_A with the same path under RESULTS_B: same files, same rows, same values. Wall-clock columns
(:data:`TIMING`) are left out; so are logs, provenance sidecars and figures, which hold times and paths.
Prints one line per difference and exits 1 if there is any, else prints what it compared and exits 0.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

TIMING = {"seconds"}  # wall time of a job: differs between any two runs


def tables(root: Path) -> set[Path]:
    """Relative paths of the tables under ``root`` (logs excluded)."""
    found = {p.relative_to(root) for ext in ("*.parquet", "*.csv") for p in root.rglob(ext)}
    return {p for p in found if "logs" not in p.parts}


def datasets(root: Path) -> set[Path]:
    """Relative paths of the built datasets under ``root``."""
    return {p.parent.relative_to(root) for p in root.rglob("labels.json")}


def read_table(path: Path) -> pd.DataFrame:
    df = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    return df.drop(columns=[c for c in df.columns if c in TIMING])


def read_dataset(path: Path) -> dict[str, pd.DataFrame]:
    from argmaxable.multilabel.datasets import load_built

    dsd, names = load_built(path)
    return {"labels": pd.DataFrame({"name": names}), **{split: dsd[split].to_pandas() for split in dsd}}


def differences(a: Path, b: Path) -> list[str]:
    """One line per difference between results directories ``a`` and ``b``."""
    out = []
    for kind, find in (("table", tables), ("dataset", datasets)):
        only_a, only_b = find(a) - find(b), find(b) - find(a)
        out += [f"{kind} {p} only in {a}" for p in sorted(only_a)]
        out += [f"{kind} {p} only in {b}" for p in sorted(only_b)]
    for rel in sorted(tables(a) & tables(b)):
        try:
            pd.testing.assert_frame_equal(read_table(a / rel), read_table(b / rel))
        except AssertionError as err:
            out.append(f"table {rel} differs: {' '.join(str(err).split())}")
    for rel in sorted(datasets(a) & datasets(b)):
        parts_a, parts_b = read_dataset(a / rel), read_dataset(b / rel)
        if parts_a.keys() != parts_b.keys():
            out.append(f"dataset {rel} has splits {sorted(parts_a)} vs {sorted(parts_b)}")
            continue
        for split in parts_a:
            try:
                pd.testing.assert_frame_equal(parts_a[split], parts_b[split])
            except AssertionError as err:
                out.append(f"dataset {rel} {split} differs: {' '.join(str(err).split())}")
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    a, b = map(Path, argv)
    if not tables(a) and not datasets(a):
        print(f"compare_results: no tables or datasets under {a}", file=sys.stderr)
        return 1
    diffs = differences(a, b)
    for line in diffs:
        print(f"compare_results: {line}", file=sys.stderr)
    if not diffs:
        print(f"compare_results: {len(tables(a))} tables and {len(datasets(a))} datasets equal")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
