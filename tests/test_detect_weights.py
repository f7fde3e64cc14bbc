"""Reading output layers from weights files in the formats of the released models (Marian, Nematus, PyTorch,
safetensors), against the arrays the test wrote."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from argmaxable.detect.weights import WeightsError, load_layer

RNG = np.random.default_rng(0)
N, D = 7, 3
W0 = RNG.normal(size=(N, D)).astype(np.float32)
B0 = RNG.normal(size=N).astype(np.float32)


def marian_yml() -> np.ndarray:
    """Marian keeps its config inside the .npz as a char array under "special:model.yml"."""
    return np.frombuffer(b"type: transformer\ntied-embeddings-all: true\n", dtype=np.int8)


def test_nematus_tied_npz(tmp_path):
    """Nematus (Edinburgh WMT'17): Wemb is the *source* embedding; the output layer is Wemb_dec + ff_logit_b."""
    f = tmp_path / "model.l2r.ens1.npz"
    np.savez(f, Wemb=RNG.normal(size=(11, D)), Wemb_dec=W0, ff_logit_b=B0,
             ff_logit_lstm_W=RNG.normal(size=(5, D)), ff_logit_lstm_b=np.zeros(D))
    W, b = load_layer(f)
    np.testing.assert_array_equal(W, W0)
    np.testing.assert_array_equal(b, B0)


def test_nematus_untied_npz_is_transposed(tmp_path):
    f = tmp_path / "model.npz"
    np.savez(f, Wemb=RNG.normal(size=(11, D)), Wemb_dec=RNG.normal(size=(N, D)), ff_logit_W=W0.T, ff_logit_b=B0)
    W, b = load_layer(f)
    np.testing.assert_array_equal(W, W0)
    np.testing.assert_array_equal(b, B0)


def test_marian_tied_all_npz(tmp_path):
    """Marian (Bergamot, --tied-embeddings-all): Wemb with a (1, n) bias decoder_ff_logit_out_b."""
    f = tmp_path / "model.npz"
    np.savez(f, **{"Wemb": W0, "decoder_ff_logit_out_b": B0[None, :], "special:model.yml": marian_yml(),
                   "encoder_l1_self_Wq": RNG.normal(size=(D, D))})
    W, b = load_layer(f)
    np.testing.assert_array_equal(W, W0)
    np.testing.assert_array_equal(b, B0)


def test_marian_untied_output_layer_wins(tmp_path):
    f = tmp_path / "model.npz"
    np.savez(f, Wemb=RNG.normal(size=(N, D)), decoder_ff_logit_out_W=W0.T, decoder_ff_logit_out_b=B0[None, :])
    W, _ = load_layer(f)
    np.testing.assert_array_equal(W, W0)


def test_npy_bare_matrix(tmp_path):
    f = tmp_path / "W.npy"
    np.save(f, W0)
    W, b = load_layer(f)
    np.testing.assert_array_equal(W, W0)
    assert b is None


@pytest.mark.parametrize("nested", [False, True])
def test_torch_linear_state_dict(tmp_path, nested):
    layer = torch.nn.Linear(D, N)
    state = layer.state_dict()
    f = tmp_path / "head.pt"
    torch.save({"model": state} if nested else state, f)
    W, b = load_layer(f, *(("model.weight", "model.bias") if nested else ()))
    np.testing.assert_array_equal(W, layer.weight.detach().numpy())
    np.testing.assert_array_equal(b, layer.bias.detach().numpy())


def test_legacy_non_zip_checkpoint(tmp_path):
    """pytorch_model.bin files saved before torch 1.6 (early hub uploads) are not zip archives: no mmap."""
    f = tmp_path / "pytorch_model.bin"
    torch.save({"lm_head.weight": torch.from_numpy(W0), "final_logits_bias": torch.from_numpy(B0)[None]}, f,
               _use_new_zipfile_serialization=False)
    with pytest.raises(RuntimeError, match="mmap"):  # what the zip-only reader said before the fallback
        torch.load(f, weights_only=True, mmap=True)
    W, b = load_layer(f)
    np.testing.assert_array_equal(W, W0)
    np.testing.assert_array_equal(b, B0)


def test_torch_bfloat16_tensor(tmp_path):
    f = tmp_path / "W.pth"
    torch.save(torch.from_numpy(W0).bfloat16(), f)
    W, b = load_layer(f)
    assert W.dtype == np.float32 and b is None
    np.testing.assert_array_equal(W, torch.from_numpy(W0).bfloat16().float().numpy())


def test_safetensors_lm_head(tmp_path):
    f = tmp_path / "model.safetensors"
    save_file({"lm_head.weight": torch.from_numpy(W0), "transformer.ln_f.weight": torch.ones(D)}, str(f))
    W, b = load_layer(f)
    np.testing.assert_array_equal(W, W0)
    assert b is None


def test_explicit_keys_and_orientation_from_bias(tmp_path):
    f = tmp_path / "layer.npz"
    np.savez(f, proj=W0.T, offsets=B0, W=np.zeros((2, 2)))
    W, b = load_layer(f, weight_key="proj", bias_key="offsets")
    np.testing.assert_array_equal(W, W0)
    np.testing.assert_array_equal(b, B0)
    W, b = load_layer(f, weight_key="proj", no_bias=True)
    assert b is None and W.shape == (D, N)  # no bias to tell the orientation: taken as stored


def test_missing_key_lists_the_keys_found(tmp_path):
    f = tmp_path / "layer.npz"
    np.savez(f, alpha=W0, beta=B0)
    with pytest.raises(WeightsError, match=r"no weight key 'gamma'.*keys found: alpha, beta"):
        load_layer(f, weight_key="gamma")
    with pytest.raises(WeightsError, match=r"no bias key 'delta'.*keys found: alpha, beta"):
        load_layer(f, weight_key="alpha", bias_key="delta")


def test_no_known_key_asks_for_one(tmp_path):
    f = tmp_path / "layer.npz"
    np.savez(f, a=W0, b_=W0, c=B0)
    with pytest.raises(WeightsError, match="pass --weight-key"):
        load_layer(f)


@pytest.mark.parametrize("name", ["junk.npz", "junk.pt", "junk.safetensors", "junk.npy"])
def test_unreadable_files(tmp_path, name):
    f = tmp_path / name
    f.write_bytes(b"this is not a weights file")
    with pytest.raises(WeightsError, match=r"junk\.\w+'?: \S") as err:
        load_layer(f)
    assert "\n" not in str(err.value)


def test_missing_file_and_unknown_suffix(tmp_path):
    with pytest.raises(WeightsError, match="does not exist"):
        load_layer(tmp_path / "absent.npz")
    (tmp_path / "w.txt").write_text("1 2")
    with pytest.raises(WeightsError, match=r"unsupported weights file .* expected one of \.npz"):
        load_layer(tmp_path / "w.txt")


def test_bias_shape_mismatch(tmp_path):
    f = tmp_path / "layer.npz"
    np.savez(f, W=W0, b=np.zeros(N + 2))
    with pytest.raises(WeightsError, match="does not match weights"):
        load_layer(f)
