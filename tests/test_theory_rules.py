"""Config composition of the theory group, and a tiny run of each rule function."""

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from argmaxable.config import ConfigError, load_config
from argmaxable.theory.basri_jacobs import bound, run_basri_jacobs
from argmaxable.theory.cover import run_cover
from argmaxable.theory.dft import run_dft
from argmaxable.theory.random_layers import run_random_layer, run_random_summary
from argmaxable.theory.regions import run_regions
from argmaxable.theory.toy import run_toy


@pytest.mark.parametrize("overrides", [[], ["experiment=paper"]])
def test_theory_config_composes(overrides):
    cfg = load_config(overrides)
    assert cfg.theory.random_layers.n == 10000  # ACL 2022 Fig. 10
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
    table = pd.read_parquet(out["table"])
    assert len(table) == 2 * 9 * 10 and (table["closed_form"] == table["paper"]).all()  # thesis Tables A.1, A.2
    small = table.dropna(subset=["enumerated"])  # n <= 3: every ranking tried by the LP
    assert len(small) > 0 and (small["enumerated"] == small["closed_form"]).all() and (small["undecided"] == 0).all()
    no_bias = pd.read_parquet(out["no_bias"]).set_index("n")
    assert no_bias.loc[10, "d=9"] == math.factorial(10) and no_bias.loc[4, "d=2"] == 12  # ACL 2022 Table 2
    assert pd.read_parquet(out["bias"]).set_index("n").loc[4, "d=2"] == 18  # ACL 2022 Table 3, Fig. 7


def test_run_cover(tmp_path):
    out = _paths(tmp_path, percentage="table", enumeration="table", figure="figure")
    run_cover({"n": 100, "d_values": [1, 50], "enumerate_max_n": 4, "bound": 1e4, "eps": 1e-8}, out, seed=0)
    _assert_written(out)
    # Cover: C(100, 1) = 2 of 2^100; C(100, 50) = 2 sum_{i<50} C(99, i) = 2^99, exactly half.
    percent = pd.read_parquet(out["percentage"]).set_index("d")["percent"]
    assert percent[50] == pytest.approx(50.0) and percent[1] == pytest.approx(100 * 2 / 2**100)
    enum = pd.read_parquet(out["enumeration"])
    assert len(enum) == 9 and (enum["enumerated"] == enum["cover"]).all() and (enum["undecided"] == 0).all()


def test_run_dft(tmp_path):
    out = _paths(tmp_path, alternation="table", radius="table", geometry="figure", radius_figure="figure")
    settings = {"geometry_n": [3, 4], "n_values": [16], "k_values": [1], "slack": 2, "samples": 10,
                "quantile": 0.01, "alternation_max_n": 5, "bound": 1e4, "eps": 1e-8}
    run_dft(settings, out, seed=0)
    _assert_written(out)
    alt = pd.read_parquet(out["alternation"])  # thesis Thm 5.3: argmaxable exactly when the signs alternate enough
    assert len(alt) == 4 and (alt["argmaxable"] == alt["alternating"]).all() and (alt["mismatches"] == 0).all()
    assert alt.set_index(["n", "k"]).loc[(4, 1), "argmaxable"] == 14  # 2^4 minus 0101 and 1010
    radius = pd.read_parquet(out["radius"]).set_index("slack")
    assert (radius["eps_argmaxable"] == 10).all()  # Thm 5.4: every 1-active assignment of the DFT layer
    assert radius.loc[2, "radius_min"] > radius.loc[0, "radius_min"] > 0  # Fig. 5.5: slack widens the regions


def test_run_random_layers(tmp_path):
    settings = {"n": 200, "d_values": [3, 30], "low": -1.0, "high": 1.0, "bias": True, "patience": 10,
                "bound": 100.0, "eps": 1e-8, "workers": 1, "qhull_n": 200, "qhull_d_values": [2]}
    inputs = [str(tmp_path / f"d{d}.parquet") for d in settings["d_values"]]
    for d, path in zip(settings["d_values"], inputs, strict=True):
        run_random_layer(settings, d, path, seed=0)
    out = _paths(tmp_path, summary="table", qhull="table", figure="figure")
    run_random_summary(settings, inputs, out, seed=0)
    _assert_written(out)
    qhull = pd.read_parquet(out["qhull"]).iloc[0]  # with a bias, class i is argmaxable iff (w_i, b_i) is on
    assert qhull["core_disagrees"] == 0 and qhull["qhull_unargmaxable"] == qhull["core_unargmaxable"] > 0  # the hull
    summary = pd.read_parquet(out["summary"]).set_index("d")
    assert (summary["argmaxable"] + summary["unargmaxable"] == 200).all() and (summary["undecided"] == 0).all()
    assert summary.loc[3, "unargmaxable"] > 0 == summary.loc[30, "unargmaxable"]  # ACL 2022 Fig. 10: gone by d = 30


def test_run_toy(tmp_path):
    out = _paths(tmp_path, table="table", figure="figure")
    run_toy(out)
    _assert_written(out)
    table = pd.read_parquet(out["table"])
    assert (table["status"] == table["expected"]).all()
    assert table.loc[table["status"] == "unargmaxable", "class"].tolist() == ["c4"]  # ACL 2022 Fig. 1


def test_run_basri_jacobs(tmp_path):
    out = _paths(tmp_path, table1="table", appendix_b="table", crossings="table", fig2="figure",
                 fig_b="figure")
    settings = {"probability": 0.99, "mc_N": 500, "mc_d": 60, "mc_m_max": 5, "mc_trials": 20,
                "mc_matrices": 1}
    run_basri_jacobs(settings, out, seed=0)
    _assert_written(out)
    table1 = pd.read_parquet(out["table1"])
    assert len(table1) == 22 and (table1["m_gumbel"] == table1["m_paper"]).all()  # Basri & Jacobs Table 1, all 22 rows
    curve = pd.read_parquet(out["appendix_b"])
    np.testing.assert_allclose(curve["bound_gumbel"], bound(500, 60, curve["m"].to_numpy()))
    crossing = pd.read_parquet(out["crossings"]).set_index("curve").loc["bound_gumbel"]
    above = curve.loc[curve["bound_gumbel"] >= 0.99, "m"]
    assert crossing["largest_m_at_or_above"] == above.max() and crossing["first_m_below"] == above.max() + 1
    sim = pd.read_parquet(out["crossings"]).set_index("curve").loc["simulation"]
    assert sim["first_m_not_above"] == curve.loc[curve["simulation"] <= 0.99, "m"].min()  # "> 0.99" read strictly


def test_wilson_interval_holds_the_share_and_narrows_with_trials():
    from argmaxable.theory.basri_jacobs import wilson

    lo, hi = wilson(np.array([0.99, 1.0]), 200)
    assert lo[0] < 0.99 < hi[0] and hi[1] == pytest.approx(1.0) and lo[1] < 1.0
    lo2, hi2 = wilson(np.array([0.99]), 2000)
    assert hi2[0] - lo2[0] < hi[0] - lo[0]
