"""Train one (dataset, head, d, seed) run of the multi-label sweep (thesis §4.1.2, §5.1.3, A.6.3).

Binary cross-entropy, Adam with separate encoder and classifier learning rates (Table A.4), evaluation every
``eval_every`` steps (or epoch), early stopping with patience on the paper's criterion (P@k or dev loss), or
after ``max_steps`` optimiser steps (the rehearsal's cap). After every evaluation the whole state goes to
``checkpoint.pt``; a run that finds one made for its own code, settings and data resumes from it (one made for others
is removed and the run starts over: Snakemake reruns a job whose settings or inputs changed, and the checkpoint is
no output of it). Writes ``train.json`` (metrics, wall time split into training steps and scoring, sizes),
``curve.csv`` (loss curve) and ``head.npz`` (the classifier W, the composite encoder-space map and the predicted
assignments) for verification.

Labels stay index lists: a batch's are made dense for its loss, and dev/test are scored a block of
``_EVAL_BATCH`` examples at a time (:class:`~argmaxable.multilabel.metrics.MetricTotals`), so no (m, n) matrix
of a whole split is ever built (BioASQ's test split would take 800 MB of logits and 200 MB of gold labels).
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import math
import random
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import nn

from argmaxable.multilabel.datasets import load_built
from argmaxable.multilabel.encoders import build_encoder
from argmaxable.multilabel.heads import Head, composite, make_head, trainable_parameters
from argmaxable.multilabel.metrics import MetricTotals, labels_to_dense
from argmaxable.multilabel.schema import RunConfig
from argmaxable.provenance import atomic_path, source_digest, write_json, write_table
from argmaxable.rules import typed

log = logging.getLogger(__name__)
SPLITS = ("dev", "test")
_EVAL_BATCH = 64  # examples per forward pass when scoring dev/test (memory only)


class Model(nn.Module):
    """Encoder followed by a head: rows -> logits (B, n)."""

    def __init__(self, encoder: nn.Module, head: Head):
        super().__init__()
        self.encoder, self.head = encoder, head

    def forward(self, inputs: Any) -> torch.Tensor:
        return self.head(self.encoder(inputs))  # (B, e) -> (B, n)

    def batch(self, rows: list[dict]) -> Any:
        """Collate rows into encoder inputs on the model's device."""
        inputs = self.encoder.collate(rows)
        device = next(self.parameters()).device
        if isinstance(inputs, dict):
            return {k: v.to(device) for k, v in inputs.items()}
        return inputs.to(device)


def resolve_device(name: str) -> torch.device:
    """``auto`` -> cuda when available, else cpu; anything else as given."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def run_config(run: dict | RunConfig) -> RunConfig:
    """Validate a run's settings (a plain dict from Snakemake params) against :class:`RunConfig`."""
    out = typed(RunConfig, run)
    if out.criterion not in ("loss", "p@k"):
        raise ValueError(f"multilabel criterion must be 'loss' or 'p@k'; got {out.criterion!r}")
    return out


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch (CPU) for a reproducible run."""
    random.seed(seed)
    np.random.seed(seed)  # noqa: NPY002  (third-party code may draw from NumPy's legacy global state)
    torch.manual_seed(seed)


def active_bound(train_labels, k_active: int | None, n: int) -> int:
    """The DFT's k: ``k_active`` or the most active labels of a training example (thesis §5.1.3)."""
    k = k_active if k_active is not None else max(len(y) for y in train_labels)
    return min(k, (n - 1) // 2)  # 2k+1 <= n, else the bottleneck would not be one (thesis eq. 5.10)


def _score(model: Model, rows: list[dict], n: int, k: int, *,
           predictions: bool = False) -> tuple[dict[str, float], tuple[np.ndarray, np.ndarray] | None]:
    """Metrics (with the mean BCE as ``loss``) of ``rows`` in eval mode, a block at a time; with ``predictions``
    also each row's predicted labels (logit > 0) as ragged int32 (flat label indices, offsets)."""
    model.eval()
    totals, loss, flat, counts = MetricTotals(k), 0.0, [], []
    with torch.no_grad():
        for i in range(0, len(rows), _EVAL_BATCH):
            block = rows[i : i + _EVAL_BATCH]
            z = model(model.batch(block)).float().cpu()  # (b, n)
            y = labels_to_dense([r["labels"] for r in block], n)  # (b, n) bool: this block only
            loss += nn.functional.binary_cross_entropy_with_logits(z, torch.from_numpy(y).float(),
                                                                   reduction="sum").item()
            totals.add(z.numpy(), y)
            if predictions:
                row, label = np.nonzero(z.numpy() > 0)  # row-major: each row's labels in order
                flat.append(label.astype(np.int32))
                counts.append(np.bincount(row, minlength=len(block)))
    model.train()
    ragged = None
    if predictions:
        offsets = np.concatenate([[0], np.cumsum(np.concatenate(counts))]) if counts else np.zeros(1)
        ragged = (np.concatenate(flat) if flat else np.zeros(0, dtype=np.int32), offsets.astype(np.int64))
    return {**totals.result(), "loss": loss / (len(rows) * n)}, ragged


def fit(dsd, n: int, out_dir: str | Path, *, head: str, d: int, seed: int, run: dict | RunConfig,
        config: Any = None, inputs: tuple = ()) -> dict[str, Any]:
    """Train one run on a built dataset and write its outputs into ``out_dir``.

    Parameters
    ----------
    dsd : datasets.DatasetDict
        Splits ``train``, ``dev``, ``test`` with columns ``text`` (or ``image_path``) and ``labels``.
    n : int
        Number of labels.
    out_dir : path
        Run directory; ``checkpoint.pt`` there is resumed from and removed when the run finishes.
    head : {"bsl", "dft"}
    d : int
        Bottleneck width (BSL) or slack width (DFT).
    seed : int
    run : dict or RunConfig
        The dataset's :class:`~argmaxable.multilabel.schema.RunConfig`.

    Returns
    -------
    dict
        The record written to ``train.json``.
    """
    cfg = run_config(run)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    threads = torch.get_num_threads()  # a process-wide setting: restored when the run ends
    torch.set_num_threads(cfg.threads)
    try:
        seed_everything(seed)

        # 1. Data: an optional capped training subset (the same for all runs) and a capped dev set for stopping.
        train_rows, stop_rows = _training_rows(dsd, cfg)
        k = active_bound([r["labels"] for r in train_rows], cfg.k_active, n)

        # 2. Model and optimiser (separate learning rates for encoder and classifier, Table A.4), or a resumed run.
        encoder = build_encoder(cfg.encoder, [r.get("text", "") for r in train_rows])
        device = resolve_device(cfg.device)
        model = Model(encoder, make_head(head, encoder.dim, n, d, k)).to(device)
        optim = torch.optim.Adam([  # fused: Adam's update in one pass (on CPU a third of the loop's time)
            {"params": model.encoder.parameters(), "lr": cfg.lr_encoder},
            {"params": model.head.parameters(), "lr": cfg.lr_classifier},
        ], fused=True)
        ckpt_path, best_path = out_dir / "checkpoint.pt", out_dir / "best.pt"
        made_for = run_fingerprint(cfg, head=head, d=d, seed=seed, n=n, rows=(*train_rows, *stop_rows))
        state = _start_state(ckpt_path, model, optim, device, higher_better=cfg.criterion == "p@k",
                             made_for=made_for)

        # 3. Train with early stopping; checkpoint after every evaluation.
        _train(model, optim, train_rows, stop_rows, n, cfg, state, seed=seed, ckpt_path=ckpt_path,
               best_path=best_path)

        # 4. Score the best model on dev and test; store W, the composite map and predicted assignments.
        model.load_state_dict(torch.load(best_path, weights_only=True, map_location=device))
        record = _finish(model, dsd, n, k, out_dir, cfg, state, head=head, d=d, seed=seed,
                         config=config, inputs=inputs)
        ckpt_path.unlink(missing_ok=True)
        return record
    finally:
        torch.set_num_threads(threads)


def _training_rows(dsd, cfg: RunConfig) -> tuple[list[dict], list[dict]]:
    """The training rows (a subset of ``max_train`` when set, the same for all runs) and the first
    ``max_eval`` dev rows, on which early stopping decides."""
    train = dsd["train"]
    if cfg.max_train is not None and len(train) > cfg.max_train:
        train = train.select(np.sort(np.random.default_rng(0).permutation(len(train))[: cfg.max_train]))
    dev = dsd["dev"]
    return list(train), list(dev.select(range(min(len(dev), cfg.max_eval or len(dev)))))


def run_fingerprint(cfg: RunConfig, *, head: str, d: int, seed: int, n: int, rows) -> str:
    """What a checkpoint is made for: the package's sources (a run stopped before an edit of the code starts over),
    the run's settings, head, width, seed and label count, and a digest of the rows it trains and stops on (texts
    or image paths, and labels), so that a dataset rebuilt to the same shape is another run."""
    digest = hashlib.sha256(repr((source_digest(), dataclasses.asdict(cfg), head, d, seed, n)).encode())
    for row in rows:
        digest.update(repr((row.get("text", row.get("image_path")), list(row["labels"]))).encode())
    return digest.hexdigest()


def _start_state(ckpt_path: Path, model: Model, optim, device, *, higher_better: bool,
                 made_for: str) -> dict[str, Any]:
    """A fresh run's state, or the state of ``ckpt_path`` with the model, optimiser and torch RNG restored where
    the checkpoint was made for this run (``made_for``: :func:`run_fingerprint`); one of other settings or data is
    removed and the run starts over (never resumed: a stale checkpoint would pass for this run's training)."""
    fresh = {"epoch": 0, "step": 0, "elapsed": 0.0, "best": -math.inf if higher_better else math.inf,
             "best_step": 0, "best_elapsed": 0.0, "bad_evals": 0, "curve": [], "done": False,
             "train_s": 0.0, "eval_s": 0.0, "eval_examples": 0, "stopped_by": "max_epochs", "made_for": made_for}
    if not ckpt_path.exists():
        return fresh
    ckpt = _read_checkpoint(ckpt_path, device)
    if ckpt["state"].get("made_for") != made_for:
        log.info("%s was made for other settings or data: starting over", ckpt_path)
        ckpt_path.unlink()
        return fresh
    model.load_state_dict(ckpt["model"])
    optim.load_state_dict(ckpt["optim"])
    torch.set_rng_state(ckpt["rng"].cpu())
    state = {"train_s": 0.0, "eval_s": 0.0, "eval_examples": 0, "stopped_by": "max_epochs", **ckpt["state"]}
    log.info("resumed from %s at epoch %d step %d", ckpt_path, state["epoch"], state["step"])
    return state


def _train(model: Model, optim, train_rows: list[dict], stop_rows: list[dict], n: int, cfg: RunConfig,
           state: dict[str, Any], *, seed: int, ckpt_path: Path, best_path: Path) -> None:
    """Epochs of minibatch BCE until ``max_epochs``, ``patience`` evaluations without improvement or
    ``max_steps`` steps.

    Updates ``state``; evaluates every ``eval_every`` steps, at each epoch's end and at the step cap, then
    checkpoints.
    """
    loss_fn = nn.BCEWithLogitsLoss()
    device = next(model.parameters()).device
    higher_better = cfg.criterion == "p@k"
    steps_per_epoch = math.ceil(len(train_rows) / cfg.batch_size)
    eval_every = cfg.eval_every or steps_per_epoch
    running: list[float] = []
    while not state["done"] and state["epoch"] < cfg.max_epochs:
        # The epoch's order depends only on (seed, epoch), so a resumed run sees the same batches.
        order = np.random.default_rng([seed, state["epoch"]]).permutation(len(train_rows))
        start_batch = state["step"] - state["epoch"] * steps_per_epoch
        for b in range(start_batch, steps_per_epoch):
            t0 = time.perf_counter()
            idx = order[b * cfg.batch_size : (b + 1) * cfg.batch_size]
            rows = [train_rows[i] for i in idx]
            y = torch.from_numpy(labels_to_dense([r["labels"] for r in rows], n)).float().to(device)  # (B, n)
            loss = loss_fn(model(model.batch(rows)), y)
            if state["step"] == 0:  # the loss at initialisation (thesis Fig. 5.7: DFT starts lower)
                state["curve"].append({"step": 0, "epoch": 0, "elapsed_s": 0.0, "train_loss": loss.item(),
                                       "dev_loss": math.nan, "dev_p@k": math.nan})
            optim.zero_grad()
            loss.backward()
            optim.step()
            running.append(loss.item())  # .item() waits for the device: the step's time is all in
            state["step"] += 1
            state["elapsed"] += time.perf_counter() - t0
            state["train_s"] += time.perf_counter() - t0
            capped = cfg.max_steps is not None and state["step"] >= cfg.max_steps
            if state["step"] % eval_every == 0 or b == steps_per_epoch - 1 or capped:
                _evaluate(model, stop_rows, n, cfg, state, running, higher_better, best_path)
                running = []
                if state["bad_evals"] >= cfg.patience or capped:
                    state["done"] = True
                    state["stopped_by"] = "max_steps" if capped else "patience"
                    break
                if b < steps_per_epoch - 1:
                    _checkpoint(ckpt_path, model, optim, state)
        state["epoch"] += 1
        _checkpoint(ckpt_path, model, optim, state)


def _evaluate(model, rows, n, cfg, state, running, higher_better, best_path) -> None:
    t0 = time.perf_counter()
    metrics, _ = _score(model, rows, n, cfg.metric_k)
    pk, dev_loss = metrics["p@k"], metrics["loss"]
    value = pk if cfg.criterion == "p@k" else dev_loss
    improved = value > state["best"] if higher_better else value < state["best"]
    state["elapsed"] += time.perf_counter() - t0
    state["eval_s"] += time.perf_counter() - t0
    state["eval_examples"] += len(rows)
    if improved:
        state.update(best=value, best_step=state["step"], best_elapsed=state["elapsed"], bad_evals=0)
        with atomic_path(best_path) as tmp:
            torch.save(model.state_dict(), tmp)
    else:
        state["bad_evals"] += 1
    state["curve"].append({"step": state["step"], "epoch": state["epoch"], "elapsed_s": state["elapsed"],
                           "train_loss": float(np.mean(running)), "dev_loss": dev_loss, "dev_p@k": pk})
    log.info("step %d train %.4f dev loss %.4f P@%d %.4f%s", state["step"], np.mean(running), dev_loss,
             cfg.metric_k, pk, " *" if improved else "")


def _read_checkpoint(path: Path, device):
    """A checkpoint written by :func:`_checkpoint`: tensors and plain Python values only, read with
    ``weights_only=True`` (a file placed in the run directory cannot run code); anything else is one ValueError."""
    try:
        ckpt = torch.load(path, weights_only=True, map_location=device)
    except Exception as err:  # torch raises UnpicklingError, RuntimeError, EOFError... for a foreign file
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ValueError(f"{path}: not a checkpoint of this training loop (delete it to start over): {first}") from None
    if not (isinstance(ckpt, dict) and {"model", "optim", "rng", "state"} <= ckpt.keys()
            and isinstance(ckpt["state"], dict)):
        raise ValueError(f"{path}: not a checkpoint of this training loop (delete it to start over): it lacks "
                         "the model, optimiser, RNG or state")
    return ckpt


def _checkpoint(path: Path, model, optim, state) -> None:
    with atomic_path(path) as tmp:
        torch.save({"model": model.state_dict(), "optim": optim.state_dict(), "rng": torch.get_rng_state(),
                    "state": state}, tmp)


def _finish(model: Model, dsd, n, k, out_dir: Path, cfg: RunConfig, state, *, head, d, seed, config,
            inputs) -> dict[str, Any]:
    arrays: dict[str, np.ndarray] = {}
    metrics: dict[str, dict[str, float]] = {}
    t0, scored = time.perf_counter(), 0
    for split in SPLITS:
        rows = list(dsd[split])
        metrics[split], (arrays[f"pred_{split}"], arrays[f"pred_{split}_offsets"]) = _score(
            model, rows, n, cfg.metric_k, predictions=True)
        scored += len(rows)
    score_s = time.perf_counter() - t0
    W = model.head.weights()[0]
    WP, Wb = composite(model.head)
    with atomic_path(out_dir / "head.npz") as tmp, open(tmp, "wb") as fh:
        np.savez_compressed(fh, W=W, WP=WP, Wb=Wb, feature_bound=model.encoder.feature_bound,
                            k=k, **arrays)
    write_table(pd.DataFrame(state["curve"]), out_dir / "curve.csv", config=config, inputs=inputs)
    record = {
        "head": head, "d": d, "seed": seed, "n": n, "k": k, "e": model.encoder.dim,
        "features": int(W.shape[1]), "trainable_head": trainable_parameters(model.head),
        "trainable_total": sum(p.numel() for p in model.parameters() if p.requires_grad),
        "n_train": min(len(dsd["train"]), cfg.max_train or len(dsd["train"])),
        "steps": state["step"], "epochs": state["epoch"], "best_step": state["best_step"],
        "stopped_by": state["stopped_by"], "max_steps": cfg.max_steps, "batch_size": cfg.batch_size,
        "wall_time_s": state["elapsed"], "time_to_best_s": state["best_elapsed"],
        # Cost per unit (benchmarks/RESULTS.md projects the sweep from these): training steps alone, and the
        # forward passes that score dev (while training) and dev + test (at the end), per example.
        "train_step_s": state["train_s"] / max(state["step"], 1),
        "score_example_s": (state["eval_s"] + score_s) / max(state["eval_examples"] + scored, 1),
        "peak_rss_mib": _peak_rss_mib(),  # this process's, the dataset loaded and both splits scored
        "criterion": cfg.criterion, "best_criterion": state["best"], "metric_k": cfg.metric_k,
        "metrics": metrics, "config": config,
    }
    write_json(record, out_dir / "train.json")
    return record


def _peak_rss_mib() -> float:
    """The process's peak resident memory so far (Linux reports KiB, macOS bytes)."""
    import resource
    import sys

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(peak / (2**20 if sys.platform == "darwin" else 2**10), 1)


def train_run(dataset_dir: str | Path, out_dir: str | Path, **kwargs: Any) -> dict[str, Any]:
    """Load a built dataset (``datasets.load_built``) and :func:`fit` one run on it."""
    dsd, label_names = load_built(dataset_dir)
    return fit(dsd, len(label_names), out_dir, inputs=(dataset_dir,), **kwargs)
