"""Encoders: CAML CNN, a tiny locally built Hugging Face BERT (no downloads), timm when installed."""

import importlib.util

import numpy as np
import pytest
import torch

from argmaxable.multilabel.encoders import build_encoder
from argmaxable.multilabel.schema import EncoderConfig
from argmaxable.text import tokenize

TEXTS = ["Python bindings for libfoo2.0", "a text editor for the console", "python console editor"]


def test_cnn_features_are_max_pooled_tanh_in_the_unit_box():
    torch.manual_seed(0)
    enc = build_encoder(EncoderConfig(kind="cnn", embed_dim=8, filters=12, width=4, vocab_min_count=1), TEXTS)
    assert tokenize("Python bindings for libfoo2.0") == ["python", "bindings", "for", "libfoo2.0"]
    ids = enc.collate([{"text": t} for t in [*TEXTS, "unseen words only", ""]])
    assert ids.shape[0] == 5 and ids.shape[1] >= 4  # at least one filter width, even for empty text
    assert ids[3, 0] == enc.UNK and ids[4].eq(enc.PAD).all()
    feats = enc.eval()(ids)  # eval: no dropout
    assert feats.shape == (5, 12) and enc.dim == 12
    assert feats.abs().max() <= 1.0 == enc.feature_bound
    # Value oracle in numpy: zero-pad the embedded words by width // 2, slide the filters, tanh, max over positions.
    with torch.no_grad():
        E, K, c = enc.embed.weight.numpy(), enc.conv.weight.numpy(), enc.conv.bias.numpy()  # K: (filters, embed, w)
        got = feats.numpy()
    w = enc.width
    for row, text_ids in enumerate(ids.numpy()):
        x = np.pad(E[text_ids].T, ((0, 0), (w // 2, w // 2)))  # (embed, L + 2 (w // 2))
        windows = np.stack([x[:, t:t + w] for t in range(x.shape[1] - w + 1)])  # (positions, embed, w)
        expected = np.tanh(np.einsum("pew,few->pf", windows, K) + c).max(axis=0)
        np.testing.assert_allclose(got[row], expected, rtol=1e-5, atol=1e-6)


def test_cnn_dropout_zeroes_a_share_p_of_the_embeddings_and_rescales_the_rest():
    """In training the convolution sees each embedding entry zeroed with probability p = 0.2 and the others divided
    by 1 - p (inverted dropout, as torch's Dropout); in eval it sees the embeddings as they are."""
    torch.manual_seed(0)
    texts = [" ".join(f"w{i}" for i in range(j, j + 64)) for j in range(0, 640, 10)]  # 64 texts of 64 words
    enc = build_encoder(EncoderConfig(kind="cnn", embed_dim=16, filters=4, width=4, dropout=0.2,
                                      vocab_min_count=1, max_tokens=64), texts)
    seen = []
    enc.conv.register_forward_pre_hook(lambda module, args: seen.append(args[0].detach().transpose(1, 2)))
    ids = enc.collate([{"text": t} for t in texts])
    E = enc.embed.weight.detach()[ids]  # (B, L, embed): no entry is 0 (no padding in these texts)
    assert E.ne(0).all()
    enc.train()(ids)
    enc.eval()(ids)
    trained, evaluated = seen
    assert torch.equal(evaluated, E)
    zeroed = trained.eq(0)
    share = zeroed.double().mean().item()
    assert abs(share - 0.2) < 4 * (0.2 * 0.8 / E.numel()) ** 0.5  # 4 standard deviations of E.numel() draws
    torch.testing.assert_close(trained[~zeroed], E[~zeroed] / 0.8)
    enc.train()(ids)
    assert not torch.equal(seen[2], trained)  # a new mask for every batch


def test_cnn_tokenizes_each_text_once_and_collates_the_same_ids(monkeypatch):
    """Epochs collate the same texts: each is tokenized once, and a batch collated again (ids kept) equals the
    first one, which is the tokenizer's ids, truncated to max_tokens."""
    import argmaxable.multilabel.encoders as encoders

    enc = build_encoder(EncoderConfig(kind="cnn", embed_dim=8, filters=12, width=4, vocab_min_count=1,
                                      max_tokens=3), TEXTS)
    calls = []
    monkeypatch.setattr(encoders, "tokenize", lambda text: calls.append(text) or tokenize(text))
    rows = [{"text": t} for t in [*TEXTS, TEXTS[0]]]
    first = enc.collate(rows)
    again = enc.collate(rows[::-1])
    assert sorted(calls) == sorted(TEXTS)
    assert torch.equal(again, first.flip(0))
    expected = [[enc.vocab.get(w, enc.UNK) for w in tokenize(t)][:3] for t in TEXTS]
    assert first[:3, :3].tolist() == expected

def test_hf_encoder_uses_the_cls_state_of_a_local_model(tmp_path):
    from transformers import BertConfig, BertModel, BertTokenizerFast

    words = sorted({w for t in TEXTS for w in t.lower().split()})
    (tmp_path / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]) + "\n")
    BertTokenizerFast(vocab_file=str(tmp_path / "vocab.txt")).save_pretrained(tmp_path)
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=5 + len(words), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=32, max_position_embeddings=64)
    model = BertModel(cfg).eval()
    model.save_pretrained(tmp_path)
    enc = build_encoder(EncoderConfig(kind="hf", pretrained=str(tmp_path), max_tokens=32)).eval()
    batch = enc.collate([{"text": t} for t in TEXTS])
    assert enc.dim == 16 and batch["input_ids"][:, 0].eq(2).all()  # [CLS] first
    with torch.no_grad():
        feats = enc(batch)
        ref = model(**batch).last_hidden_state[:, 0]
    assert feats.shape == (3, 16)
    np.testing.assert_allclose(feats.numpy(), ref.numpy(), atol=1e-6)


@pytest.mark.skipif(importlib.util.find_spec("timm") is not None, reason="timm installed")
def test_timm_encoder_explains_the_optional_extra_when_missing():
    with pytest.raises(ImportError, match=r"argmaxable\[images\]"):
        build_encoder(EncoderConfig(kind="timm", pretrained="tresnet_l"))


@pytest.mark.skipif(importlib.util.find_spec("timm") is None, reason="timm is an optional extra (images)")
def test_timm_encoder_features(tmp_path):
    import timm
    from PIL import Image

    model = timm.create_model("resnet18", pretrained=False, num_classes=0)
    torch.save(model.state_dict(), tmp_path / "w.pth")
    Image.new("RGB", (40, 30), (200, 10, 10)).save(tmp_path / "a.jpg")
    enc = build_encoder(EncoderConfig(kind="timm", pretrained="resnet18", checkpoint=str(tmp_path / "w.pth"),
                                      image_size=64))
    feats = enc(enc.collate([{"image_path": str(tmp_path / "a.jpg")}]))
    assert feats.shape == (1, enc.dim)


@pytest.mark.skipif(importlib.util.find_spec("timm") is None, reason="timm is an optional extra (images)")
def test_a_shrunk_tresnet_replica_runs_at_the_shape_its_arch_names(tmp_path):
    # The rehearsal's OpenImages encoder: TResNet-L's family at one block a stage and a quarter width, written by
    # the stand-ins and loaded through the encoder with the same arch; the weights that run are the file's.
    from PIL import Image

    from argmaxable.multilabel.standins import write_tresnet

    arch = {"layers": [1, 1, 1, 1], "width_factor": 0.25}
    write_tresnet(tmp_path / "shrunk.pth", classes=10, arch=arch)
    saved = torch.load(tmp_path / "shrunk.pth", weights_only=True)["model"]
    Image.new("RGB", (40, 30), (200, 10, 10)).save(tmp_path / "a.jpg")
    enc = build_encoder(EncoderConfig(kind="timm", pretrained="tresnet_l", checkpoint=str(tmp_path / "shrunk.pth"),
                                      arch=arch, image_size=32)).eval()
    assert enc.dim == 512  # TResNet-L's own is 2432
    state = enc.model.state_dict()
    assert {k for k in saved if k in state} == set(state)  # every tensor that runs came from the file
    assert all(torch.equal(state[k], saved[k]) for k in state)
    with torch.no_grad():
        assert enc(enc.collate([{"image_path": str(tmp_path / "a.jpg")}])).shape == (1, 512)


def test_timm_encoder_refuses_a_named_checkpoint_that_is_missing(tmp_path):
    # Checked before timm is imported: a missing file never falls back to the hub's ImageNet weights.
    missing = tmp_path / "Open_ImagesV6_TRresNet_L_448.pth"
    with pytest.raises(FileNotFoundError, match=r"Open_ImagesV6_TRresNet_L_448\.pth not found") as err:
        build_encoder(EncoderConfig(kind="timm", pretrained="tresnet_l", checkpoint=str(missing)))
    assert "\n" not in str(err.value)


def test_image_collate_names_an_unreadable_image_in_one_line(tmp_path):
    from types import SimpleNamespace

    from PIL import Image

    from argmaxable.multilabel.encoders import TimmImageEncoder

    Image.new("RGB", (8, 8), (1, 2, 3)).save(tmp_path / "ok.jpg")
    (tmp_path / "broken.jpg").write_bytes(b"not a jpeg")
    # collate needs only the preprocessing settings, not timm's network (an optional extra)
    prep = SimpleNamespace(size=4, mean=torch.zeros(3, 1, 1), std=torch.ones(3, 1, 1))
    assert TimmImageEncoder.collate(prep, [{"image_path": str(tmp_path / "ok.jpg")}]).shape == (1, 3, 4, 4)
    for name in ("broken.jpg", "absent.jpg"):
        with pytest.raises(ValueError, match=rf"cannot read image .*{name}") as err:
            TimmImageEncoder.collate(prep, [{"image_path": str(tmp_path / name)}])
        assert "\n" not in str(err.value)


def test_unknown_encoder_kind_is_rejected():
    with pytest.raises(ValueError, match=r"encoder\.kind"):
        build_encoder(EncoderConfig(kind="rnn"))
