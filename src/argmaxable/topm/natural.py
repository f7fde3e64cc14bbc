"""Natural-language probabilities: Basri & Jacobs App. A (Fig. 4) and App. D (Fig. 6).

A causal language model reads a few texts; at every position its next-token distribution is sorted and the
largest ``top`` probabilities kept (:func:`top_probabilities`). Fig. 4 averages their cumulative sums over the
positions of each text (mean and spread over texts); Fig. 6 repeats Fig. 1's prescribed-probability test with
targets taken from these distributions instead of U(0.1, 1.1): a random position's m largest probabilities,
given to m random tokens (:func:`natural_probabilities`).

The paper read ten New York Times stories; those are not redistributable. A Hugging Face causal LM reads the
configured texts instead (``topm.natural.texts``: English prose from Python's own help topics, ``pydoc_data``,
which every Python ships); the lm family's window LM (a model directory with ``lm.safetensors``) reads its own
held-out debtags descriptions, cut into as many texts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd

from argmaxable.core import check_prescribed
from argmaxable.outputs import write_figure, write_tables
from argmaxable.provenance import atomic_path, metadata, sidecar, write_json
from argmaxable.rules import typed
from argmaxable.topm.experiments import PAPER_FIG1, load_trained, share_feasible
from argmaxable.topm.schema import CheckSettings, PrescribedSettings, TopmConfig

NATURAL, UNIFORM = "prescribed, natural", "prescribed, uniform"
COLORS = {NATURAL: "tab:blue", UNIFORM: "tab:red"}  # Basri & Jacobs Fig. 6: blue natural, red uniform


def help_texts(names: list[str]) -> list[str]:
    """Texts of Python's help topics (``pydoc_data.topics``), by name.

    Examples
    --------
    >>> "assert" in help_texts(["assert"])[0]
    True
    """
    from pydoc_data.topics import topics

    missing = [n for n in names if n not in topics]
    if missing:
        raise ValueError(f"topm.natural.texts names unknown help topics {missing}; pick from {sorted(topics)[:8]}...")
    return [topics[n] for n in names]


def top_probabilities(model_dir: str | Path, texts: list[str], *, top: int, max_tokens: int) -> list[np.ndarray]:
    """Per text, the ``top`` largest next-token probabilities at each position, sorted: (positions, top)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    out = []
    with torch.no_grad():
        for text in texts:
            ids = tokenizer(text, return_tensors="pt").input_ids[:, :max_tokens]  # (1, T)
            logits = model(ids).logits[0].double()  # (T, N)
            probs = torch.softmax(logits, dim=-1)
            out.append(probs.topk(min(top, probs.shape[-1]), dim=-1).values.numpy())  # (T, top)
    return out


def window_lm_top_probabilities(model_dir: str | Path, tokens: list[str], parts: int, *, top: int,
                                max_tokens: int) -> list[np.ndarray]:
    """As :func:`top_probabilities` for the lm family's window LM (``lm.safetensors``, ``train.json``; ``tokens``:
    its vocabulary in row order), over its held-out descriptions cut into ``parts`` texts."""
    import torch  # the lm family's model: torch only where it runs
    from safetensors.torch import load_file

    from argmaxable.lm.corpus import encode, windows
    from argmaxable.lm.model import WindowLM
    from argmaxable.lm.train import descriptions

    model_dir = Path(model_dir)
    record = json.loads((model_dir / "train.json").read_text())
    s = record["settings"]
    model = WindowLM(n=record["n"], context=s["context"], embed_dim=s["embed_dim"], hidden=s["hidden"],
                     d=record["d"], activation=s["activation"])
    model.load_state_dict(load_file(str(model_dir / "lm.safetensors")))
    model.eval()
    out = []
    with torch.no_grad():
        for texts in np.array_split(np.array(descriptions(record["heldout_split"]), dtype=object), parts):
            ctx, _ = windows(encode(list(texts), tokens), s["context"])  # (T, context)
            probs = torch.softmax(model(torch.from_numpy(ctx[:max_tokens])).double(), dim=-1)  # (T, n)
            out.append(probs.topk(min(top, probs.shape[-1]), dim=-1).values.numpy())
    return out


def run_predict(settings: TopmConfig | Mapping, model_cfg: dict, root: str, out: str, config=None) -> None:
    """Rule ``predict_next_tokens``: the sorted top probabilities of every text, one array per text (.npz)
    (``settings``: the ``topm`` block ``natural``)."""
    natural = typed(TopmConfig, settings).natural
    if (Path(root) / "lm.safetensors").exists():
        tokens = load_trained(model_cfg, root).tokens  # the vocabulary file the model directory holds
        tops = window_lm_top_probabilities(root, tokens, len(natural.texts), top=natural.top,
                                           max_tokens=natural.max_tokens)
    else:
        tops = top_probabilities(root, help_texts(natural.texts), top=natural.top, max_tokens=natural.max_tokens)
    with atomic_path(Path(out)) as tmp, open(tmp, "wb") as fh:
        np.savez(fh, *tops)
    write_json(metadata(config, texts=natural.texts, model=model_cfg["name"]), sidecar(out))


def read_tops(path: str | Path) -> list[np.ndarray]:
    with np.load(path, allow_pickle=False) as data:
        return [data[f"arr_{i}"] for i in range(len(data.files))]


def cumulative_table(tops: list[np.ndarray], m_values) -> pd.DataFrame:
    """Fig. 4: mean over positions of the cumulative top-m probability, per text; mean and std over texts."""
    rows = []
    for m in m_values:
        per_text = [float(t[:, :m].sum(axis=1).mean()) for t in tops if t.shape[1] >= m]
        rows.append({"m": int(m), "texts": len(per_text), "mean": np.mean(per_text), "std": np.std(per_text)})
    return pd.DataFrame(rows)


def natural_probabilities(tops: list[np.ndarray], m: int, rng: np.random.Generator) -> np.ndarray:
    """Basri & Jacobs App. D: the m largest next-token probabilities at a random position of a random text
    (normalised by the prescribed-probability check)."""
    t = tops[rng.integers(len(tops))]
    return t[rng.integers(t.shape[0]), :m]


def natural_curve(W: np.ndarray, b, tops, m_values, *, trials: int, seed: int, prescribed: PrescribedSettings,
                  check: CheckSettings) -> pd.DataFrame:
    """Share of random m-sets that can receive natural target probabilities, for each m (stops at a zero)."""
    rng = np.random.default_rng(seed)
    rows = []
    for m in m_values:
        if m >= W.shape[0] or m > tops[0].shape[1]:
            break
        sets = [rng.choice(W.shape[0], size=m, replace=False) for _ in range(trials)]
        probs = [natural_probabilities(tops, m, rng) for _ in sets]
        res = check_prescribed(W, sets, probs, b, eps_ratio=prescribed.eps_ratio, delta=prescribed.delta,
                               **asdict(check))
        counts = res.counts()
        decided = counts["argmaxable"] + counts["unargmaxable"]
        rows.append({"m": int(m), "test": NATURAL, "trials": trials, "feasible": counts["argmaxable"],
                     "undecided": counts["undecided"],
                     "fraction": counts["argmaxable"] / decided if decided else np.nan})
        if rows[-1]["fraction"] == 0:
            break
    return pd.DataFrame(rows)


def plot_natural(cumulative: pd.DataFrame, curves: pd.DataFrame, model: str, n_texts: int):
    """Left, Fig. 4: cumulative probability of the m most likely tokens. Right, Fig. 6: uniform vs natural
    targets on the trained matrix."""
    import matplotlib.pyplot as plt

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(9, 3.6))
    ax.errorbar(cumulative["m"], cumulative["mean"], yerr=cumulative["std"], marker="o", ms=3, capsize=2)
    ax.axhline(0.9, color="k", lw=0.6, linestyle=":")
    ax.set_xscale("log")
    ax.set_xlabel("m")
    ax.set_ylabel("mean cumulative top-m probability")
    ax.set_title(f"Basri & Jacobs Fig. 4: {model} on {n_texts} texts (std over texts)", fontsize=9)
    for test, cur in curves.groupby("test"):
        bx.plot(cur["m"], cur["fraction"], marker="o", ms=3, color=COLORS[test], label=test)
    if "prescribed" in PAPER_FIG1.get(model, {}):
        bx.axvline(PAPER_FIG1[model]["prescribed"], color="tab:red", alpha=0.4, lw=0.8)
    bx.set_xlabel("m")
    bx.set_ylabel("share of random m-sets")
    bx.set_title(f"Basri & Jacobs Fig. 6: {model}'s matrix; {int(curves['trials'].iloc[0])} sets per m", fontsize=9)
    bx.legend(fontsize=7)
    for a in (ax, bx):
        a.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def run_natural(settings: TopmConfig | Mapping, model: str, model_cfg: dict, root: str, tops_path: str, out: dict,
                *, seed: int, config=None) -> None:
    """Rule ``measure_topm_natural``: tables ``cumulative`` (Fig. 4), ``curves`` (Fig. 6) and ``figure``.

    Parameters
    ----------
    settings : TopmConfig or mapping
        The ``topm`` blocks ``natural``, ``fraction`` (its ``m_values`` and ``trials``), ``check`` and
        ``prescribed``.
    """
    topm = typed(TopmConfig, settings)
    tops = read_tops(tops_path)
    layer = load_trained(model_cfg, root)
    m_values, trials = topm.fraction.m_values, topm.fraction.trials
    natural = natural_curve(layer.W, layer.b, tops, m_values, trials=trials, seed=seed,
                            prescribed=topm.prescribed, check=topm.check)
    rng = np.random.default_rng(seed)
    uniform = []
    for m in m_values[: len(natural)]:
        uniform.append({"m": int(m), "test": UNIFORM, **share_feasible(
            layer.W, layer.b, int(m), trials, "prescribed", rng, prescribed=topm.prescribed, check=topm.check)})
    curves = pd.concat([natural, pd.DataFrame(uniform)], ignore_index=True)
    curves.insert(0, "model", model)
    cumulative = cumulative_table(tops, topm.natural.cumulative_m)
    cumulative.insert(0, "model", model)
    inputs = [*layer.files, tops_path]  # the head, and the model's next-token probabilities
    write_tables({"cumulative": cumulative, "curves": curves}, out, config, inputs=inputs)
    write_figure(plot_natural(cumulative, curves, model, len(tops)), out["figure"], config, inputs=inputs)
