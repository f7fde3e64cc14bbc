"""Config composition of the top-m group and Figs 4/6 on a tiny causal LM (tests/test_notebooks.py runs the
other rule functions on a tiny tree)."""

import numpy as np
import pandas as pd
import pytest
import torch

from argmaxable.config import ConfigError, load_config
from argmaxable.topm.natural import help_texts, read_tops, run_natural, run_predict

CHECK = {"bound": 100.0, "eps": 1e-8, "patience": 0, "solver": "highs", "workers": 1, "exact_radius": True}


def test_topm_config_composes():
    offline, paper = load_config([]), load_config(["experiment=paper"])
    for cfg in (offline, paper):
        assert cfg.topm.prescribed.eps_ratio == 0.05 and cfg.topm.prescribed.delta == 0.1  # Basri & Jacobs §6
        assert set(cfg.topm.fraction.models) <= set(cfg.model)  # every trained matrix has a model config
    assert paper.topm.scaling.N == 32000 and max(paper.topm.scaling.d_values) == 2050  # Basri & Jacobs Fig. 3
    assert {"gpt2", "gpt2_xl", "tinyllama", "t5_large", "llama2_7b"} == set(paper.topm.fraction.models)


def test_unknown_topm_key_fails():
    with pytest.raises(ConfigError, match=r"topm\.check\.nope"):
        load_config(["+topm.check.nope=1"])


@pytest.mark.parametrize(("override", "key"), [("topm.prescribed.delta=1.5", "topm.prescribed.delta"),
                                               ("topm.fraction.trials=0", "topm.fraction.trials")])
def test_bad_topm_value_fails(override, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        load_config([override])


def _tiny_causal_lm(path):
    """A 1-layer GPT-2 with a word-level tokenizer, saved in the Hugging Face format the loaders read."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    words = sorted(set(help_texts(["assert", "if"])[0].split() + help_texts(["if"])[0].split()))
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(["[UNK]", *words])}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]").save_pretrained(path)
    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=len(words) + 1, n_positions=64, n_embd=8, n_layer=1, n_head=2)
    GPT2LMHeadModel(cfg).save_pretrained(path)


def test_natural_probabilities_on_a_tiny_causal_lm(tmp_path):
    lm = tmp_path / "lm"
    _tiny_causal_lm(lm)
    settings = {"natural": {"texts": ["assert", "if"], "top": 50, "max_tokens": 40, "cumulative_m": [1, 10, 50]},
                "fraction": {"m_values": [1, 2, 4], "trials": 3}, "check": CHECK,
                "prescribed": {"eps_ratio": 0.05, "delta": 0.1, "low": 0.1, "high": 1.1}}
    model = {"name": "tiny-lm", "source": "huggingface", "params": {"repo": "."}}
    run_predict(settings, model, str(lm), str(tmp_path / "top.npz"))
    tops = read_tops(tmp_path / "top.npz")
    assert [t.shape for t in tops] == [(40, 50), (40, 50)]
    assert np.all(np.diff(tops[0], axis=1) <= 0) and np.all(tops[0].sum(axis=1) <= 1 + 1e-9)
    out = {"cumulative": tmp_path / "cum.parquet", "curves": tmp_path / "nat.parquet", "figure": tmp_path / "n.png"}
    run_natural(settings, "tiny-lm", model, str(lm), str(tmp_path / "top.npz"), out, seed=0)
    cum = pd.read_parquet(out["cumulative"])
    assert cum["mean"].is_monotonic_increasing and cum["mean"].iloc[-1] <= 1 + 1e-9
    curves = pd.read_parquet(out["curves"])
    assert set(curves["test"]) == {"prescribed, natural", "prescribed, uniform"}


def test_window_lm_reads_its_heldout_descriptions(tmp_path):
    import json

    from safetensors.torch import save_file

    from argmaxable.lm.model import WindowLM
    from argmaxable.topm.natural import window_lm_top_probabilities

    tokens = ["<eos>", "<unk>", "the", "a", "package", "for", "and", "library"]  # 0 = <eos>, as lm.corpus pads
    torch.manual_seed(0)
    model = WindowLM(n=len(tokens), context=2, embed_dim=3, hidden=5, d=2, activation="gelu")
    save_file(model.state_dict(), str(tmp_path / "lm.safetensors"))
    (tmp_path / "train.json").write_text(json.dumps({"n": len(tokens), "d": 2, "heldout_split": "test", "settings": {
        "context": 2, "embed_dim": 3, "hidden": 5, "activation": "gelu"}}))
    tops = window_lm_top_probabilities(tmp_path, tokens, 3, top=4, max_tokens=30)
    assert [t.shape for t in tops] == [(30, 4)] * 3
    assert np.all(np.diff(tops[1], axis=1) <= 0) and np.all(tops[1].sum(axis=1) < 1)
