"""Multi-label configs: the offline default and the paper experiment's Table A.4 settings and DAG."""

import shutil
import subprocess
from pathlib import Path

import pytest

from argmaxable.config import ConfigError, load_config

REPO = Path(__file__).resolve().parents[1]


def test_offline_default_sweeps_bsl_and_dft_on_debtags_over_three_seeds():
    ml = load_config().multilabel
    assert list(ml.runs) == ["debtags"]
    run = ml.runs.debtags
    assert list(run.heads) == ["bsl", "dft"] and list(run.seeds) == [0, 1, 2]
    assert len(run.d) >= 3 and run.encoder.kind == "cnn"
    assert ml.verify.bound == 1e4 and ml.verify.eps == 1e-8  # thesis A.3, §4.1.2


def test_paper_runs_have_the_settings_of_thesis_table_a4():
    from argmaxable.pipeline import dataset_resources

    cfg = load_config(["experiment=paper"])
    runs = cfg.multilabel.runs
    expected = {  # dataset: (encoder, e, lr encoder, batch, eval every, criterion, metric k, k)
        "mimic3": ("cnn", 500, 0.001, 16, 0, "p@k", 8, 80),
        "bioasq": ("hf", None, 5e-5, 32, 500, "loss", 10, 50),
        "openimages": ("timm", None, 1e-4, 64, 250, "loss", 10, 50),
    }
    assert set(runs) == set(expected)
    for name, (kind, e, lr, batch, every, criterion, mk, k) in expected.items():
        run = runs[name]
        assert (run.encoder.kind, run.lr_encoder, run.batch_size, run.eval_every, run.criterion) == (
            kind, lr, batch, every, criterion)
        assert (run.metric_k, run.k_active, run.patience, run.lr_classifier) == (mk, k, 10, 0.001)
        assert list(run.d) == [25, 50, 100, 200, 400] and list(run.seeds) == [0, 1, 2]
        if e is not None:
            assert run.encoder.filters == e
    assert runs.bioasq.encoder.pretrained == "microsoft/BiomedNLP-BiomedBERT-base-uncased-abstract"
    # OpenImages fine-tunes ASL's OpenImages TResNet-L (thesis A.6.1), never the hub's ImageNet weights.
    assert runs.openimages.encoder.checkpoint == "data/openimages/Open_ImagesV6_TRresNet_L_448.pth"
    # On SLURM every training job asks for one GPU and verification for none (the profile no longer sets them).
    assert {name: (dataset_resources(cfg, name)["train"]["gpu"], dataset_resources(cfg, name)["verify"]["gpu"])
            for name in expected} == {name: (1, 0) for name in expected}


def test_the_rehearsal_runs_the_paper_s_encoder_families_shrunk_from_replicas_under_its_data():
    # The rehearsal's pretrained encoders are smaller members of the paper's families, written by the stand-ins
    # (under data_dir, where write_all writes them); the paper's heads, batches and d stay.
    from argmaxable.multilabel import standins
    from argmaxable.multilabel.standins import is_under

    cfg = load_config(["experiment=rehearsal"])
    paper = load_config(["experiment=paper"]).multilabel.runs
    runs = cfg.multilabel.runs
    assert runs.bioasq.encoder.arch.num_hidden_layers < standins.PUBMEDBERT["num_hidden_layers"]
    assert runs.bioasq.encoder.arch.hidden_size < standins.PUBMEDBERT["hidden_size"]
    assert runs.bioasq.encoder.max_tokens == paper.bioasq.encoder.max_tokens == 512
    assert list(runs.openimages.encoder.arch.layers) == [1, 1, 1, 1]
    assert max(runs.mimic3.d) <= runs.mimic3.encoder.filters < paper.mimic3.encoder.filters  # e still above d
    assert runs.openimages.encoder.pretrained == paper.openimages.encoder.pretrained == "tresnet_l"
    assert is_under(Path(cfg.data_dir), runs.bioasq.encoder.pretrained)
    assert is_under(Path(cfg.data_dir), runs.openimages.encoder.checkpoint)
    for name in ("mimic3", "bioasq", "openimages"):
        assert (runs[name].batch_size, runs[name].k_active) == (paper[name].batch_size, paper[name].k_active)
        assert not paper[name].encoder.arch  # the paper runs its encoders as published


def test_unknown_multilabel_key_is_rejected():
    with pytest.raises(ConfigError, match="multilabel"):
        load_config(["+multilabel.runs.debtags.learning_rate=1"])


@pytest.mark.skipif(shutil.which("snakemake", path=str(REPO / ".venv" / "bin")) is None, reason="no snakemake")
def test_paper_dag_lists_the_three_datasets_jobs(tmp_path):
    out = subprocess.run(
        [str(REPO / ".venv" / "bin" / "snakemake"), "-n", "--cores", "1", "--quiet", "rules",
         "--config", f"overrides=[experiment=paper,results_dir={tmp_path}]"],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    counts = {line.split()[0]: int(line.split()[1]) for line in out.stdout.splitlines()
              if len(line.split()) == 2 and line.split()[1].isdigit()}
    assert counts["train_head"] == 3 * 2 * 5 * 3  # datasets x heads x d x seeds
    assert counts["verify_head"] == 90 and counts["make_multilabel_report"] == 1
    assert counts["download_dataset"] == counts["build_dataset"] == 3  # each dataset fetched before its build
