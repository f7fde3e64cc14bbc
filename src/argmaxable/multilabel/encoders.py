"""Feature encoders that feed the multi-label heads (thesis §4.1.2, Table A.4).

- ``cnn``: the CAML convolutional encoder (Mullenbach et al. 2018) trained from scratch: word embedding,
  dropout, one Conv1d, tanh, max-pool over time. Its features lie in [-1, 1].
- ``hf``: a Hugging Face text encoder (PubMedBERT for BioASQ); the feature is the final [CLS] state.
- ``timm``: a timm image encoder (TResNet-L for OpenImages); timm is an optional extra, imported lazily.

Every encoder exposes ``dim`` (e), ``feature_bound`` (box half-width over its features for the encoder-space
verification) and ``collate(rows) -> inputs`` that turns dataset rows into a batch for ``forward``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from argmaxable.multilabel.schema import ENCODERS, EncoderConfig
from argmaxable.text import tokenize


class CNNEncoder(nn.Module):
    """CAML encoder: Embedding -> Dropout -> Conv1d(width, filters) -> tanh -> max-pool over time.

    A text's token ids are made once and kept (up to :data:`CACHED_TEXTS` texts): every epoch collates the same
    training texts, and collating them from their text was about a sixth of the offline default's training time
    (benchmarks/RESULTS.md)."""

    PAD, UNK = 0, 1
    CACHED_TEXTS = 1 << 17  # texts whose ids are kept (at most max_tokens ids each): 10k-100k-text splits whole

    def __init__(self, cfg: EncoderConfig, train_texts: Sequence[str]):
        super().__init__()
        counts = Counter(tok for text in train_texts for tok in tokenize(text))
        kept = sorted((w for w, c in counts.items() if c >= cfg.vocab_min_count), key=lambda w: (-counts[w], w))
        self.vocab = {w: i + 2 for i, w in enumerate(kept[: cfg.vocab_max_size])}
        self.max_tokens, self.width = cfg.max_tokens, cfg.width
        self.dim, self.feature_bound = cfg.filters, cfg.feature_bound
        self.embed = nn.Embedding(len(self.vocab) + 2, cfg.embed_dim, padding_idx=self.PAD)
        self.dropout = cfg.dropout  # of the embeddings, while training
        self.conv = nn.Conv1d(cfg.embed_dim, cfg.filters, cfg.width, padding=cfg.width // 2)
        nn.init.xavier_uniform_(self.conv.weight)  # CAML's initialisation of the convolution
        self._ids: dict[str, torch.Tensor] = {}

    def token_ids(self, text: str) -> torch.Tensor:
        """The first ``max_tokens`` token ids of ``text`` (unknown words: UNK), int64."""
        ids = self._ids.get(text)
        if ids is None:
            ids = torch.tensor([self.vocab.get(t, self.UNK) for t in tokenize(text)][: self.max_tokens],
                               dtype=torch.long)
            if len(self._ids) < self.CACHED_TEXTS:
                self._ids[text] = ids
        return ids

    def collate(self, rows: Sequence[dict[str, Any]]) -> torch.Tensor:
        """The rows' token ids padded to the longest (at least the filter width): (B, L) int64."""
        batch = nn.utils.rnn.pad_sequence([self.token_ids(r["text"]) for r in rows], batch_first=True,
                                          padding_value=self.PAD)
        return nn.functional.pad(batch, (0, max(self.width - batch.shape[1], 0)), value=self.PAD)  # (B, L)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.embed(ids)  # (B, L, embed)
        if self.training:  # dropout's mask from uniform draws: half the time of Dropout's Bernoulli ones on CPU
            h = h * (torch.rand_like(h) >= self.dropout) / (1 - self.dropout)
        # tanh is increasing, so the max over time before it is the max after it, at 1/L of its cost
        return torch.tanh(self.conv(h.transpose(1, 2)).amax(dim=2))  # (B, filters)


class HFTextEncoder(nn.Module):
    """A Hugging Face encoder (e.g. PubMedBERT); the feature is the last layer's [CLS] state."""

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        from transformers import AutoModel, AutoTokenizer

        if not cfg.pretrained:
            raise ValueError("encoder kind 'hf' needs encoder.pretrained (a hub name or a local directory)")
        self.tokenizer = AutoTokenizer.from_pretrained(cfg.pretrained)
        self.model = AutoModel.from_pretrained(cfg.pretrained)
        for key, value in cfg.arch.items():  # the shape the config names is the one that runs
            if getattr(self.model.config, key, None) != value:
                raise ValueError(f"encoder.arch.{key} is {value!r} but the model in {cfg.pretrained} has "
                                 f"{getattr(self.model.config, key, None)!r}; point encoder.pretrained at a model of "
                                 "that shape (the rehearsal's: python -m argmaxable.multilabel.standins) or fix "
                                 "encoder.arch")
        self.max_tokens = min(cfg.max_tokens, 512)  # BERT's context: first 512 subwords (thesis A.6.1)
        self.dim, self.feature_bound = self.model.config.hidden_size, cfg.feature_bound

    def collate(self, rows: Sequence[dict[str, Any]]) -> dict[str, torch.Tensor]:
        return dict(self.tokenizer([r["text"] for r in rows], truncation=True, max_length=self.max_tokens,
                                   padding=True, return_tensors="pt"))

    def forward(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.model(**inputs).last_hidden_state[:, 0]  # (B, hidden)


class TimmImageEncoder(nn.Module):
    """A timm image encoder (e.g. TResNet-L) without its classifier; images resized to a square."""

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        # An empty checkpoint means the hub's ImageNet weights, chosen explicitly; a named one must exist.
        if cfg.checkpoint and not Path(cfg.checkpoint).is_file():
            raise FileNotFoundError(
                f"encoder checkpoint {cfg.checkpoint} not found; fetch it (rule download_dataset) or set "
                "encoder.checkpoint='' to train from the hub's ImageNet weights"
            )
        try:
            import timm
        except ImportError:
            raise ImportError(
                "encoder kind 'timm' needs the optional extra: pip install 'argmaxable[images]'"
            ) from None
        if not cfg.pretrained:
            raise ValueError("encoder kind 'timm' needs encoder.pretrained (a timm model name)")
        overlay = {"file": cfg.checkpoint} if cfg.checkpoint else None
        self.model = timm.create_model(cfg.pretrained, pretrained=True, num_classes=0,
                                       pretrained_cfg_overlay=overlay, **cfg.arch)
        data = timm.data.resolve_data_config({}, model=self.model)
        self.mean = torch.tensor(data["mean"]).view(3, 1, 1)
        self.std = torch.tensor(data["std"]).view(3, 1, 1)
        self.size, self.dim, self.feature_bound = cfg.image_size, self.model.num_features, cfg.feature_bound

    def collate(self, rows: Sequence[dict[str, Any]]) -> torch.Tensor:
        import numpy as np
        from PIL import Image

        images = []
        for r in rows:
            try:
                with Image.open(r["image_path"]) as im:
                    arr = np.asarray(im.convert("RGB").resize((self.size, self.size)), dtype=np.float32) / 255
            except OSError as err:  # missing, truncated or not an image (PIL's UnidentifiedImageError)
                raise ValueError(f"cannot read image {r['image_path']}: {err.__class__.__name__}; fetch it again "
                                 "(rule download_dataset) or rebuild the dataset") from None
            images.append((torch.from_numpy(arr).permute(2, 0, 1) - self.mean) / self.std)  # (3, H, W)
        return torch.stack(images)  # (B, 3, H, W)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.model(images)  # (B, num_features)


def build_encoder(cfg: EncoderConfig, train_texts: Sequence[str] = ()) -> nn.Module:
    """Build the encoder named by ``cfg.kind``; the CNN builds its vocabulary from ``train_texts``."""
    if cfg.kind == "cnn":
        return CNNEncoder(cfg, train_texts)
    if cfg.kind == "hf":
        return HFTextEncoder(cfg)
    if cfg.kind == "timm":
        return TimmImageEncoder(cfg)
    raise ValueError(f"multilabel encoder.kind must be one of {ENCODERS}; got {cfg.kind!r}")
