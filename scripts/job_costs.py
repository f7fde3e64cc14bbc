"""Wall time and peak RSS of every job of a run, as a markdown table (the rehearsal's results/rehearsal/jobs.md).

Reads Snakemake's benchmark files under RESULTS (``benchmarks/<rule>/<job>.tsv``: columns s, max_rss in MB, ...)
and, when present, RESULTS/generate.tsv (name, seconds, peak RSS in KiB, from /usr/bin/time: the stand-ins).
Usage: python scripts/job_costs.py RESULTS
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd


def job_costs(results: Path) -> pd.DataFrame:
    """One row per job: rule, job (the benchmark file's stem), wall seconds, peak RSS in MiB."""
    rows = []
    for path in sorted(results.glob("**/benchmarks/*/*.tsv")):
        bench = pd.read_csv(path, sep="\t")
        rows.append({"rule": path.parent.name, "job": path.stem, "wall_s": round(float(bench["s"].iloc[-1]), 1),
                     "peak_rss_mib": round(float(bench["max_rss"].iloc[-1]) * 1e6 / 2**20)})
    generate = results / "generate.tsv"
    if generate.exists():
        for line in generate.read_text().splitlines():
            name, seconds, kib = line.split("\t")
            rows.append({"rule": "generate", "job": name, "wall_s": round(float(seconds), 1),
                         "peak_rss_mib": round(int(kib) / 1024)})
    return pd.DataFrame(rows, columns=["rule", "job", "wall_s", "peak_rss_mib"])


if __name__ == "__main__":
    table = job_costs(Path(sys.argv[1]))
    print(table.to_markdown(index=False))
