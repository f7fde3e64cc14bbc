"""The settings of a check: one frozen value, its rules declared once, shared with the detection config."""

from __future__ import annotations

import inspect
from pathlib import Path

import numpy as np
import pytest
import yaml

import argmaxable as am
from argmaxable.config import ConfigError, load_config
from argmaxable.core.settings import ALLOWED, Settings

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(("name", "value", "message"), [
    ("bound", 0.0, "The 'bound' parameter must be a positive number. Got 0.0 instead."),
    ("bound", np.float64(np.inf), "The 'bound' parameter must be a positive number. Got inf instead."),
    ("bound", "1", "The 'bound' parameter must be a number. Got '1' (str)."),
    ("eps", -1e-9, "The 'eps' parameter must be a non-negative number. Got -1e-09 instead."),
    ("patience", 2.5, "The 'patience' parameter must be a non-negative integer. Got 2.5 (float) instead."),
    ("patience", True, "The 'patience' parameter must be a non-negative integer. Got True (bool) instead."),
    ("solver", "cplex", "The 'solver' parameter must be one of ('highs', 'gurobi'). Got 'cplex' instead."),
    ("workers", np.int64(0), "The 'workers' parameter must be a positive integer. Got 0 (int64) instead."),
])
def test_a_broken_setting_is_one_line_naming_it(name, value, message):
    with pytest.raises(ValueError) as err:
        Settings(**{name: value})
    assert str(err.value) == message


def test_settings_are_frozen_and_accept_numpy_values():
    s = Settings(bound=np.float32(5.0), patience=np.int64(3), workers=np.int32(1))
    with pytest.raises(AttributeError):
        s.eps = 1.0  # type: ignore[misc]
    box = (np.array([-5.0, 0.0]), np.array([5.0, 5.0]))
    assert s.record(box) == {"bound": 5.0, "lower": [-5.0, 0.0], "upper": [5.0, 5.0], "eps": 1e-8,
                             "patience": 3, "solver": "highs", "exact_radius": False}
    assert Settings(regions=True).record(box)["regions"] is True  # recorded where asked (older records lack it)


def test_the_public_checks_keep_their_defaults():
    """The defaults users rely on (002 §4, thesis §4.2), now stated once in argmaxable.core.settings."""
    defaults = {f.__name__: {k: p.default for k, p in inspect.signature(f).parameters.items()
                             if p.default is not inspect.Parameter.empty}
                for f in (am.check_categories, am.check_assignments, am.check_top_m)}
    shared = {"lower": None, "upper": None, "eps": 1e-8, "solver": "highs", "workers": 2, "progress": False,
              "exact_radius": False, "regions": False}
    assert defaults["check_categories"] == {"items": None, "b": None, "bound": 100.0, "patience": 2500,
                                            "device": "auto", "starts": None, "lp_rounds": None, **shared}
    assert defaults["check_assignments"] == {"b": None, "bound": 1e4, "patience": 100, "proposals": None,
                                             "proposal_rows": None, **shared}
    assert defaults["check_top_m"] == {"b": None, "bound": 100.0, "patience": 100, **shared}


def test_detection_config_shares_the_checks_defaults_and_rules():
    code = Settings()
    written = yaml.safe_load((REPO / "config" / "detect" / "default.yaml").read_text())
    root = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    assert written["bound"] == "${box.categories}" and root["box"]["categories"] == code.bound  # the one box
    for name in ALLOWED:
        assert name == "bound" or written[name] == getattr(code, name), name
        # the experiments give each model's job one core (docs/pipeline.md); every other setting is the core's
        assert name == "workers" or load_config().detect[name] == getattr(code, name), name
    assert load_config().detect.workers == load_config(["experiment=paper"]).detect.workers == 1


@pytest.mark.parametrize(("override", "message"), [
    ("detect.patience=2.5", "detect.patience"),  # the core refuses a fractional patience, so does the config
    ("detect.patience=-1", "detect.patience=-1: must be an integer >= 0"),
])
def test_config_patience_is_a_non_negative_integer_as_in_the_core(override, message):
    with pytest.raises(ConfigError, match=message):
        load_config([override])
