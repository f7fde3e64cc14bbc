"""The Snakemake workflow's own code: the helpers its rules call (argmaxable.pipeline), its lint, its environment."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from argmaxable.config import ALONE, load_config
from argmaxable.pipeline import (
    compose,
    dataset_download,
    download_params,
    family_outputs,
    snapshot_version,
    steps_models,
    trained_input,
)

REPO = Path(__file__).resolve().parents[1]
RULES_DIR = REPO / "workflow" / "rules"


def test_family_outputs_name_each_table_and_figure_and_their_copies():
    assert family_outputs("r", tables={"t": "a"}, figures={"f": "b"}) == {
        "t": "r/tables/a.parquet", "f": "r/figures/b.png", "copies": ["r/tables/a.md", "r/figures/b.pdf"]}


def test_steps_figures_draw_the_chosen_models_that_ran_else_every_model():
    assert steps_models(load_config(), "fig11") == ["ddddocr_common", "ddddocr_common_old", "ppocrv4_rec"]
    assert steps_models(load_config(["model=[random_uniform,ppocrv4_rec]", *ALONE]), "fig11") == ["ppocrv4_rec"]
    assert steps_models(load_config(["model=[random_uniform]", *ALONE]), "fig12") == ["random_uniform"]


def test_model_inputs_and_download_params():
    cfg = load_config()
    assert trained_input(cfg, "debtags_lm_d4") == ["results/lm/debtags_lm_d4"]  # train_lm's output
    assert trained_input(cfg, "ppocrv4_rec") == []
    params = download_params(cfg, "ppocrv4_rec")
    assert set(params) == {"name", "download"} and params["download"]["kind"] == cfg.model.ppocrv4_rec.download.kind


def test_dataset_inputs_follow_the_dataset_config():
    offline, paper = load_config(), load_config(["experiment=paper"])
    assert dataset_download(offline, "debtags") == []  # the shipped snapshot: nothing to fetch
    assert dataset_download(paper, "mimic3") == ["data/mimic3/manifest.json"]
    assert re.fullmatch(r"[0-9a-f]{64}", snapshot_version(offline, "debtags"))
    assert snapshot_version(load_config(["datasets.debtags.source=apt"]), "debtags") == ""
    assert snapshot_version(paper, "mimic3") == ""


def test_a_bad_override_stops_the_workflow_with_one_line(capsys):
    with pytest.raises(SystemExit) as stop:
        compose("model=doesnotexist", REPO / "config")
    assert stop.value.code == 1
    err = capsys.readouterr().err
    assert err.startswith("argmaxable: ") and err.count("\n") == 1 and "model/doesnotexist" in err


def test_snakemake_lint_finds_nothing():
    exe = Path(sys.executable).with_name("snakemake")
    out = subprocess.run([str(exe), "--lint", "--cores", "1"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "Lints for" not in out.stdout + out.stderr, out.stdout + out.stderr


def test_every_rule_names_the_project_environment():
    common = (RULES_DIR / "common.smk").read_text()
    environment = re.search(r'^ENVIRONMENT = "(.+)"', common, re.M).group(1)
    assert (RULES_DIR / environment).resolve() == REPO / "environment.yml"  # conda: paths are relative to the file
    for smk in RULES_DIR.glob("*.smk"):
        text = smk.read_text()
        rules = re.findall(r"^\s*rule \w+:$", text, re.M)
        assert len(re.findall(r"^\s*conda:\n\s*ENVIRONMENT$", text, re.M)) == len(rules), smk.name


def test_the_environment_installs_pyprojects_pins():
    """environment.yml gets python and a CPU torch of pyproject.toml's versions from conda; its post-deploy
    script installs the project itself as pyproject.toml declares it."""
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    torch_pin = next(d for d in project["optional-dependencies"]["pipeline"] if d.startswith("torch=="))
    conda = {spec.split("=")[0]: spec.split("=")[1:] for spec in env["dependencies"] if isinstance(spec, str)}
    assert conda["pytorch"] == [torch_pin.removeprefix("torch=="), "cpu_*"]
    assert project["requires-python"] == f">={conda['python'][0]}"
    post_deploy = (REPO / "environment.post-deploy.sh").read_text()
    assert re.search(r"^pip install -e \"\.\[pipeline\]\"$", post_deploy, re.M)
