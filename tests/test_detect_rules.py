"""The detection rules through Snakemake: the paper experiment schedules one download and one check per model
(issue 10's done-when), and a download that fails stops with one line naming the model and the URL."""

from __future__ import annotations

import re

import pytest
from test_config import snakemake


@pytest.mark.slow
def test_paper_dry_run_has_one_download_and_one_check_per_model():
    out = snakemake("--cores", "2", "-n", "--quiet", "rules", "--config", "overrides=[experiment=paper]")
    assert out.returncode == 0, out.stderr[-3000:]
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", out.stdout + out.stderr, flags=re.M))
    # 002's 149 released models, plus the four trained heads of 004 Fig. 1 that are not among them (topm family)
    assert counts["download_model"] == counts["check_model"] == str(149 + 4)


def test_a_failed_download_is_one_line_and_leaves_nothing(tmp_path):
    missing = (tmp_path / "gone.npz").as_uri()
    overrides = (f'overrides=["results_dir={tmp_path}/results","data_dir={tmp_path}/data",'
                 f'"model.random_gaussian.download.kind=url","++model.random_gaussian.download.url={missing}"]')
    out = snakemake(f"{tmp_path}/data/models/random_gaussian/manifest.json", "--cores", "1", "--config", overrides)
    assert out.returncode != 0
    lines = [ln for ln in out.stderr.splitlines() if ln.startswith("argmaxable:")]
    assert len(lines) == 1 and "'random_gaussian'" in lines[0] and missing in lines[0], out.stderr[-3000:]
    assert "may be offline" in lines[0]
    assert list((tmp_path / "data" / "models").iterdir()) == []
