"""Model sources: tiny transformers models saved with save_pretrained and read back through our loader must
give exactly the model's own output layer; released .npz files by a path inside the model directory; every
model config of the paper experiment must name a known source with valid params."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import torch
import transformers
from safetensors.torch import load_file, save_file

from argmaxable.config import load_config
from argmaxable.detect.loaders import SOURCES, Layer, load_huggingface, load_model, load_random
from argmaxable.detect.weights import WeightsError

TINY = dict(vocab_size=53, hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16,
            max_position_embeddings=40)
SEQ2SEQ = dict(d_model=8, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2,
               encoder_ffn_dim=16, decoder_ffn_dim=16, max_position_embeddings=40)
MODELS = {
    "bert": lambda: transformers.BertForMaskedLM(transformers.BertConfig(**TINY)),
    "roberta": lambda: transformers.RobertaForMaskedLM(transformers.RobertaConfig(**TINY)),
    "xlm-roberta": lambda: transformers.XLMRobertaForMaskedLM(transformers.XLMRobertaConfig(**TINY)),
    "gpt2": lambda: transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=53, n_embd=8, n_layer=1, n_head=2, n_positions=40, bos_token_id=0, eos_token_id=0)),
    "marian": lambda: transformers.MarianMTModel(transformers.MarianConfig(
        vocab_size=53, pad_token_id=52, decoder_start_token_id=52, **SEQ2SEQ)),
    "fsmt": lambda: transformers.FSMTForConditionalGeneration(transformers.FSMTConfig(
        src_vocab_size=41, tgt_vocab_size=53, langs=["en", "de"], **SEQ2SEQ)),
}


def output_layer(model) -> tuple[np.ndarray, np.ndarray | None]:
    """The model's own logits layer as (W, b): probe it with hidden states (logits = x W^T + b)."""
    if isinstance(model, transformers.FSMTForConditionalGeneration):
        head = model.model.decoder.output_projection  # FSMT's logits layer (not get_output_embeddings)
    else:
        head = model.get_output_embeddings()
    d = head.weight.shape[1]
    with torch.no_grad():
        probe = torch.cat([torch.zeros(1, d), torch.eye(d)])  # (1 + d, d)
        logits = head(probe) + getattr(model, "final_logits_bias", torch.zeros(1))  # (1 + d, n)
    b = logits[0].numpy()
    W = (logits[1:] - logits[0]).T.numpy()  # (n, d)
    return W, (b if np.any(b) else None)


def saved(kind: str, path, **kwargs):
    torch.manual_seed(0)
    model = MODELS[kind]().eval()
    with torch.no_grad():  # non-zero biases, so that a missed bias term would show
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.uniform_(-1, 1)
        if hasattr(model, "final_logits_bias"):
            model.final_logits_bias.uniform_(-1, 1)
    model.save_pretrained(path, **kwargs)
    return model


@pytest.mark.parametrize("kind", list(MODELS))
def test_huggingface_layer_equals_the_models_output_layer(tmp_path, kind):
    model = saved(kind, tmp_path)
    W_ref, b_ref = output_layer(model)
    layer = load_huggingface(str(tmp_path))
    np.testing.assert_allclose(layer.W, W_ref, atol=1e-6)
    if b_ref is None:
        assert layer.b is None
    else:
        np.testing.assert_allclose(layer.b, b_ref, atol=1e-6)
    assert kind not in ("gpt2", "fsmt") or layer.b is None  # ACL 2022 Table 1: FAIR models have no softmax bias


def test_huggingface_sharded_checkpoint(tmp_path):
    model = saved("marian", tmp_path, max_shard_size="1KB")
    assert (tmp_path / "model.safetensors.index.json").is_file()
    W_ref, b_ref = output_layer(model)
    layer = load_huggingface(str(tmp_path))
    np.testing.assert_allclose(layer.W, W_ref, atol=1e-6)
    np.testing.assert_allclose(layer.b, b_ref, atol=1e-6)


def test_huggingface_legacy_names_and_pickle_checkpoint(tmp_path):
    """The original gpt2 checkpoint stores names without the "transformer." prefix, as a pytorch_model.bin."""
    model = saved("gpt2", tmp_path)
    state = load_file(str(tmp_path / "model.safetensors"))
    (tmp_path / "model.safetensors").unlink()
    torch.save({k.removeprefix("transformer."): v for k, v in state.items()}, tmp_path / "pytorch_model.bin")
    layer = load_huggingface(str(tmp_path))
    np.testing.assert_allclose(layer.W, output_layer(model)[0], atol=1e-6)


def test_huggingface_errors(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(WeightsError, match=r"no config\.json"):
        load_huggingface(str(tmp_path / "empty"))
    saved("gpt2", tmp_path / "m")
    state = load_file(str(tmp_path / "m" / "model.safetensors"))
    save_file({k: v for k, v in state.items() if "wte" not in k}, str(tmp_path / "m" / "model.safetensors"))
    with pytest.raises(WeightsError, match=r"none of \['transformer.wte.weight'"):
        load_huggingface(str(tmp_path / "m"))


def test_random_layer():
    layer = load_random(1000, 4, "uniform", bias=True, seed=3)
    assert layer.W.shape == (1000, 4) and layer.b.shape == (1000,)
    assert -1 <= layer.W.min() < -0.99 and 0.99 < layer.W.max() <= 1  # U(-1, 1), ACL 2022 Fig. 10
    np.testing.assert_array_equal(layer.W, load_random(1000, 4, "uniform", True, 3).W)
    gauss = load_random(20000, 2, "gaussian", bias=False, seed=0)
    assert gauss.b is None and abs(gauss.W.std() - 1) < 0.02
    with pytest.raises(WeightsError, match="'dist' must be one of"):
        load_random(3, 2, "cauchy")


def nematus(path) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1)
    W, b = rng.normal(size=(9, 4)), rng.normal(size=9)
    np.savez(path, Wemb=rng.normal(size=(6, 4)), Wemb_dec=W, ff_logit_b=b)
    return W, b


def test_npz_source_reads_relative_paths_inside_the_model_directory(tmp_path):
    W, b = nematus(tmp_path / "model.npz")
    (tmp_path / "vocab.en.json").write_text('{"eos": 0, "UNK": 1, "the": 2}')
    model = {"name": "x", "source": "npz", "params": {"path": "model.npz", "vocab": "vocab.en.json"},
             "activation": "tanh"}
    layer = load_model(model, root=tmp_path)
    np.testing.assert_array_equal(layer.W, W)
    np.testing.assert_array_equal(layer.b, b)
    assert layer.tokens == ["eos", "UNK", "the"] + [""] * 6  # ids the vocabulary lacks are ""
    assert layer.activation == "tanh" and tmp_path / "vocab.en.json" in layer.files
    with pytest.raises(WeightsError, match="does not exist"):
        load_model(model, root=tmp_path / "elsewhere")


def test_tokens_a_loader_found_are_kept_unless_vocab_is_named(tmp_path, monkeypatch):
    (tmp_path / "vocab.json").write_text('{"x": 0, "y": 1}')
    fake = lambda path: Layer(np.eye(2), None, "fake", [tmp_path / path], tokens=["a", "b"])  # noqa: E731
    monkeypatch.setitem(SOURCES, "fake", fake)
    assert load_model({"name": "f", "source": "fake", "params": {"path": "w"}}, root=tmp_path).tokens == ["a", "b"]
    named = {"name": "f", "source": "fake", "params": {"path": "w", "vocab": "vocab.json"}}
    assert load_model(named, root=tmp_path).tokens == ["x", "y"]


def test_load_model_rejects_bad_configs():
    with pytest.raises(WeightsError, match=r"unknown source 'hub'; use one of \['file', 'gguf', 'huggingface'"):
        load_model({"name": "m", "source": "hub", "params": {}})
    with pytest.raises(WeightsError, match=r"bad params for source 'random'.*accepted: n, d, dist, bias, seed"):
        load_model({"name": "m", "source": "random", "params": {"n": 3, "dims": 2}})
    with pytest.raises(WeightsError, match=r"not a \.npz file"):
        load_model({"name": "m", "source": "npz", "params": {"path": "model.bin"}})


def test_every_paper_model_config_names_a_loader():
    """ACL 2022 checks 7 LMs and 143 MT models (Table 1; 24 distinct Bergamot rows): 149 configs, all loadable;
    Basri & Jacobs' Fig. 1 adds four trained heads (GPT-2 is among the ACL paper's)."""
    models = load_config(["experiment=paper"]).model
    tables = [m.paper.table for m in models.values()]
    assert {t: tables.count(t) for t in set(tables)} == {
        "002 Table 4": 7, "002 Table 5": 32, "002 Table 6": 4, "002 Table 7": 24, "002 Table 8": 82, "004 Fig. 1": 4}
    for key, m in models.items():
        assert m.source in SOURCES, key
        inspect.signature(SOURCES[m.source]).bind(**m.params)
        assert m.download.kind == {"huggingface": "huggingface", "npz": "url"}[m.source], key
        assert m.download.repo or m.download.url.startswith("https://"), key
        assert m.source != "npz" or m.download.url.endswith(".npz"), key  # never an archive of 8-bit models
        if m.download.kind == "huggingface":
            assert m.download.revision and "config.json" in m.download.allow_patterns, key
    # the paper's target-script filter (ACL 2022 §4.2) applies to the OPUS-MT and WMT'19 models, by target language
    scripts = {key: m.script for key, m in models.items() if m.script}
    assert len(scripts) == 36
    assert scripts["opus_mt_ar_el"] == "GREEK" and scripts["wmt19_en_ru"] == "CYRILLIC"
    assert scripts["opus_mt_bg_en"] == "LATIN" and scripts["opus_mt_fr_he"] == "HEBREW"
    assert len({m.name for m in models.values()}) == len(models)
