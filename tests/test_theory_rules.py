"""Config composition of the theory group, and a tiny run of each rule function."""

from pathlib import Path

import pytest

from argmaxable.config import ConfigError, load_config
from argmaxable.theory.basri_jacobs import run_basri_jacobs
from argmaxable.theory.cover import run_cover
from argmaxable.theory.dft import run_dft
from argmaxable.theory.random_layers import run_random_layer, run_random_summary
from argmaxable.theory.regions import run_regions
from argmaxable.theory.toy import run_toy


@pytest.mark.parametrize("overrides", [[], ["experiment=paper"]])
def test_theory_config_composes(overrides):
    cfg = load_config(overrides)
    assert cfg.theory.random_layers.n == 10000  # 002 Fig. 10
    assert cfg.theory.dft.slack == 16  # thesis Fig. 5.5


def test_unknown_theory_key_fails():
    with pytest.raises(ConfigError, match=r"theory\.regions\.nope"):
        load_config(["+theory.regions.nope=1"])


def _paths(tmp_path: Path, **kinds) -> dict:
    suffix = {"table": ".parquet", "figure": ".png"}
    return {key: str(tmp_path / f"{key}{suffix[kind]}") for key, kind in kinds.items()}


def _assert_written(out: dict) -> None:
    for path in map(Path, out.values()):
        assert path.exists(), path
        assert path.with_suffix(".md" if path.suffix == ".parquet" else ".pdf").exists()


def test_run_regions(tmp_path):
    out = _paths(tmp_path, table="table", no_bias="table", bias="table")
    run_regions({"max_n": 10, "max_d": 10, "enumerate_max_n": 3, "bound": 1e4, "eps": 1e-8}, out, seed=0)
    _assert_written(out)
    assert "3628800" in Path(out["no_bias"]).with_suffix(".md").read_text()


def test_run_cover(tmp_path):
    out = _paths(tmp_path, percentage="table", enumeration="table", figure="figure")
    run_cover({"n": 100, "d_values": [1, 50], "enumerate_max_n": 4, "bound": 1e4, "eps": 1e-8}, out, seed=0)
    _assert_written(out)


def test_run_dft(tmp_path):
    out = _paths(tmp_path, alternation="table", radius="table", geometry="figure", radius_figure="figure")
    settings = {"geometry_n": [3, 4], "n_values": [16], "k_values": [1], "slack": 2, "samples": 10,
                "quantile": 0.01, "alternation_max_n": 5, "bound": 1e4, "eps": 1e-8}
    run_dft(settings, out, seed=0)
    _assert_written(out)


def test_run_random_layers(tmp_path):
    settings = {"n": 200, "d_values": [3, 30], "low": -1.0, "high": 1.0, "bias": True, "patience": 10,
                "bound": 100.0, "eps": 1e-8, "workers": 1, "qhull_n": 200, "qhull_d_values": [2]}
    inputs = [str(tmp_path / f"d{d}.parquet") for d in settings["d_values"]]
    for d, path in zip(settings["d_values"], inputs, strict=True):
        run_random_layer(settings, d, path, seed=0)
    out = _paths(tmp_path, summary="table", qhull="table", figure="figure")
    run_random_summary(settings, inputs, out, seed=0)
    _assert_written(out)


def test_run_toy(tmp_path):
    out = _paths(tmp_path, table="table", figure="figure")
    run_toy(out)
    _assert_written(out)
    assert "unargmaxable" in Path(out["table"]).with_suffix(".md").read_text()


def test_run_basri_jacobs(tmp_path):
    out = _paths(tmp_path, table1="table", appendix_b="table", crossings="table", fig2="figure",
                 fig_b="figure")
    settings = {"probability": 0.99, "mc_N": 500, "mc_d": 60, "mc_m_max": 5, "mc_trials": 20,
                "mc_matrices": 1}
    run_basri_jacobs(settings, out, seed=0)
    _assert_written(out)
