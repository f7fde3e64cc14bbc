"""What the paper's multi-label sweep costs, so that its time on a machine can be planned: seconds per training step
and per scored example of each dataset's encoder and head at each d, seconds per verified assignment, and the whole
sweep projected from them.

    python -m benchmarks.multilabel_sweep --out benchmarks/multilabel_sweep_cpu.json   # CPU (2 cores here)
    scripts/device/mlrehearse.sh                                                       # a GPU: the same, --device cuda

Shapes are the paper's (config/multilabel/paper.yaml, config/datasets/*.yaml, argmaxable.multilabel.standins):
MIMIC-III's CAML CNN over batches of 16 notes of 2500 tokens, PubMedBERT (the replica: true shapes, random
weights) over 32 abstracts of 512 subwords, TResNet-L over 64 images of 448 x 448; labels drawn at each dataset's n.
Inputs are synthetic (the cost of a step does not depend on the values). Each step is the training loop's own
(:class:`argmaxable.multilabel.train.Model`, Adam over the encoder's and the head's groups, BCE with logits).

On a CPU the encoder dominates and does not depend on d: every (head, d) is measured on the head alone (its input
the encoder's features), and the encoder once, at d = 50, inside a full step; a step at (head, d) is the full step
at (bsl, 50) less the BSL head at 50, plus the head at (head, d). On a GPU (``--full``) every combination runs whole.
Verification (CPU only: the LPs run there) checks a sample of the built test split's gold label sets against
each head as initialised; trained heads differ, which the rehearsal's own verification times show beside.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
D_VALUES = (25, 50, 100, 200, 400)  # thesis Table A.4
HEADS = ("bsl", "dft")
SEEDS = 3  # thesis A.6.3
# Each dataset's true sizes: n (labels), the DFT's k, the splits (thesis §4.1.2, Table A.4; the stand-ins' sources).
SIZES = {
    "mimic3": {"n": 8921, "train": 47_723, "dev": 1_631, "test": 3_372, "input": ("tokens", 2500)},
    "bioasq": {"n": 20_000, "train": 100_000, "dev": 5_000, "test": 10_000, "input": ("subwords", 512)},
    "openimages": {"n": 8933, "train": 108_228, "dev": 5_000, "test": 10_000, "input": ("pixels", 448)},
}


def paper_runs() -> dict:
    """``multilabel.runs`` of the paper experiment, read from its YAML (no Hydra: the device has none)."""
    from omegaconf import OmegaConf

    return OmegaConf.to_container(OmegaConf.load(ROOT / "config" / "multilabel" / "paper.yaml").runs)


def build(name: str, run: dict, workdir: Path, device: torch.device):
    """The dataset's encoder at true shape and a function making a batch of its inputs, on ``device``."""
    from argmaxable.multilabel import standins
    from argmaxable.multilabel.encoders import build_encoder
    from argmaxable.multilabel.schema import EncoderConfig

    enc = dict(run["encoder"])
    if name == "mimic3":  # a vocabulary of vocab_max_size words (CAML's, min count 3, has 51,917)
        words = standins.bert_words(standins.BioASQ(types=enc.get("vocab_max_size", 50_000)))
        encoder = build_encoder(EncoderConfig(**enc), [" ".join(words)] * 3)
        length = enc["max_tokens"]

        def batch(b):
            return torch.randint(2, len(encoder.vocab) + 2, (b, length), device=device)
    elif name == "bioasq":
        replica = workdir / "pubmedbert"
        if not (replica / "model.safetensors").exists():
            standins.write_pubmedbert(replica, standins.bert_words())
        encoder = build_encoder(EncoderConfig(**{**enc, "pretrained": str(replica)}))
        length, vocab = enc["max_tokens"], standins.PUBMEDBERT["vocab_size"]

        def batch(b):
            ids = torch.randint(5, vocab, (b, length), device=device)
            return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "token_type_ids": torch.zeros_like(ids)}
    else:
        ckpt = workdir / "tresnet_l.pth"
        if not ckpt.exists():
            standins.write_tresnet(ckpt)
        encoder = build_encoder(EncoderConfig(**{**enc, "checkpoint": str(ckpt)}))
        size = enc["image_size"]

        def batch(b):
            return torch.randn(b, 3, size, size, device=device)
    return encoder.to(device), batch


def _timed(fn, repeats: int, device: torch.device) -> float:
    """Mean seconds of ``fn()`` over ``repeats`` calls after one warm-up call."""
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(repeats):
        fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - t0) / repeats


def _measured(fn, repeats: int, device: torch.device) -> tuple[float | None, float | None]:
    """(:func:`_timed` seconds, peak GPU MiB); (None, None) when the GPU runs out of memory (recorded, not fatal:
    the training loop runs in float32, as the thesis's code may not have)."""
    if device.type != "cuda":
        return _timed(fn, repeats, device), None
    torch.cuda.reset_peak_memory_stats()
    try:
        seconds = _timed(fn, repeats, device)
    except torch.cuda.OutOfMemoryError:
        torch.cuda.empty_cache()
        return None, None
    return seconds, torch.cuda.max_memory_allocated() / 2**20


def _step_fn(model, inputs, y, run: dict):
    """One optimiser step of the training loop on a fixed batch."""
    optim = torch.optim.Adam([{"params": model.encoder.parameters(), "lr": run["lr_encoder"]},
                              {"params": model.head.parameters(), "lr": run["lr_classifier"]}])
    loss_fn = torch.nn.BCEWithLogitsLoss()

    def step():
        optim.zero_grad()
        loss = loss_fn(model(inputs), y)
        loss.backward()
        optim.step()
        return loss.item()

    return step


def _labels(b: int, n: int, device) -> torch.Tensor:
    y = torch.zeros(b, n, device=device)
    y[torch.arange(b).repeat_interleave(10), torch.randint(0, n, (10 * b,))] = 1.0
    return y


def measure_steps(name: str, run: dict, device: torch.device, workdir: Path, *, full: bool, repeats: int,
                  eval_batch: int, out: dict, save=lambda: None, batch_size: int | None = None) -> dict:
    """Seconds per training step at every (head, d) and per scored example, for one dataset, into ``out``
    (``save()`` after each measurement: a run cut short keeps what it measured); on a GPU also its peak memory.
    ``batch_size`` (default: the paper's) measures smaller steps where the paper's would not fit in memory."""
    from argmaxable.multilabel.heads import make_head
    from argmaxable.multilabel.train import Model

    n, b = SIZES[name]["n"], batch_size or run["batch_size"]
    encoder, batch = build(name, run, workdir, device)
    inputs, y = batch(b), _labels(b, n, device)
    out.update(batch_size=b, steps={}, head_steps={}, gpu_peak_mib={})
    model = Model(encoder, make_head("bsl", encoder.dim, n, 50, run["k_active"]).to(device)).eval()
    eval_inputs = batch(eval_batch)
    with torch.no_grad():
        seconds, _ = _measured(lambda: model(eval_inputs).float().cpu(), repeats, device)
    out["score_example_s"] = seconds / eval_batch if seconds is not None else None
    save()
    for head in HEADS:
        for d in D_VALUES:
            key = f"{head}_d{d}"
            torch.manual_seed(0)
            h = make_head(head, encoder.dim, n, d, run["k_active"]).to(device)
            if full or d == 50:
                out["steps"][key], out["gpu_peak_mib"][key] = _measured(
                    _step_fn(Model(encoder, h), inputs, y, run), repeats, device)
                encoder.zero_grad(set_to_none=True)
            feats = torch.randn(b, encoder.dim, device=device)
            out["head_steps"][key], _ = _measured(_step_fn(Model(torch.nn.Identity(), h), feats, y, run),
                                                  3 * repeats, device)
            save()
    if not full:  # encoder + head: the full step at (bsl, 50) less its head, plus each head
        base = out["steps"]["bsl_d50"] - out["head_steps"]["bsl_d50"]
        out["steps"] = {k: out["steps"].get(k, base + v) for k, v in out["head_steps"].items()}
        out["encoder_step_s"] = base
    return out


def measure_verification(name: str, run: dict, sample: int, dataset_dir: Path) -> dict:
    """Seconds per verified test assignment at every (head, d), the heads as initialised (CPU, one worker): in the
    head's space (W, box 1e4) and in the encoder's (W P with offsets W b, the encoder's feature box), on ``sample``
    and ``sample // 4`` gold label sets of the built test split."""
    from argmaxable.core import check_assignments
    from argmaxable.multilabel.datasets import load_built
    from argmaxable.multilabel.heads import composite, make_head

    dsd, names = load_built(dataset_dir)
    n = len(names)
    labels = list(dsd["test"].select(range(min(sample, len(dsd["test"]))))["labels"])
    e = {"mimic3": run["encoder"]["filters"], "bioasq": 768, "openimages": 2432}[name]
    out = {}
    for head in HEADS:
        for d in D_VALUES:
            torch.manual_seed(0)
            h = make_head(head, e, n, d, run["k_active"])
            WP, Wb = composite(h)
            record = {}
            for space, (W, b, bound, items) in {"head": (h.weights()[0], None, 1e4, labels),
                                                "encoder": (WP, Wb, run["encoder"]["feature_bound"],
                                                            labels[: max(sample // 4, 1)])}.items():
                t0 = time.perf_counter()
                res = check_assignments(W, items, b, bound=bound, workers=1)
                record[space] = {"s_per_assignment": (time.perf_counter() - t0) / len(items),
                                 "counts": {k: int(v) for k, v in res.counts().items()}}
            out[f"{head}_d{d}"] = record
    return out


def project(name: str, run: dict, steps: dict, score_s: float, verify: dict | None, batch_size: int) -> dict:
    """The sweep's cost for one dataset (5 d x 2 heads x 3 seeds), hours, at its shortest under early stopping:
    ``patience`` + 1 evaluations (the best at the first, then ``patience`` without improvement). Steps measured
    at ``batch_size`` below the paper's count ``run["batch_size"] / batch_size`` times (compute grows with the
    batch; on a CPU the measured time does, nearly in proportion)."""
    s = SIZES[name]
    steps = {k: None if v is None else v * run["batch_size"] / batch_size for k, v in steps.items()}
    per_epoch = math.ceil(s["train"] / run["batch_size"])
    interval = run["eval_every"] or per_epoch  # steps between evaluations
    evals = run["patience"] + 1
    runs = {}
    for key, step_s in steps.items():
        if step_s is None or score_s is None:  # out of GPU memory
            runs[key] = {"train_h": None, "verify_h": None}
            continue
        train_s = evals * interval * step_s + evals * s["dev"] * score_s + (s["dev"] + s["test"]) * score_s
        # paper.yaml verifies gold and predicted assignments of dev and test, in the head's and the encoder's space
        verify_s = (2 * (s["dev"] + s["test"]) * sum(v["s_per_assignment"] for v in verify[key].values())
                    if verify else None)
        runs[key] = {"train_h": train_s / 3600, "verify_h": None if verify_s is None else verify_s / 3600}
    complete = all(r["train_h"] is not None for r in runs.values())
    total_train = SEEDS * sum(r["train_h"] for r in runs.values()) if complete else None
    total_verify = SEEDS * sum(r["verify_h"] for r in runs.values()) if verify and complete else None
    at50 = steps.get("bsl_d50")
    return {"steps_per_epoch": per_epoch, "evaluation_every_steps": interval, "evaluations_at_least": evals,
            "epoch_h_at_d50": per_epoch * at50 / 3600 if at50 is not None else None, "runs": runs,
            "sweep_train_h_at_least": total_train, "sweep_verify_h": total_verify,
            "run_train_h_at_most": _longest_run(name, run, steps, score_s, per_epoch, interval)}


def _longest_run(name, run, steps, score_s, per_epoch, interval) -> float | None:
    """Hours of the slowest (head, d) run if early stopping never fires: ``max_epochs`` epochs at its step time,
    with every evaluation of the dev split on the way (what a job's time limit must allow)."""
    known = [v for v in steps.values() if v is not None]
    if not known or score_s is None:
        return None
    total = run["max_epochs"] * per_epoch
    return (total * max(known) + (total // interval) * SIZES[name]["dev"] * score_s) / 3600


def table(path: Path) -> str:
    """A Markdown table of one ``--out`` record: per dataset the step as measured at its batch (BSL at d = 50 and
    the range over every (head, d)), the scoring cost, peak GPU memory, and the projection's hours."""

    def num(x, digits=3):
        return "n/a" if x is None else f"{x:.{digits}g}"

    record, runs = json.loads(path.read_text()), paper_runs()
    rows = [f"{record['device']}, torch {record['torch']}, {record['threads']} threads",
            "",
            "| dataset | batch | s/step at d = 50, BSL (range over the 10 heads) | s per scored example | peak GPU MiB "
            "| steps/epoch | h/epoch | one run's training, h (early stopping at once .. never) "
            "| sweep's training, h (at least) |",
            "|---|---|---|---|---|---|---|---|---|"]
    for name, entry in record["datasets"].items():
        if "skipped" in entry:
            rows.append(f"| {name} | skipped: {entry['skipped']} |" + " |" * 7)
            continue
        steps = [v for v in entry["steps"].values() if v is not None]
        proj = project(name, runs[name], entry["steps"], entry["score_example_s"], entry.get("verify"),
                       entry["batch_size"])  # recomputed: records older than run_train_h_at_most lack it
        peaks = [v for v in (entry.get("gpu_peak_mib") or {}).values() if v is not None]
        peak = f"{max(peaks):.0f}" if peaks else "n/a"
        shortest = min(r["train_h"] for r in proj["runs"].values() if r["train_h"] is not None)
        rows.append(
            f"| {name} | {entry['batch_size']} | {num(entry['steps'].get('bsl_d50'))} ({num(min(steps))}-"
            f"{num(max(steps))}) | {num(entry['score_example_s'])} | {peak} | "
            f"{proj['steps_per_epoch']} | {num(proj['epoch_h_at_d50'])} | {num(shortest)} .. "
            f"{num(proj.get('run_train_h_at_most'))} | {num(proj['sweep_train_h_at_least'])} |")
    return "\n".join(rows)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.multilabel_sweep", description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="+", default=list(SIZES))
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--full", action="store_true", help="every (head, d) through the whole model (GPU)")
    parser.add_argument("--repeats", type=int, default=2, help="timed steps after one warm-up")
    parser.add_argument("--eval-batch", type=int, default=16)
    parser.add_argument("--verify-sample", type=int, default=0,
                        help="test assignments verified per (head, d) from the built datasets (0: skip)")
    parser.add_argument("--datasets-dir", type=Path, default=ROOT / "results" / "rehearsal" / "datasets")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", nargs="*", default=[], metavar="DATASET=B",
                        help="measure DATASET's steps at batch B instead of the paper's (projected to the paper's)")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--table", type=Path, metavar="JSON", help="print the Markdown table of an --out record")
    args = parser.parse_args(argv)
    if args.table:
        print(table(args.table))
        return 0
    if args.out is None:
        parser.error("--out is required (or --table JSON)")
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    runs = paper_runs()
    batches = {name: int(b) for name, b in (item.split("=") for item in args.batch_size)}
    record = {"device": torch.cuda.get_device_name(0) if device.type == "cuda" else platform.processor() or "cpu",
              "threads": args.threads, "torch": torch.__version__, "d": list(D_VALUES), "datasets": {}}
    args.out.parent.mkdir(parents=True, exist_ok=True)

    def save():
        args.out.write_text(json.dumps(record, indent=1) + "\n")

    with tempfile.TemporaryDirectory() as tmp:
        for name in args.datasets:
            t0 = time.perf_counter()
            entry = record["datasets"][name] = {}
            try:
                measure_steps(name, runs[name], device, Path(tmp), full=args.full, repeats=args.repeats,
                              eval_batch=args.eval_batch, out=entry, save=save, batch_size=batches.get(name))
            except ImportError as err:  # OpenImages without timm (the optional `images` extra): the others go on
                entry["skipped"] = str(err)
                save()
                print(f"{name}: skipped ({err})", flush=True)
                continue
            entry["verify"] = (measure_verification(name, runs[name], args.verify_sample, args.datasets_dir / name)
                               if args.verify_sample else None)
            entry["projection"] = project(name, runs[name], entry["steps"], entry["score_example_s"],
                                          entry["verify"], entry["batch_size"])
            entry["measured_s"] = time.perf_counter() - t0
            save()
            print(f"{name}: step at d=50 {entry['steps'].get('bsl_d50')} s, scoring {entry['score_example_s']} "
                  "s/example", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
