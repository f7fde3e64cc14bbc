"""Train the small language model of one bottleneck width d and save its head like a released model.

Rule ``build_lm_vocab`` writes the vocabulary once (:func:`make_vocab`); rule ``train_lm`` runs
:func:`train_lm` per d. Each run writes, in its model directory (the ``download: {kind: trained, path}`` of
the model config ``debtags_lm_d{d}``):

- ``head.safetensors``: ``weight`` (n, d) and ``bias`` (n,), float32: the softmax layer that is checked;
- ``vocab.txt``: row i's token on line i, the vocabulary file :func:`argmaxable.detect.loaders.load_model` reads
  (tokens never hold whitespace);
- ``lm.safetensors``: the whole model (to run it again over text);
- ``train.json``: settings, loss curve, held-out loss and perplexity, seconds;

and, beside it, the percentiles of the head's inputs over the held-out split (ACL 2022 Table 9 / thesis
Table A.3, measured on this model instead of the paper's OPUS models).
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import nn

from argmaxable.lm.corpus import UNK, build_vocab, encode, windows
from argmaxable.lm.model import WindowLM
from argmaxable.lm.schema import HEAD_KEY, MODEL_KEY, LMConfig
from argmaxable.multilabel.datasets.debtags import load_snapshot
from argmaxable.provenance import atomic_path, write_json, write_table
from argmaxable.rules import typed

log = logging.getLogger(__name__)

EVAL_BATCH = 8192  # held-out positions per forward pass (memory: 8192 x n logits)
LOG_EVERY = 0.1  # log and record the training loss every tenth of the run


def descriptions(split: str) -> list[str]:
    """The debtags snapshot's package texts of one split (``train``, ``dev`` or ``test``)."""
    df = load_snapshot()
    if split not in set(df["split"]):
        raise ValueError(f"debtags snapshot has no split {split!r}; use one of {sorted(set(df['split']))}")
    return df.loc[df["split"] == split, "text"].tolist()


def make_vocab(out_path: str | os.PathLike, cfg: LMConfig | Mapping, *, config: Any = None) -> pd.DataFrame:
    """Build the vocabulary from the snapshot's training split and write it (token, count, rank)."""
    cfg = typed(LMConfig, cfg)
    vocab = build_vocab(descriptions("train"), cfg.vocab_size)
    write_table(vocab, out_path, config=config, vocab_size=cfg.vocab_size)
    return vocab


def percentile_columns(percentiles: Sequence[float]) -> list[str]:
    """Column names of percentiles: 0 -> ``min``, 100 -> ``max``, q -> ``p{q}``."""
    return ["min" if q == 0 else "max" if q == 100 else f"p{q:g}" for q in percentiles]


def activation_percentiles(x: np.ndarray, percentiles: Sequence[float]) -> pd.DataFrame:
    """Percentiles of the head's inputs: per coordinate, over all coordinates, and of each position's extremes.

    Parameters
    ----------
    x : numpy.ndarray, shape (N, d)
        The head's inputs at N positions.
    percentiles : sequence of float
        In [0, 100].

    Returns
    -------
    pandas.DataFrame
        Rows ``x_0`` ... ``x_{d-1}``, ``all coordinates``, ``min over coordinates`` and ``max over coordinates``
        (the per-position extremes whose ranges ACL 2022 Table 9 reports); columns ``quantity``, ``values`` and
        one per percentile (:func:`percentile_columns`).

    Examples
    --------
    >>> x = np.array([[0.0, 1.0], [2.0, 3.0]])
    >>> activation_percentiles(x, [0, 100])[["quantity", "min", "max"]].values.tolist()[-3:]
    [['all coordinates', 0.0, 3.0], ['min over coordinates', 0.0, 2.0], ['max over coordinates', 1.0, 3.0]]
    """
    q = np.asarray(percentiles, dtype=float)
    series = {f"x_{j}": x[:, j] for j in range(x.shape[1])}
    series |= {"all coordinates": x.ravel(), "min over coordinates": x.min(axis=1),
               "max over coordinates": x.max(axis=1)}
    rows = [[name, v.size, *np.percentile(v.astype(np.float64), q)] for name, v in series.items()]
    return pd.DataFrame(rows, columns=["quantity", "values", *percentile_columns(percentiles)])


def _save_safetensors(tensors: dict[str, torch.Tensor], path: Path) -> None:
    from safetensors.torch import save_file

    with atomic_path(path) as tmp:
        save_file({k: v.detach().contiguous() for k, v in tensors.items()}, str(tmp))


@torch.no_grad()
def _heldout(model: WindowLM, ctx: torch.Tensor, target: torch.Tensor) -> tuple[float, np.ndarray]:
    """Mean cross-entropy (nats per token) over held-out positions, and the head's inputs there (N, d)."""
    total, feats = 0.0, []
    for start in range(0, len(target), EVAL_BATCH):
        x = model.features(ctx[start:start + EVAL_BATCH])  # (B, d)
        total += nn.functional.cross_entropy(model.head(x), target[start:start + EVAL_BATCH], reduction="sum").item()
        feats.append(x.numpy())
    return total / len(target), np.concatenate(feats)


def train_lm(vocab_path: str | os.PathLike, out_dir: str | os.PathLike, activations_path: str | os.PathLike,
             *, d: int, cfg: LMConfig | Mapping, head: str = "linear", texts: Mapping[str, Sequence[str]] | None = None,
             config: Any = None) -> dict[str, Any]:
    """Train the window LM of width ``d``; save its head, tokens, weights, metrics and activation percentiles.

    Parameters
    ----------
    vocab_path : path
        The vocabulary table of :func:`make_vocab`.
    out_dir : path
        Model directory (created): ``head.safetensors``, ``vocab.txt``, ``lm.safetensors``, ``train.json``.
    activations_path : path
        Table of :func:`activation_percentiles` over the held-out split (.parquet/.csv).
    d : int
        Bottleneck width.
    cfg : LMConfig or mapping
        The ``lm`` config (:class:`argmaxable.lm.schema.LMConfig`).
    head : str, default "linear"
        The softmax head (:data:`argmaxable.lm.schema.HEADS`); another than ``linear`` is run ``HEAD_KEY``.
    texts : mapping, optional
        ``{"train": [...], "heldout": [...]}`` texts instead of the snapshot's splits (tests).
    config : any
        The composed config, stored in the provenance records.

    Returns
    -------
    dict
        The record written to ``train.json``.
    """
    start_time, start_cpu = time.perf_counter(), time.process_time()
    cfg = typed(LMConfig, cfg)
    torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    tokens, streams = _windows(vocab_path, texts, cfg)
    ctx, target = (torch.from_numpy(a) for a in streams["train"])  # (N, context), (N,)

    # 1. model (drawn from torch's seeded global generator), then training on random windows
    model = WindowLM(len(tokens), cfg.context, cfg.embed_dim, cfg.hidden, d, cfg.activation, head)
    steps, curve = _train(model, ctx, target, cfg, d)

    # 2. held-out loss and the head's inputs there
    heldout, feats = _evaluate(model, streams["heldout"], tokens, cfg, d)

    # 3. save: the head as a released model would ship it, the whole model, activation ranges, metrics
    key = MODEL_KEY.format(d=d) if head == "linear" else HEAD_KEY.format(head=head, d=d)
    _save_model(model, tokens, Path(out_dir), float32=head == "linear")
    _write_activations(feats, key, activations_path, cfg, inputs=[vocab_path], config=config)
    record = {
        "model": key, "head": head, "d": d,
        "k": getattr(model.head, "k", None), "n": len(tokens),  # k: a DFT head's guaranteed ranking length
        "activation": cfg.activation, "parameters": sum(p.numel() for p in model.parameters()),
        "head_parameters": sum(p.numel() for p in model.head.parameters()),
        "train_tokens": steps * cfg.batch_size, "train_positions": len(target),
        **heldout, "curve": curve,
        "seconds": round(time.perf_counter() - start_time, 1),
        "cpu_seconds": round(time.process_time() - start_cpu, 1),  # comparable across busy and idle machines
        "settings": asdict(cfg),
    }
    write_json(record, Path(out_dir) / "train.json")
    return record


def _windows(vocab_path: str | os.PathLike, texts: Mapping[str, Sequence[str]] | None,
             cfg: LMConfig) -> tuple[list[str], dict[str, tuple[np.ndarray, np.ndarray]]]:
    """The vocabulary's tokens and the (context, target) windows of the training and held-out texts."""
    tokens = pd.read_parquet(vocab_path)["token"].tolist()
    if texts is None:
        texts = {"train": descriptions("train"), "heldout": descriptions(cfg.heldout_split)}
    return tokens, {split: windows(encode(texts[split], tokens), cfg.context) for split in ("train", "heldout")}


def _write_activations(feats: np.ndarray, key: str, path: str | os.PathLike, cfg: LMConfig, *, inputs: list,
                       config: Any) -> None:
    """Write the percentiles of the head's held-out inputs (:func:`activation_percentiles`) of model ``key``."""
    stats = activation_percentiles(feats, cfg.percentiles)
    stats.insert(0, "model", key)
    write_table(stats, path, config=config, inputs=inputs, heldout_split=cfg.heldout_split)


def _evaluate(model: WindowLM, stream: tuple[np.ndarray, np.ndarray], tokens: list[str], cfg: LMConfig,
              d: int) -> tuple[dict[str, Any], np.ndarray]:
    """The held-out fields of ``train.json`` and the head's inputs at the held-out positions (N, d)."""
    model.eval()
    hctx, htarget = (torch.from_numpy(a) for a in stream)
    loss, feats = _heldout(model, hctx, htarget)
    log.info("d=%d held-out loss %.4f perplexity %.1f", d, loss, math.exp(loss))
    return {
        "heldout_split": cfg.heldout_split,
        "heldout_tokens": len(htarget),
        "heldout_unk_rate": float((htarget == tokens.index(UNK)).float().mean()),
        "heldout_loss": loss,
        "heldout_perplexity": math.exp(loss),
    }, feats


def _train(model: WindowLM, ctx: torch.Tensor, target: torch.Tensor, cfg: LMConfig,
           d: int) -> tuple[int, list[dict[str, Any]]]:
    """Adam on random training windows, the learning rate decayed linearly to zero over the token budget.

    Returns the number of steps and the loss curve (the mean training loss of every tenth of the run).
    """
    batch = cfg.batch_size
    steps = max(1, cfg.train_tokens // batch)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 1.0 - step / steps)
    draw = torch.Generator().manual_seed(cfg.seed)
    curve, running = [], []
    every = max(1, int(steps * LOG_EVERY))
    model.train()
    for step in range(1, steps + 1):
        rows = torch.randint(len(target), (batch,), generator=draw)  # (B,)
        loss = nn.functional.cross_entropy(model(ctx[rows]), target[rows])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        running.append(loss.item())
        if step % every == 0 or step == steps:
            curve.append({"step": step, "tokens": step * batch, "train_loss": float(np.mean(running))})
            log.info("d=%d step %d/%d train loss %.4f", d, step, steps, curve[-1]["train_loss"])
            running = []
    return steps, curve


def _save_model(model: WindowLM, tokens: list[str], out_dir: Path, *, float32: bool) -> None:
    """Write the head, the whole model and the tokens.

    The linear head saves its float32 ``weight`` and ``bias``; another head the ``weight`` (and ``bias``) of its
    ``weights()`` in float64, as the checks read them.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    if float32:
        _save_safetensors({"weight": model.head.weight, "bias": model.head.bias}, out_dir / "head.safetensors")
    else:
        W, b = model.head.weights()
        _save_safetensors({"weight": torch.from_numpy(W)} | ({} if b is None else {"bias": torch.from_numpy(b)}),
                          out_dir / "head.safetensors")
    _save_safetensors(model.state_dict(), out_dir / "lm.safetensors")
    with atomic_path(out_dir / "vocab.txt") as tmp:
        tmp.write_text("".join(f"{t}\n" for t in tokens), encoding="utf-8")
