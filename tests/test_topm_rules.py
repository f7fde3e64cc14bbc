"""Config composition of the top-m group (tests/test_notebooks.py runs every rule function on a tiny tree)."""

import pytest

from argmaxable.config import ConfigError, load_config


def test_topm_config_composes():
    offline, paper = load_config([]), load_config(["experiment=paper"])
    for cfg in (offline, paper):
        assert cfg.topm.prescribed.eps_ratio == 0.05 and cfg.topm.prescribed.delta == 0.1  # 004 §6
        assert set(cfg.topm.fraction.models) <= set(cfg.model)  # every trained matrix has a model config
    assert paper.topm.scaling.N == 32000 and max(paper.topm.scaling.d_values) == 2050  # 004 Fig. 3
    assert {"gpt2", "gpt2_xl", "tinyllama", "t5_large", "llama2_7b"} == set(paper.topm.fraction.models)


def test_unknown_topm_key_fails():
    with pytest.raises(ConfigError, match=r"topm\.check\.nope"):
        load_config(["+topm.check.nope=1"])
