"""Config composition and validation: every group option composes, bad configs fail with one line."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from argmaxable.config import ALONE, CONFIG_DIR, ConfigError, load_config, to_plain

REPO = Path(__file__).resolve().parents[1]
GROUPS = sorted(p.name for p in CONFIG_DIR.iterdir() if p.is_dir() and p.name != "catalogues")  # tables, not a group


def test_default_is_the_offline_experiment():
    cfg = load_config()
    assert cfg.experiment == "offline"
    assert cfg.detect.bound == 100.0 and cfg.detect.eps == 1e-8 and cfg.detect.patience == 2500
    assert "debtags" in cfg.datasets


def test_paper_experiment_composes_with_paper_datasets():
    cfg = load_config(["experiment=paper"])
    assert cfg.experiment == "paper"
    assert {"mimic3", "bioasq", "openimages"} <= set(cfg.datasets)


@pytest.mark.parametrize("group", GROUPS)
def test_every_option_of_every_group_composes(group):
    for option in sorted(p.stem for p in (CONFIG_DIR / group).glob("*.yaml")):
        value = f"[{option}]" if group in ("model", "datasets") else option
        cfg = load_config([f"{group}={value}", *ALONE])  # alone: the checks naming other groups' keys off
        if group in ("model", "datasets"):
            assert option in cfg[group]


def test_paper_group_files_compose_the_papers_settings_over_the_defaults():
    """theory/paper.yaml and topm/paper.yaml hold only what differs; the composed values are the papers'."""
    paper = load_config(["experiment=paper"])
    theory, topm = paper.theory, paper.topm
    assert theory.regions.enumerate_max_n == 6 and theory.cover.enumerate_max_n == 10
    assert list(theory.dft.n_values)[-1] == 2048 and theory.dft.samples == 1000 and theory.dft.alternation_max_n == 11
    assert theory.random_layers.patience == 2500 and theory.random_layers.qhull_n == 10000  # ACL 2022 §4, Fig. 10
    assert list(theory.random_layers.d_values) == [2, 5, 10, 15, 20, 25, 30, 40, 50]
    assert (theory.basri_jacobs.mc_trials, theory.basri_jacobs.mc_matrices) == (2000, 4)
    # inherited from theory/default.yaml
    assert (theory.regions.max_n, theory.regions.bound, theory.cover.n) == (10, 1e4, 1000)
    assert theory.random_layers.n == 10000 and theory.random_layers.bound == 100.0
    assert theory.basri_jacobs.probability == 0.99 and list(theory.illustrations.overcrowding_lines) == [4, 8, 16, 32]
    assert topm.check.workers == 2 and topm.scaling.N == 32000 and topm.natural.model == "gpt2"
    assert list(topm.ranking.exhaustive_n) == [6, 7, 8, 9, 10] and topm.ranking.samples == 1000
    # inherited from topm/default.yaml
    assert (topm.check.bound, topm.check.patience, topm.check.solver) == (100.0, 0, "highs")
    assert topm.check.exact_radius is True
    assert list(topm.ranking.k_values) == [1, 2, 3, 4] and topm.ranking.bound == 1e4 and topm.natural.top == 2000


def _leaves(tree, path=()):
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield from _leaves(value, (*path, key))
    else:
        yield path, tree


@pytest.mark.parametrize("overrides", [[], ["experiment=paper"]])
def test_every_eps_is_the_one_detect_eps(overrides):
    """eps is stated once (detect.eps); every family's eps refers to it, so one override moves them all."""
    for eps in (1e-8, 1e-6):
        tree = to_plain(load_config([*overrides, f"detect.eps={eps}"]))
        found = {".".join(path): value for path, value in _leaves(tree) if path[-1] == "eps"}
        assert len(found) >= 8 and set(found.values()) == {eps}, found


# Which question's box each family's `bound` is (one box default per question, one override each).
CATEGORY_BOXES = {"detect.bound", "theory.random_layers.bound", "theory.illustrations.bound", "topm.check.bound"}


@pytest.mark.parametrize("overrides", [[], ["experiment=paper"]])
def test_every_box_is_one_of_the_questions_boxes(overrides):
    """The box is stated once per question (config.yaml's box.categories, box.assignments); every family's bound
    refers to one, so one override changes it for every experiment."""
    tree = to_plain(load_config(overrides))
    assert tree["box"] == {"categories": 100.0, "assignments": 1e4}
    moved = to_plain(load_config([*overrides, "box.categories=50", "box.assignments=500"]))
    found = {".".join(path): value for path, value in _leaves(moved) if path[-1] == "bound"}
    assert len(found) >= 9, found
    assert found == {key: 50.0 if key in CATEGORY_BOXES else 500.0 for key in found}


def test_group_files_that_extend_the_default_state_only_differences():
    """A group file whose defaults list starts from the group's default sets no value the default already has."""
    extending = [f for f in CONFIG_DIR.glob("*/*.yaml") if "default" in OmegaConf.load(f).get("defaults", [])]
    assert {f"{f.parent.name}/{f.stem}" for f in extending} >= {"theory/paper", "topm/paper", "lm/full"}
    for file in extending:
        group = file.parent.name
        default = to_plain(load_config([f"{group}=default"]))[group]
        own = OmegaConf.to_container(OmegaConf.load(file))
        own.pop("defaults")
        for path, value in _leaves(own):
            node = default
            for key in path:
                node = node[key]
            assert node != value, f"{file.name} restates {group}.{'.'.join(path)}={value!r} from default.yaml"


def test_every_default_yaml_value_is_its_schema_default():
    """One default per key: each family's ``default.yaml`` (interpolations resolved) states what its schema
    dataclass says, so a dataclass built in code and the composed default agree. Mappings the YAML fills
    (``multilabel.runs``) have no schema default to hold."""
    from argmaxable.config import RootConfig

    schema = OmegaConf.to_container(OmegaConf.structured(RootConfig), resolve=True)
    root = OmegaConf.load(CONFIG_DIR / "config.yaml")
    checked, differ = 0, []
    for group in ("detect", "theory", "multilabel", "topm", "lm"):
        own = OmegaConf.load(CONFIG_DIR / group / "default.yaml")
        own.pop("defaults", None)
        tree = OmegaConf.create({"box": root.box, "detect": {"eps": schema["detect"]["eps"]}})
        tree[group] = own  # a family's interpolations name box.* and detect.eps
        values = OmegaConf.to_container(tree, resolve=True)[group]
        for path, value in _leaves(values):
            node = schema[group]
            for key in path:
                if node == {} or key not in node:  # inside a mapping the YAML fills
                    break
                node = node[key]
            else:
                checked += 1
                if node != value:
                    differ.append(f"{group}.{'.'.join(path)}: default.yaml {value!r}, schema {node!r}")
    assert checked > 100
    assert not differ, "\n".join(differ)


def test_every_catalogued_model_file_is_its_row():
    """The WMT17, OPUS-MT and Bergamot models are one table each (config/catalogues/); every config/model file of
    theirs is what its row writes, so editing a file by hand, or a row without `make catalogues`, fails here."""
    from argmaxable.detect.catalogues import catalogues, model_files

    files = model_files(CONFIG_DIR)
    assert {c.path.stem: len(c.rows) for c in catalogues(CONFIG_DIR)} == {"bergamot": 24, "opus": 32, "wmt17": 82}
    stale = [p.name for p, text in files.items() if not p.exists() or p.read_text(encoding="utf-8") != text]
    assert not stale, f"run `make catalogues`: {stale}"
    assert len(files) == 138


def test_adding_an_opus_model_is_one_catalogue_row(tmp_path, capsys):
    """One row appended to the OPUS-MT catalogue, `argmaxable config catalogues`, and the model composes as a
    `model=` option with the row's values (the pipeline reads nothing else)."""
    import shutil

    from argmaxable.cli import main

    config = tmp_path / "config"
    shutil.copytree(CONFIG_DIR, config)
    catalogue = config / "catalogues" / "opus.yaml"
    row = ('  - ["opus_mt_en_uk", "opus-mt-en-uk", "Helsinki-NLP/opus-mt-en-uk", "main", "CYRILLIC", "uk", '
           '"Helsinki-NLP OPUS-MT Marian transformer en-uk (d=512, output bias)", "", 0]\n')
    catalogue.write_text(catalogue.read_text(encoding="utf-8") + row, encoding="utf-8")
    assert main(["config", "catalogues", "--config-dir", str(config)]) == 0
    assert "1 model config(s) written" in capsys.readouterr().out
    model = load_config(["model=[opus_mt_en_uk]", *ALONE], config).model.opus_mt_en_uk
    assert (model.name, model.download.repo, model.download.revision, model.script) == (
        "opus-mt-en-uk", "Helsinki-NLP/opus-mt-en-uk", "main", "CYRILLIC")
    assert main(["config", "catalogues", "--config-dir", str(config)]) == 0  # a second run writes nothing
    assert "0 model config(s) written" in capsys.readouterr().out


def test_a_cell_set_in_a_catalogue_rewrites_its_row_and_file_only(tmp_path):
    """set_value (what `config pin` uses for a catalogued model): the row's line changes, its trailing comment
    stays, no other line of the catalogue moves, and the model's file is written from the new row."""
    import shutil

    from argmaxable.detect.catalogues import load, set_value

    config = tmp_path / "config"
    shutil.copytree(CONFIG_DIR, config)
    catalogue = config / "catalogues" / "bergamot.yaml"
    before = catalogue.read_text(encoding="utf-8").splitlines()
    path = set_value(config, "bergamot_cs_en_student_base", "potentially_unargmaxable", "3")
    after = catalogue.read_text(encoding="utf-8").splitlines()
    changed = [(a, b) for a, b in zip(before, after, strict=True) if a != b]
    assert len(changed) == 1 and changed[0][1].endswith("# The paper's Table 7 lists cs-en.student.base twice (25 "
                                                         "rows, 24 distinct models).")
    assert '"3", 0]' in changed[0][1]
    assert path == config / "model" / "bergamot_cs_en_student_base.yaml"
    assert 'potentially_unargmaxable: "3"' in path.read_text(encoding="utf-8")
    assert load(catalogue).rows[0]["potentially_unargmaxable"] == "3"
    assert set_value(config, "gpt2", "revision", "abc") is None  # not catalogued: the caller edits its own YAML


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("model=doesnotexist", "Could not find 'model/doesnotexist'"),
        ("experiment=nope", "Could not find 'experiment/nope'"),
        ("seed=abc", "invalid config key 'seed'"),
        ("detect.bound=big", "invalid config key 'detect.bound'"),
        ("detect.nosuchkey=1", "detect.nosuchkey"),
        # values checked by the rules declared beside the schemas
        ("detect.bound=-5", "detect.bound=-5.0: must be a number > 0"),
        ("detect.eps=-1", "detect.eps=-1.0: must be a number >= 0"),
        ("detect.workers=0", "detect.workers=0: must be an integer >= 1"),
        ("detect.solver=cplex", "detect.solver='cplex': must be one of highs, gurobi"),
        ("results_dir=", "results_dir='': must be a non-empty directory path"),
        ("multilabel.runs.debtags.d=[-2]", "multilabel.runs.debtags.d.0=-2: must be an integer >= 1"),
        ("multilabel.runs.debtags.encoder.kind=nope", "encoder.kind='nope': must be one of cnn, hf, timm"),
        ("multilabel.runs.debtags.batch_size=0", "batch_size=0: must be an integer >= 1"),
        ("multilabel.runs.debtags.encoder.dropout=1", "encoder.dropout=1.0: must be a probability in "),
        ("theory.cover.eps=-1e-9", "theory.cover.eps=-1e-09: must be a number >= 0"),
        ("multilabel.verify.solver=glpk", "multilabel.verify.solver='glpk'"),
        # values that enter paths, plans and loaders
        ("detect.shards=0", "detect.shards=0: must be an integer >= 1"),
        ("detect.shards=-3", "detect.shards=-3: must be an integer >= 1"),
        ("data_dir=", "data_dir='': must be a non-empty directory path"),
        ("results_dir=/", "results_dir='/': must be a non-empty directory path other than '/'"),
        ("results_dir=../../etc", "results_dir='../../etc': must be a non-empty directory path other than '/', "
         "without '..'"),
        ("+model={../../x:{name:x,source:random}}", "invalid config key model.'../../x': must be a plain name"),
        ("model.random_uniform.download.kind=ftp", "download.kind='ftp': must be one of none, url"),
        ("++model.random_uniform.download.sha256=nothex", "download.sha256='nothex': must be empty or 64 hex"),
        ("++model.random_uniform.download.filename=../../../escaped.bin",
         "download.filename='../../../escaped.bin': must be a relative path without '..'"),
        ("++model.random_uniform.download.filename=/escaped.bin",
         "download.filename='/escaped.bin': must be a relative"),
        ("++model.random_uniform.activation=softplus", "activation='softplus': must be one of none, identity"),
        ("model.random_uniform.source=pickle", "source='pickle': must be one of random, huggingface"),
        ("model.random_uniform.params.n=-5", "params.n=-5: must be an integer >= 1"),
        # the LM family's value rules (every family declares its own)
        ("lm.activation=softplus", "lm.activation='softplus': must be one of gelu, silu, relu, tanh"),
        ("lm.prevention.heads=[linear]", "lm.prevention.heads.0='linear': must be one of spherical, dft, dft_slack"),
        ("lm.d=[0]", "lm.d.0=0: must be an integer >= 1"),
        # checks across keys (beside the value rules, so config show runs them as the Snakefile does)
        ("model=[random_uniform]", "lm.d asks for model 'debtags_lm_d4', which is not in the model list"),
        ("lm.prevention.d=[4,12]", "lm.prevention.d has 12, which lm.d lacks"),
        ("model.debtags_lm_d4.download.path=elsewhere",
         "model.debtags_lm_d4.download.path must be train_lm's output results/lm/debtags_lm_d4; got 'elsewhere'"),
        ("topm.fraction.models=[nope]", "topm.fraction.models names ['nope'], which the composed 'model' group lacks"),
        ("topm.natural.model=nope", "topm.natural.model is 'nope', which the composed 'model' group lacks"),
        ("datasets=[]", "multilabel.runs.debtags has no dataset config; add 'debtags' to the datasets group"),
    ],
)
def test_bad_config_is_one_clear_error(override, message):
    with pytest.raises(ConfigError, match=message.replace(".", r"\.").replace("[", r"\[")) as err:
        load_config([override])
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("override", "new"),
    [("dataset=[mimic3]", "datasets=[mimic3]"), ("++dataset.mimic3.path=/mnt/caml", "++datasets.mimic3.path=/mnt/caml"),
     ("~dataset.mimic3.download", "~datasets.mimic3.download")],
)
def test_an_override_of_the_renamed_dataset_group_names_the_new_one(override, new):
    with pytest.raises(ConfigError, match=f"the config group 'dataset' is now 'datasets': write '{re.escape(new)}'"):
        load_config(["experiment=paper", override])
    assert load_config(["experiment=paper", new, *ALONE])  # the new name composes


def test_missing_required_value_names_the_key(tmp_path):
    (tmp_path / "config.yaml").write_text("experiment: ???\n")
    with pytest.raises(ConfigError, match="experiment"):
        load_config(config_dir=tmp_path)


def test_config_show_runs_the_checks_across_keys(capsys):
    """`argmaxable config show` validates as the Snakefile does: a check across keys is one line, exit 1."""
    from argmaxable.cli import main

    assert main(["config", "show", "topm.natural.model=nope"]) != 0
    err = capsys.readouterr().err
    assert "topm.natural.model is 'nope', which the composed 'model' group lacks" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_config_is_read_only():
    cfg = load_config()
    with pytest.raises(Exception):  # noqa: B017 - OmegaConf raises its own ReadonlyConfigError
        cfg.seed = 3


def test_jobs_record_the_config_of_the_run_they_belong_to():
    """A job's provenance is the whole tree its run was composed from, overrides included."""
    from types import SimpleNamespace

    from argmaxable.config import from_snakemake

    job = SimpleNamespace(config={"overrides": ["seed=7", "model=[random_gaussian]", *ALONE]},
                          scriptdir=str(REPO / "workflow" / "rules" / ".." / "scripts"))  # as Snakemake gives it
    recorded = from_snakemake(job)
    assert recorded["seed"] == 7 and list(recorded["model"]) == ["random_gaussian"]
    assert recorded["experiment"] == "offline"


def test_jobs_read_the_tree_their_run_composed_and_compose_where_it_is_another_runs(tmp_path, monkeypatch):
    """A run writes its composed tree once (share_composed); a job of that run reads it instead of composing the
    tree again, and a job of another run (other overrides) composes its own."""
    from types import SimpleNamespace

    import argmaxable.config as config_module
    from argmaxable.config import COMPOSED_ENV, from_snakemake, share_composed, to_plain

    overrides = ["seed=7", "model=[random_gaussian]", *ALONE]
    scriptdir = str(REPO / "workflow" / "rules" / ".." / "scripts")
    monkeypatch.setenv(COMPOSED_ENV, "")  # restored after the test: share_composed names its file here
    composed = to_plain(load_config(overrides))
    path = share_composed(load_config(overrides), overrides, REPO / "config", tmp_path)
    assert os.environ[COMPOSED_ENV] == str(path.resolve())

    def composing(*args, **kwargs):
        raise AssertionError("composed again")

    with monkeypatch.context() as m:
        m.setattr(config_module, "load_config", composing)
        assert from_snakemake(SimpleNamespace(config={"overrides": overrides}, scriptdir=scriptdir)) == composed
        with pytest.raises(AssertionError, match="composed again"):
            from_snakemake(SimpleNamespace(config={"overrides": ["seed=8", *overrides[1:]]}, scriptdir=scriptdir))
    other = from_snakemake(SimpleNamespace(config={"overrides": ["seed=8", *overrides[1:]]}, scriptdir=scriptdir))
    assert other["seed"] == 8 and composed["seed"] == 7


def snakemake(*args: str) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("snakemake")
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    return subprocess.run([str(exe), *args], cwd=REPO, capture_output=True, text=True, env=env, timeout=300)


def test_snakemake_rejects_a_wrong_override_before_any_job():
    out = snakemake("--cores", "1", "-n", "--config", "overrides=[model=doesnotexist]")
    assert out.returncode != 0
    lines = [ln for ln in out.stderr.splitlines() if ln.startswith("argmaxable:")]
    assert len(lines) == 1 and "model/doesnotexist" in lines[0]
    assert "Traceback" not in out.stderr


def test_snakemake_dry_run_lists_the_default_dag():
    out = snakemake("--cores", "2", "-n", "--quiet", "rules")
    assert out.returncode == 0, out.stderr


def test_a_snakemake_job_runs_and_records_its_run(tmp_path):
    """End to end through Snakemake's script directive: the output exists, its sidecar holds the run's config,
    and a second run has nothing to do."""
    import json

    overrides = f'overrides=["results_dir={tmp_path}","seed=3"]'
    target = str(tmp_path / "theory" / "tables" / "toy.parquet")
    out = snakemake(target, "--cores", "1", "--config", overrides)
    assert out.returncode == 0, out.stderr[-3000:]
    meta = json.loads((tmp_path / "theory" / "tables" / "toy.parquet.meta.json").read_text())
    assert meta["config"]["seed"] == 3 and meta["config"]["results_dir"] == str(tmp_path)
    assert meta["code_version"]
    again = snakemake(target, "--cores", "1", "--config", overrides)
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr
