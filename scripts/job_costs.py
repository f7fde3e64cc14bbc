"""Wall time and peak RSS of every job of a run, as a markdown table (the rehearsal's results/rehearsal/jobs.md).

Reads Snakemake's benchmark files under RESULTS (``benchmarks/<rule>/<job>.tsv``: columns s, max_rss in MB, ...;
Snakemake samples the job's memory every second for its first 30 s, then every 30 s), the exact peak a training
job records in its train.json (``peak_rss_mib``, from getrusage) and, when present, RESULTS/generate.tsv (name,
seconds, peak RSS in KiB, from /usr/bin/time: the stand-ins).
Usage: python scripts/job_costs.py RESULTS
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd


def job_costs(results: Path) -> pd.DataFrame:
    """One row per job: rule, job (the benchmark file's stem), wall seconds, peak RSS in MiB, and whether that
    peak is exact (getrusage, /usr/bin/time) or Snakemake's sample."""
    rows = []
    for path in sorted(results.glob("**/benchmarks/*/*.tsv")):
        bench = pd.read_csv(path, sep="\t")
        row = {"rule": path.parent.name, "job": path.stem, "wall_s": round(float(bench["s"].iloc[-1]), 1),
               "peak_rss_mib": round(float(bench["max_rss"].iloc[-1]) * 1e6 / 2**20), "exact": ""}
        if row["rule"] == "train_head":  # <dataset>_<head>_d<d>_seed<s>: the run's train.json has the exact peak
            dataset, head, d, seed = path.stem.rsplit("_", 3)
            record = path.parents[2] / dataset / head / d / seed / "train.json"
            if record.exists() and "peak_rss_mib" in (rec := json.loads(record.read_text())):
                row["peak_rss_mib"], row["exact"] = round(rec["peak_rss_mib"]), "yes"
        rows.append(row)
    generate = results / "generate.tsv"
    if generate.exists():  # one line per call; a rerun that found everything written adds a short one
        longest: dict[str, tuple[float, int]] = {}
        for line in generate.read_text().splitlines():
            name, seconds, kib = line.split("\t")
            longest[name] = max(longest.get(name, (0.0, 0)), (float(seconds), int(kib)))
        rows += [{"rule": "generate", "job": name, "wall_s": round(seconds, 1), "peak_rss_mib": round(kib / 1024),
                  "exact": "yes"} for name, (seconds, kib) in longest.items()]
    return pd.DataFrame(rows, columns=["rule", "job", "wall_s", "peak_rss_mib", "exact"])


if __name__ == "__main__":
    table = job_costs(Path(sys.argv[1]))
    print(table.to_markdown(index=False))
