"""The prompting test (Land & Bartolo 2024, "Fishing for Magikarp" §2.3), run with the model itself, and the
certificate checked against it.

Each candidate token is put, by its id (never through the tokenizer), into prompts that ask the model to copy,
repeat or explain it (:data:`PROMPTS`; :data:`DEFAULT_PROMPTS` by default); the model decodes :data:`STEPS` greedy
steps, and the candidate's largest probability over prompts and generated positions is its score. Below
:data:`UNDER_TRAINED` (the paper's 0.01) the token is "under-trained (verified)": the model does not produce it even
when asked to copy it.

Every position the model computes (prompt and generated) is also a test of the certificate: a token certified
unargmaxable can never be the strict argmax of the head, so where the model's greedy argmax is one (a tie group's
emitted id aside: ties go to the lowest id), its logit is computed again in float64 from the head's input and the
model's own head weights; if it is strictly above every other logit there, the audit stops (:class:`Contradiction`:
a bug in the loader, the box or the core). Where float64 puts another row at least as high (an exact tie, or float32
rounding), it is counted, never a contradiction: no row of a tie wins strictly.

Candidates go in batches (every prompt of a batch has the same length: the template's ids around the candidate's), the
results after each batch to a state file that a later run with the same prompts resumes from.
"""

from __future__ import annotations

import copy
import hashlib
import inspect
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

# name -> (the user's request, the start of the reply); {token} is where the candidate's id goes (in the chat
# template where the tokenizer has one). "copy" shows the token three times and asks for a fourth: copying a token
# seen in context is what even a small model does best, so a token it cannot copy is one its head never learned.
PROMPTS = {
    "copy": ('Repeat this list: "{token}", "{token}", "{token}"', '"{token}", "'),
    "repeat": ('Please repeat the string "{token}" back to me.', '"'),
    "explain": ('What does the string "{token}" mean?', 'The string "'),
}
# The prompts run by default: on SmolLM2-135M "repeat" lifted no candidate above the threshold that "copy" left
# below it, and doubled the cost (benchmarks/RESULTS.md, the prompting test).
DEFAULT_PROMPTS = ("copy",)
UNDER_TRAINED = 0.01  # Land & Bartolo's threshold on the largest probability
STEPS = 3  # greedy steps per prompt
BATCH = 32  # candidates per forward pass, at most
CONTROLS = 200  # ordinary tokens drawn as the control sample
LOGITS_BYTES = 512 * 2**20  # float32 logits of one forward pass, at most (the batch shrinks for wide vocabularies)
MARK = "\u2063TOKEN\u2063"  # where the candidate's id goes in a rendered template (invisible separators around it)


class Contradiction(RuntimeError):
    """A token certified unargmaxable came out as the model's strict greedy argmax."""


def check_architecture(path: str | Path, architecture: str | None) -> None:
    """Refuse, in one line, a GGUF file whose architecture transformers does not run (before anything is read)."""
    path = Path(path)
    if path.suffix != ".gguf" or architecture is None:
        return
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

    if architecture not in GGUF_SUPPORTED_ARCHITECTURES:
        raise ValueError(f"{str(path)!r}: transformers cannot run a GGUF model of architecture {architecture!r} "
                         f"(it runs {', '.join(a for a in GGUF_SUPPORTED_ARCHITECTURES if a != 'general')}); "
                         "audit it without --prompt")


def load_causal_lm(path: str | Path, architecture: str | None = None):
    """The whole model a GGUF file (or a transformers directory) holds, in float32 on the CPU, read offline by
    transformers. Refused in one line where transformers does not run its architecture (:func:`check_architecture`)
    or cannot build the model from the file (a tensor missing, say)."""
    import torch
    from transformers import AutoModelForCausalLM

    path = Path(path)
    gguf = path.is_file() and path.suffix == ".gguf"
    check_architecture(path, architecture)
    try:
        kwargs = {"gguf_file": path.name} if gguf else {"trust_remote_code": False}
        model = AutoModelForCausalLM.from_pretrained(str(path.parent if gguf else path), dtype=torch.float32,
                                                     local_files_only=True, **kwargs)
    except (ValueError, OSError, KeyError, TypeError, RuntimeError, AttributeError, ImportError) as err:
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise ValueError(f"{str(path)!r}: transformers cannot run this model ({first}); audit it without --prompt"
                         ) from None
    return model.eval()


def chosen_prompts(names: Sequence[str] | None = None) -> dict[str, tuple[str, str]]:
    """The prompts of :data:`PROMPTS` named (default :data:`DEFAULT_PROMPTS`), refused in one line if unknown."""
    names = list(names or DEFAULT_PROMPTS)
    unknown = [k for k in names if k not in PROMPTS]
    if unknown or not names:
        raise ValueError(f"prompts must be among {', '.join(PROMPTS)}; got {', '.join(unknown) or 'none'}")
    return {k: PROMPTS[k] for k in names}


def prompt_ids(tokenizer, prompts: Mapping[str, tuple[str, str]] | None = None) -> dict[str, list[list[int]]]:
    """Each prompt as the ids between the places of the candidate (k places: k + 1 parts, the first shared by every
    candidate): the request in the tokenizer's chat template (where it has one) with the reply begun, else the
    request and the reply on two lines; the text encoded with its special tokens, a BOS put first where the
    tokenizer adds one and the template did not."""
    out = {}
    for name, (request, reply) in (prompts or chosen_prompts()).items():
        user = request.format(token=MARK)
        if getattr(tokenizer, "chat_template", None):
            text = tokenizer.apply_chat_template([{"role": "user", "content": user}], tokenize=False,
                                                 add_generation_prompt=True) + reply.format(token=MARK)
        else:
            text = f"{user}\n{reply.format(token=MARK)}"
        ids = [list(tokenizer(part, add_special_tokens=False)["input_ids"]) for part in text.split(MARK)]
        bos = getattr(tokenizer, "bos_token_id", None)
        if bos is not None and getattr(tokenizer, "add_bos_token", False) and ids[0][:1] != [bos]:
            ids[0] = [bos, *ids[0]]
        out[name] = ids
    return out


def _with(parts: Sequence[Sequence[int]], token: int) -> list[int]:
    """A prompt's ids after its shared first part, with ``token`` in each of its places."""
    return [i for part in parts[1:] for i in (token, *part)]


@dataclass
class Prompting:
    """The prompting test's results: per candidate (``table``: ``category``, ``reason``, ``p_<prompt>`` per prompt,
    ``max_prob``, ``greedy_emitted``: whether a greedy continuation held it, ``under_trained``: max_prob below
    :data:`UNDER_TRAINED`), and the run: seconds, runs (candidate x prompt), positions checked against the
    certificate, positions where a certified-unargmaxable token came first with another row at least as high in
    float64 (a tie, or rounding), the
    largest difference between the model's head and the audited one, and how many candidates came from the state
    file."""

    table: pd.DataFrame
    seconds: float
    runs: int
    positions: int
    rounding: int
    head_difference: float
    resumed: int
    steps: int = STEPS
    prompts: dict | None = None  # name -> the prompt in words
    token_seconds: float = 0.0  # what the tested tokens cost, read back with them where resumed

    def summary(self) -> dict:
        tested = len(self.table)
        return {"tested": tested, "under_trained": int(self.table["under_trained"].sum()),
                "seconds": round(self.seconds, 1), "runs": self.runs, "positions_checked": self.positions,
                "rounding_ties": self.rounding, "head_difference": self.head_difference, "resumed": self.resumed,
                "seconds_per_token": round(self.token_seconds / tested, 4) if tested else None}


def _cached_forward(model):
    """``forward(input_ids, cache=None) -> (output, cache)``: one pass of ``model`` that returns and extends the
    key-value cache, under the name the installed transformers takes it by (``cache`` in its 5.x releases, which warn
    on the older ``past_key_values``), looked up once."""
    new = "cache" in inspect.signature(model.forward).parameters

    def forward(input_ids, cache=None):
        given = {} if cache is None else {"cache" if new else "past_key_values": cache}
        out = model(input_ids=input_ids, use_cache=True, **given)
        return out, out.cache if new else out.past_key_values

    return forward


def _head(model):
    """The model's output layer's weight (n, d) and bias (or None), as torch tensors."""
    head = model.get_output_embeddings()
    return head.weight, getattr(head, "bias", None)


def head_difference(model, W: np.ndarray) -> float:
    """The largest absolute difference between the model's head weights and the audited W (inf where the shapes
    differ): 0 where transformers and the audit read the same head."""
    weight, _ = _head(model)
    if tuple(weight.shape) != W.shape:
        return float("inf")
    worst = 0.0
    for s in range(0, W.shape[0], 8192):
        a = weight[s : s + 8192].detach().double().numpy()
        worst = max(worst, float(np.abs(a - np.asarray(W[s : s + 8192], dtype=np.float64)).max(initial=0.0)))
    return worst


def _check_positions(logits, hidden, forbidden: np.ndarray, model, where: str, names, rows, batch_ids,
                     offset: int = 0) -> int:
    """Hold the greedy argmax of every position (``logits`` (B, T, n), the head's input ``hidden`` (B, T, d)) to the
    certificate: raise :class:`Contradiction` where a forbidden token is the strict argmax in float64; return, per
    row, how many positions put one first with another row as high in float64 (a tie, or float32 rounding)."""
    import torch

    top = logits.argmax(dim=-1)  # first index on ties, as greedy decoding breaks them
    hits = torch.nonzero(torch.from_numpy(forbidden)[top], as_tuple=False)
    rounding = np.zeros(len(batch_ids), dtype=np.int64)
    if not len(hits):
        return rounding
    weight, bias = _head(model)
    for bi, ti in hits.tolist():
        t = int(top[bi, ti])
        h = hidden[bi, ti].detach().double()
        z = torch.cat([weight[s : s + 8192].detach().double() @ h for s in range(0, weight.shape[0], 8192)])
        if bias is not None:
            z = z + bias.detach().double()
        zt = float(z[t])
        z[t] = -float("inf")
        other = int(z.argmax())
        if zt > float(z[other]):
            raise Contradiction(
                f"token {t} {names(t)} is certified unargmaxable, yet it is the model's greedy argmax at position "
                f"{offset + ti} of {where} " + (f"run on candidate {int(batch_ids[bi])} {names(int(batch_ids[bi]))}"
                                                 if batch_ids[bi] >= 0 else "(its part before any candidate)")
                + f" (ids {rows[bi].tolist()}): its logit {float(logits[bi, ti, t]):.9g} (float64 {zt:.17g}) "
                f"against the best other, token {other} {names(other)}, at {float(logits[bi, ti, other]):.9g} (float64 "
                f"{float(z[other]):.17g}); a bug in the loader, the box or the core")
        rounding[bi] += 1
    return rounding


def run_key(prompts: Mapping[str, Sequence[Sequence[int]]], steps: int, n: int) -> str:
    """What a state file's rows were computed with: the prompts' ids, the steps and the vocabulary's size."""
    text = json.dumps({"prompts": {k: [list(p) for p in parts] for k, parts in prompts.items()}, "steps": steps,
                       "n": n}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def prompt_test(model, prompts: Mapping[str, Sequence[Sequence[int]]], candidates: pd.DataFrame,
                forbidden: np.ndarray, *, steps: int = STEPS, batch: int = BATCH, state: str | Path | None = None,
                progress: bool = False, names=None, W: np.ndarray | None = None) -> Prompting:
    """The prompting test of ``candidates`` (``category``, ``reason``) with ``model`` (a transformers causal LM),
    each prompt (:func:`prompt_ids`) run for ``steps`` greedy steps; ``forbidden`` (n,) marks the tokens no position
    may have for its greedy argmax (certified unargmaxable, less each tie group's emitted id). ``state``: a parquet
    file the results so far are written to after every batch and read back from (rows of other prompts or steps
    are dropped). ``names(id)`` shows a token in a contradiction's message; ``W``, the audited head, is compared
    with the model's (:func:`head_difference`)."""
    import torch
    from tqdm.auto import tqdm

    from argmaxable.provenance import atomic_path

    weight, _ = _head(model)
    n = int(weight.shape[0])
    names = names or (lambda i: "")
    forbidden = np.asarray(forbidden, dtype=bool)
    if forbidden.shape != (n,):
        raise ValueError(f"the certificate covers {forbidden.shape[0]} tokens; the model's head has {n}")
    key = run_key(prompts, steps, n)
    done = pd.DataFrame()
    if state is not None and Path(state).is_file():
        done = pd.read_parquet(state)
        kept = {"run_key", "positions", "ties", "seconds"} <= set(done.columns)  # a state file of this format
        done = done[done["run_key"] == key] if kept else done.iloc[:0]
    todo = candidates[~candidates["category"].isin(done["category"] if len(done) else [])]
    ids = todo["category"].to_numpy(dtype=np.int64)
    if ids.size and (ids.min() < 0 or ids.max() >= n):
        raise ValueError(f"candidate ids must lie in 0..{n - 1}")
    length = max(len(_with(parts, 0)) for parts in prompts.values()) + steps
    batch = max(1, min(batch, LOGITS_BYTES // (4 * n * length)))
    captured = {}
    hook = model.get_output_embeddings().register_forward_hook(lambda m, args, out: captured.__setitem__("h", args[0]))
    rows_out, positions, rounding = [], 0, 0
    t0 = time.perf_counter()
    bar = tqdm(total=len(ids) * len(prompts), desc="prompting test", unit="run", disable=not progress)
    try:
        with torch.inference_mode():
            shared, forward = {}, _cached_forward(model)
            for name, parts in prompts.items():  # the ids before the candidate: run once, their cache shared
                seq = torch.tensor([parts[0]], dtype=torch.long)
                out, cache = forward(seq)
                rounding += _check_positions(out.logits, captured["h"], forbidden, model, f"the {name!r} prompt",
                                             names, seq, np.array([-1])).sum()
                positions += seq.shape[1]
                shared[name] = (cache, seq)
            for s in range(0, len(ids), batch):
                chunk = ids[s : s + batch]
                probs, emitted = np.zeros((len(chunk), len(prompts))), np.zeros(len(chunk), dtype=bool)
                counted, ties, started = np.zeros(len(chunk), dtype=np.int64), np.zeros(len(chunk), dtype=np.int64), \
                    time.perf_counter()
                for p, (name, parts) in enumerate(prompts.items()):
                    cache, prefix = copy.deepcopy(shared[name][0]), shared[name][1]
                    cache.batch_repeat_interleave(len(chunk))
                    seq = torch.tensor([_with(parts, int(t)) for t in chunk], dtype=torch.long)
                    tail = torch.cat([prefix.expand(len(chunk), -1), seq], dim=1)
                    where = f"the {name!r} prompt"
                    out, cache = forward(seq, cache)
                    ties += _check_positions(out.logits, captured["h"], forbidden, model, where, names, tail, chunk,
                                             offset=len(parts[0]))
                    counted += out.logits.shape[1]
                    last = out.logits[:, -1]
                    for step in range(steps):
                        rows = torch.arange(len(chunk)), torch.from_numpy(chunk.copy())
                        p_now = torch.softmax(last.double(), dim=-1)[rows]
                        probs[:, p] = np.maximum(probs[:, p], p_now.numpy())
                        nxt = last.argmax(dim=-1)
                        emitted |= (nxt.numpy() == chunk)
                        if step == steps - 1:
                            break
                        tail = torch.cat([tail, nxt[:, None]], dim=1)
                        out, cache = forward(nxt[:, None], cache)
                        ties += _check_positions(out.logits, captured["h"], forbidden, model, where, names, tail,
                                                 chunk, offset=tail.shape[1] - 1)
                        counted += 1
                        last = out.logits[:, -1]
                    bar.update(len(chunk))
                part = pd.DataFrame({"category": chunk, **{f"p_{k}": probs[:, j] for j, k in enumerate(prompts)}})
                part["max_prob"], part["greedy_emitted"] = probs.max(axis=1), emitted
                # what each candidate cost, kept with it so that a resumed run states the whole test's totals
                part["positions"], part["ties"] = counted, ties
                part["seconds"], part["run_key"] = (time.perf_counter() - started) / len(chunk), key
                rows_out.append(part)
                if state is not None:
                    with atomic_path(Path(state)) as tmp:
                        pd.concat([done, *rows_out], ignore_index=True).to_parquet(tmp, index=False)
    finally:
        hook.remove()
        bar.close()
    seconds = time.perf_counter() - t0
    table = pd.concat([done, *rows_out], ignore_index=True) if len(done) or rows_out else pd.DataFrame(
        {"category": np.zeros(0, dtype=np.int64), **{f"p_{k}": [] for k in prompts}, "max_prob": [],
         "greedy_emitted": np.zeros(0, dtype=bool), "positions": [], "ties": [], "seconds": [], "run_key": []})
    costs = table[["positions", "ties", "seconds"]].sum()
    table = candidates[["category", "reason"]].merge(table.drop(columns=["run_key", "positions", "ties", "seconds"]),
                                                     on="category", how="left")
    table["under_trained"] = table["max_prob"] < UNDER_TRAINED
    return Prompting(table, seconds, len(ids) * len(prompts), int(positions + costs["positions"]),
                     int(rounding + costs["ties"]), head_difference(model, W) if W is not None else float("nan"),
                     len(candidates) - len(ids), steps, token_seconds=float(costs["seconds"]))


def select_candidates(tokens: pd.DataFrame, *, controls: int = CONTROLS, seed: int = 0,
                      trip: pd.DataFrame | None = None) -> pd.DataFrame:
    """The tokens the prompting test runs: the ``share`` each signal flags (``flag_indicator``, ``flag_norm``,
    ``flag_radius``: the signals' columns of :func:`argmaxable.audit.signals`), every unargmaxable token outside a
    tie group, and ``controls`` ordinary tokens drawn at random (seeded): flagged by no signal, of type normal, and
    (with a round trip) round-tripping. Returns ``category`` and ``reason`` (the lists that chose it, comma-joined),
    in id order."""
    lists = {"indicator": tokens["flag_indicator"].to_numpy(dtype=bool),
             "norm": tokens["flag_norm"].to_numpy(dtype=bool),
             "radius": tokens["flag_radius"].to_numpy(dtype=bool),
             "unargmaxable": (tokens["flag_unargmaxable"] & (tokens["tie_group"] < 0)).to_numpy(dtype=bool)}
    chosen = np.column_stack(list(lists.values()))
    ordinary = ~chosen.any(axis=1) & ~tokens["flag_tie"].to_numpy(dtype=bool)
    types = tokens["token_type"].astype(str).to_numpy()
    ordinary &= (types == "normal") | (types == "")
    if trip is not None:
        ordinary &= trip["round_trip"].to_numpy() == "round-trips"
    pool = np.flatnonzero(ordinary)
    picked = np.random.default_rng(seed).choice(pool, size=min(controls, pool.size), replace=False)
    control = np.zeros(len(tokens), dtype=bool)
    control[picked] = True
    lists["control"] = control
    names = np.array(list(lists))
    marks = np.column_stack(list(lists.values()))
    keep = np.flatnonzero(marks.any(axis=1))
    return pd.DataFrame({"category": keep, "reason": [",".join(names[marks[i]]) for i in keep]})


SIGNAL_COLUMNS = {"certified radius": "flag_radius", "row norm": "flag_norm", "indicator": "flag_indicator"}


def signal_scores(tokens: pd.DataFrame, table: pd.DataFrame) -> list[dict]:
    """Per signal (:data:`SIGNAL_COLUMNS`), how it finds the verified set (the tested tokens under-trained): of the
    tokens it flags, the share verified (precision), and of the verified tokens, the share it flags (recall); None
    for a signal that flags no tested token (an indicator without reference tokens)."""
    tested = table["category"].to_numpy()
    verified = set(table.loc[table["under_trained"], "category"].astype(int))
    out = []
    for label, col in SIGNAL_COLUMNS.items():
        flags = set(np.flatnonzero(tokens[col].to_numpy(dtype=bool)).tolist()) & set(tested.tolist())
        hit = len(flags & verified)
        out.append({"signal": label, "flagged_and_tested": len(flags), "verified_among_them": hit,
                    "precision": hit / len(flags) if flags else None,
                    "recall": hit / len(verified) if verified and flags else None})
    return out


def forbidden_tokens(status: Sequence[str], greedy_emits: Sequence[int]) -> np.ndarray:
    """The tokens no greedy argmax may be: certified unargmaxable, less the ids greedy decoding emits on a tie."""
    out = np.asarray(status) == "unargmaxable"
    out[np.asarray(list(greedy_emits), dtype=np.int64)] = False
    return out
