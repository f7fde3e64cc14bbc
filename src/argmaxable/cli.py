r"""Command-line interface: check a softmax layer or sigmoid label assignments from a weights file.

    argmaxable check softmax layer.npz [--weight-key K] [--bias-key K] [--out table.parquet]
    argmaxable check softmax model.onnx [--activation silu] [--vocab tokens.txt]
    argmaxable check softmax model.gguf
    argmaxable check softmax HuggingFaceTB/SmolLM2-135M [--revision R]   (or a bare hub id: gpt2)
    argmaxable check assignments layer.pt labels.txt [--out table.csv]
    argmaxable audit model.gguf [--out PREFIX] [--hardest 20] [--unused '<unused\d+>'] [--prompt]
                     [--export transformers|llama.cpp|vllm]
    argmaxable verify table.parquet layer.npz [--labels labels.txt] [--vocab tokens.txt]
    argmaxable config show [experiment=paper detect.bound=50 ...]
    argmaxable config pin [--models KEY ...] [--dry-run]
    argmaxable config catalogues

User errors (bad files, missing keys, bad settings) print one line to stderr and exit with status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

import argmaxable as am  # the checks through the package attributes, as users call them
from argmaxable._version import __version__
from argmaxable.core import CheckResult, SolverError, activation_bounds
from argmaxable.core.box import ACTIVATIONS, DTYPES, activation_dtype
from argmaxable.core.settings import ASSIGNMENT_BOUND, BOUND
from argmaxable.provenance import write_table
from argmaxable.text import csv_frame, csv_uncell, printable
from argmaxable.verify import DEFAULT_BOUND, DEFAULT_EPS, checked_radii

EXIT_USAGE = 2  # argparse's own status for bad usage; we use it for every user error
# What only the extra `pipeline` installs (pyproject.toml), by import name: a command that needs one says so.
PIPELINE_MODULES = ("omegaconf", "hydra", "snakemake", "matplotlib", "datasets")
LISTED = 20  # unargmaxable tokens printed by `check softmax` (the full table goes to --out)
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what shells report for a command stopped by Ctrl-C
EVIDENCE_SUFFIX = ".evidence.npz"  # beside the table: the whole result with its evidence
# The longest name written beside --out: its evidence file, staged as ".<name>.XXXXXXXX.tmp" (tempfile.mkstemp)
STAGED_EXTRA = len(EVIDENCE_SUFFIX) + len("..XXXXXXXX.tmp")


class UsageError(ValueError):
    """A bad command-line input; printed as one line."""


def read_labels(path: str | Path, n: int):
    """Label assignments from a text file (one assignment per line: active label indices separated by spaces;
    an empty line is the assignment with no active label; ``#`` starts a comment) or a .npy bool matrix."""
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"labels file {str(path)!r} does not exist")
    if path.suffix == ".npy":
        Y = np.load(path, allow_pickle=False)
        if Y.ndim != 2 or Y.shape[1] != n:
            raise UsageError(f"labels matrix {str(path)!r} must have shape (m, {n}); got {Y.shape}")
        return Y
    assignments = []
    for lineno, line in enumerate(path.read_text().splitlines(), start=1):
        if line.lstrip().startswith("#"):
            continue
        try:
            assignments.append([int(tok) for tok in line.split("#", 1)[0].split()])
        except ValueError:
            raise UsageError(f"{path}:{lineno}: expected label indices separated by spaces, got {line!r}") from None
    if not assignments:
        raise UsageError(f"labels file {str(path)!r} holds no assignment")
    return assignments


def _describe(path, W, b) -> str:
    return f"{path}: {W.shape[0]} x {W.shape[1]} weights, {'with' if b is not None else 'no'} bias"


def _read_layer(args):
    """The head :func:`argmaxable.load_head` reads from the command's model (a weights file, an ONNX or GGUF model,
    a Hugging Face model directory or hub id), with a line naming what was read: the tensor or keys, the commit of
    a hub id, the activation an ONNX graph shows and where its tokens came from."""
    layer = am.load_head(args.path, weight_key=args.weight_key, bias_key=args.bias_key, no_bias=args.no_bias,
                         revision=getattr(args, "revision", None), vocab=getattr(args, "vocab", None))
    revision = f" (revision {layer.info['revision']})" if "revision" in layer.info else ""
    hint = f"; for the activation-aware box add --activation {layer.activation}" if layer.activation and \
        getattr(args, "activation", None) is None else ""
    print(f"head: {printable(layer.origin)}{revision}{hint}")
    if "tokens" in layer.info and getattr(args, "vocab", None) is None:  # an ONNX model's own dictionary
        print(f"tokens: {printable(layer.info['tokens'])}")
    return layer


def _settings(args, bound_default: float, layer=None) -> dict:
    """Only the options the user gave: everything else keeps the core's documented defaults. ``--activation``
    becomes the box ``lower``/``upper`` of :func:`argmaxable.core.activation_bounds`, for the activation as the
    model computes it (:func:`_activation_box`). Every value is checked here, by the core's own rules, so a bad one
    is refused before the model is read or anything printed."""
    from argmaxable.core.box import make_box
    from argmaxable.core.settings import Settings

    names = ("bound", "lower", "upper", "patience", "eps", "solver", "workers")
    out = {k: getattr(args, k) for k in names if getattr(args, k) is not None}
    Settings(**{k: v for k, v in out.items() if k not in ("lower", "upper")})
    out.update(_activation_box(args, out.get("bound", bound_default), layer))
    make_box(1, out.get("bound", bound_default), out.get("lower"), out.get("upper"))
    return out


def _activation_box(args, bound: float, layer=None) -> dict:
    """``lower``/``upper`` of ``--activation`` in the dtype of ``--activation-dtype``, else of the layer's stored
    weights where the loader knows it (ONNX, GGUF, Hugging Face), else float32; {} without ``--activation``."""
    if args.activation is None:
        if args.activation_dtype is not None:
            raise UsageError("--activation-dtype applies to the box of an --activation")
        return {}
    if args.lower is not None or args.upper is not None:
        raise UsageError("give either --activation or --lower/--upper, not both")
    dtype = args.activation_dtype or activation_dtype(None if layer is None else layer.precision)
    lower, upper = activation_bounds(args.activation, bound, dtype)
    return {"lower": lower, "upper": upper}


def _name(i: int, layer) -> str:
    """Category i as the shell lists it: its id, its token (quoted, escaped) and its type where the model has them."""
    token = f":{layer.tokens[i]!r}" if layer.tokens is not None else ""
    kind = f" ({layer.token_types[i]})" if layer.token_types is not None else ""
    return f"{i}{token}{kind}"


def _split(res, layer, settings: dict | None = None):
    """The unargmaxable categories of ``res`` as ties, near-ties or strictly inside
    (:func:`argmaxable.detect.study.split_unargmaxable`), in the box the result records; None where there are none."""
    from argmaxable.core.settings import PATIENCE, SOLVER, WORKERS
    from argmaxable.detect.study import split_unargmaxable

    if not res.unargmaxable.size:
        return None
    import pandas as pd

    settings = settings or {}
    recorded = res.settings
    frame = pd.DataFrame({"box": "paper", "category": res.items, "status": res.status})
    detect = {"bound": recorded["bound"], "eps": recorded["eps"],
              "patience": recorded.get("patience", settings.get("patience", PATIENCE)),
              "solver": recorded.get("solver", settings.get("solver", SOLVER)),
              "workers": settings.get("workers", WORKERS)}
    return split_unargmaxable(layer, frame, {"paper": {"lower": recorded.get("lower"), "upper": recorded.get("upper")}},
                              detect)


def _list_unargmaxable(res, layer, settings: dict, split=None) -> None:
    """Name the unargmaxable categories (the full list goes to --out): groups of equal rows (ties) with the id greedy
    decoding still emits (the first index on ties, where the merged row can win), then the others (``split``: their
    kinds where already known, :func:`argmaxable.detect.study.split_unargmaxable`)."""
    from argmaxable.detect.study import tie_groups

    unarg = res.unargmaxable
    if not unarg.size:
        return
    groups = tie_groups(layer.W, layer.b)
    split = _split(res, layer, settings) if split is None else split
    tied = split[split["kind"] == "tie"]
    inside = split[split["kind"] != "tie"]
    shown_groups = [g for g in groups if np.isin(g, tied["category"]).any()]
    print(f"{unarg.size} unargmaxable: {len(tied)} ties in {len(shown_groups)} groups of equal rows, {len(inside)} "
          f"strictly inside the others' hull ({int((inside['kind'] == 'near-tie').sum())} of them near-ties)")
    for k, g in enumerate(shown_groups[:LISTED], start=1):
        emits = tied.loc[tied["emitted"] & tied["category"].isin(g), "category"].tolist()
        print(f"  tie group {k}: " + " = ".join(_name(int(i), layer) for i in g)
              + (f"; greedy decoding still emits {emits[0]}" if emits else "; no member can win"))
    if len(inside):
        listed = inside["category"].to_numpy()
        print("unargmaxable tokens: " + ", ".join(_name(int(i), layer) for i in listed[:LISTED])
              + (f", ... ({len(listed)} in all)" if len(listed) > LISTED else ""))
    emitted = split.loc[split["emitted"], "category"].astype(int).to_numpy()
    never = split.loc[~split["emitted"], "category"].astype(int).to_numpy()
    if emitted.size:
        print(f"emitted by greedy decoding on a tie (first index wins; never the strict argmax), {emitted.size}: "
              + _ids(emitted))
    print(f"never emitted by greedy decoding, {never.size}: " + _ids(never) if never.size else
          "greedy decoding can emit every one of them, on a tie")


def _ids(ids: np.ndarray) -> str:
    """At most :data:`LISTED` ids, and how many more."""
    return ", ".join(map(str, ids[:LISTED].tolist())) + (f", ... ({ids.size} in all)" if ids.size > LISTED else "")


def evidence_path(table: str | Path) -> Path:
    """Where ``--out TABLE`` keeps the whole result with its evidence (witnesses, certificates, settings)."""
    return Path(f"{table}{EVIDENCE_SUFFIX}")


def _check_out(args) -> None:
    """Refuse a bad ``--out`` before any computation: its suffix, and a directory we can write to."""
    if args.out is None:
        return
    out = Path(args.out)
    if out.suffix not in (".parquet", ".csv"):
        raise UsageError(f"--out must end in .parquet or .csv; got {str(out)!r}")
    if out.is_dir():
        raise UsageError(f"--out {str(out)!r} is a directory; give a file name ending in .parquet or .csv")
    parent = out.parent
    if not parent.exists():
        raise UsageError(f"--out {str(out)!r}: directory {str(parent)!r} does not exist; create it first")
    try:
        name_max = os.pathconf(parent, "PC_NAME_MAX")
    except (OSError, ValueError):
        name_max = 255
    if len(os.fsencode(out.name)) + STAGED_EXTRA > name_max:
        raise UsageError(f"--out name is too long: {len(os.fsencode(out.name))} bytes, and the files written "
                         f"beside it need {STAGED_EXTRA} more within this file system's {name_max}")
    try:
        if not parent.is_dir():
            raise NotADirectoryError(str(parent))
        with tempfile.TemporaryFile(dir=parent):  # the way to know: permissions, read-only mounts, /proc
            pass
    except OSError:
        raise UsageError(f"--out {str(out)!r}: cannot write in directory {str(parent)!r}") from None


TOKEN_COLUMNS = ("token", "raw_token", "token_type")  # readable, as stored (where they differ), GGUF's types
# What greedy decoding does with a category of each status (column greedy_decoding): an argmaxable one wins somewhere
# in the box; an unargmaxable one is never the argmax, unless it is the first index of a tie group that wins once
# merged (numpy.argmax and torch.argmax pick it: EMITS_ON_A_TIE).
GREEDY = {"argmaxable": "emits", "unargmaxable": "never emits", "undecided": "undecided"}
EMITS_ON_A_TIE = "emits on a tie"


def _decoding_columns(res, layer, split) -> dict[str, np.ndarray]:
    """Per category the columns the summary counts from: ``kind`` (tie, near-tie, strictly inside; "" for a
    category not unargmaxable), ``tie_group`` (the lowest id of its group of exactly equal rows, -1 in none) and
    ``greedy_decoding`` (:data:`GREEDY`)."""
    from argmaxable.detect.study import tie_groups

    n = len(res.items)
    status = np.asarray(res.status).astype(str)
    group = np.full(layer.W.shape[0], -1, dtype=np.int64)
    for g in tie_groups(layer.W, layer.b):
        group[g] = g[0]
    kind = np.full(n, "", dtype=object)
    greedy = np.array([GREEDY[s] for s in status], dtype=object)
    if split is not None and len(split):
        at = np.searchsorted(res.items, split["category"].to_numpy())
        kind[at] = split["kind"].to_numpy()
        greedy[at[split["emitted"].to_numpy(dtype=bool)]] = EMITS_ON_A_TIE
    return {"kind": kind, "tie_group": group[res.items], "greedy_decoding": greedy}


def _radius_note(upper: np.ndarray, tie_group: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """``radius_upper`` where it is a radius, NaN where the certificate's bound is below zero (no region: an empty
    one, or a row exactly equal to another's), with the reason in ``radius_note``; the evidence keeps the bound."""
    below = upper < 0
    tie = below & (tie_group >= 0) if tie_group is not None else np.zeros_like(below)
    note = np.where(tie, "no region: a row exactly equal to another's",
                    np.where(below, "no region: the certificate bounds the radius below zero", ""))
    return np.where(below, np.nan, upper), note.astype(object)


def _table(res, layer=None, split=None):
    """The ``--out`` table of a result: one row per item; its radii only where its own evidence backs them
    (:func:`argmaxable.verify.checked_radii`: what ``verify`` checks) and where they are radii (``radius_note`` says
    why one is not); each category's token, stored name and type where the layer names them, and the columns the
    summary counts (:func:`_decoding_columns`; ``split`` where already made, else made here from the result's box)."""
    frame = res.to_frame().rename(columns={"item": "category" if res.kind == "categories" else "assignment"})
    radius, upper = checked_radii(res)
    decoding = None
    if layer is not None and res.kind == "categories":
        decoding = _decoding_columns(res, layer, _split(res, layer) if split is None else split)
    frame["radius"] = radius
    frame["radius_upper"], frame["radius_note"] = _radius_note(upper, None if decoding is None else
                                                               decoding["tie_group"])
    if decoding is not None:
        for column, values in decoding.items():
            frame[column] = values
        named = zip(TOKEN_COLUMNS, (layer.tokens, layer.raw_tokens, layer.token_types), strict=True)
        for at, (column, values) in enumerate([(c, v) for c, v in named if v is not None], start=1):
            frame.insert(at, column, [values[i] for i in frame["category"]])
    return frame


def _write(res, args, layer, extra_inputs=(), split=None) -> None:
    """The table, its .meta.json (the command, the settings, the layer's origin and the files it was read from,
    hashed) and its evidence (``--evidence``)."""
    if args.out is None:
        return
    out = Path(args.out)
    frame = _table(res, layer, split)
    # the table, its .meta.json and its evidence are staged and renamed together: one unit, old or new
    compact = args.evidence == "compact" and res.kind == "categories"
    companions = [] if args.evidence == "none" else [
        (evidence_path(out), lambda tmp: res.write_npz(tmp, W=layer.W if compact else None))]
    write_table(frame, out, config={"command": sys.argv[1:], **res.settings},
                inputs=[*(layer.files or [args.path]), *extra_inputs], origin=layer.origin, companions=companions)
    print(f"wrote {out}" + (f" and {evidence_path(out)}" if companions else " (no evidence: 'verify' cannot re-check "
                                                                          "it; drop --evidence none to keep it)"))


def _step(args, text: str) -> None:
    """Name the step the command is at, on stderr, where ``--progress`` shows its bars."""
    if args.progress:
        print(f"argmaxable: {text}", file=sys.stderr, flush=True)


def _box_words(settings: dict, d: int) -> str:
    """The box a result records, as the inequality it is: ``|x_j| <= B``, or each end where the box is narrowed."""
    lo, hi = (np.unique(np.asarray(settings[k], dtype=np.float64)) for k in ("lower", "upper"))
    bound = settings["bound"]
    if lo.size == 1 and hi.size == 1 and lo[0] == -hi[0] == -bound:
        text = f"|x_j| <= {bound:g}"
    else:
        ends = [f"{v[0]:g}" if v.size == 1 else f"[{v[0]:g}, {v[-1]:g}]" for v in (lo, hi)]
        text = f"{ends[0]} <= x_j <= {ends[1]}"
    return (f"{text} for each of the {d} inputs x_j of the layer; eps {settings['eps']:g}: a token is argmaxable "
            "where its region holds a ball of that radius")


def _meaning(res, layer, box: str) -> None:
    """What the verdicts mean for decoding, and how far inside its region the least reachable token was found."""
    print(f"box: {box}")
    print("unargmaxable: no input x in the box makes the token the strict argmax of Wx + b, so greedy decoding "
          "never emits it (save the first id of a tie, listed below); sampling still can, with the probability "
          "softmax gives it")
    radius = np.asarray(res.radius, dtype=np.float64)
    won = np.flatnonzero((np.asarray(res.status).astype(str) == "argmaxable") & np.isfinite(radius))
    if won.size:
        t = won[np.argmin(radius[won])]
        print(f"hardest to reach by the certified bounds: {_name(int(res.items[t]), layer)}, radius >= "
              f"{radius[t]:.3g} (column radius), in the units of x: a ball of that radius around a point of the box "
              "lies in the token's region. The bound is taken at the point the check found, which may barely win, so "
              "it can sit far below the region's own radius; 'argmaxable audit' bounds the hardest from both sides")


def cmd_check_softmax(args) -> int:
    import contextlib
    import io

    _check_out(args)
    _settings(args, BOUND)  # a bad value or combination of options is refused before the model is read
    _step(args, f"reading the head of {args.path}")
    with contextlib.redirect_stdout(io.StringIO()) as notes:  # what the reader says waits until it has read
        layer = _read_layer(args)
    settings = _settings(args, BOUND, layer)
    print(notes.getvalue(), end="")
    print(_describe(args.path, layer.W, layer.b))
    _step(args, f"checking its {layer.W.shape[0]} categories")
    res = am.check_categories(layer.W, b=layer.b, progress=args.progress, **settings)
    print(res.summary().split("\n")[0] + " (column status)")
    _meaning(res, layer, _box_words(res.settings, layer.W.shape[1]))
    split = None
    if res.unargmaxable.size:
        _step(args, f"sorting its {res.unargmaxable.size} unargmaxable categories into ties and rows inside the hull")
        split = _split(res, layer, settings)
        _list_unargmaxable(res, layer, settings, split)
    if args.out is not None:
        _step(args, f"writing {args.out}")
        _write(res, args, layer, split=split)
        print(f"the counts above are columns of {args.out}: status, kind (tie, near-tie, strictly inside), tie_group "
              "(the lowest id of the row's group of equal rows) and greedy_decoding (emits, emits on a tie, never "
              "emits); radius_note says why a radius is left empty")
    return 0


def _audit_prefix(args) -> Path:
    """Where ``audit`` writes (``--out PREFIX``, default ``<model name>-audit`` here), refused before any work if its
    directory cannot be written."""
    from argmaxable.audit import outputs

    name = Path(args.path.rstrip("/")).name
    prefix = Path(args.out) if args.out else Path(f"{Path(name).stem if Path(name).suffix else name}-audit")
    longest = max(outputs(prefix).values(), key=lambda p: len(p.name))
    probe = argparse.Namespace(out=str(longest.with_suffix(".csv")))
    _check_out(probe)
    return prefix


def _model_source(args, layer) -> Path:
    """Where the model's tokenizer and whole weights are read from: the GGUF file, the model directory, or the
    hub snapshot the head came from."""
    path = Path(args.path)
    if path.is_file() or path.is_dir() or not layer.files:
        return path
    return Path(layer.files[0]).parent


def cmd_audit(args) -> int:
    from argmaxable.audit import audit_layer, write_audit
    from argmaxable.audit.export import export
    from argmaxable.audit.prompting import Contradiction, check_architecture, chosen_prompts, load_causal_lm
    from argmaxable.audit.roundtrip import load_tokenizer

    prefix = _audit_prefix(args)
    _settings(args, BOUND)  # a bad combination of options is refused before the model is read
    layer = _read_layer(args)
    settings = _settings(args, BOUND, layer)
    print(_describe(args.path, layer.W, layer.b))
    source = _model_source(args, layer)
    tokenizer = model = None
    if args.prompt:
        check_architecture(source, (layer.info or {}).get("architecture"))
        chosen_prompts(args.prompts.split(",") if args.prompts else None)
    if args.round_trip or args.prompt:
        try:
            tokenizer = load_tokenizer(source)
        except ValueError as err:
            if args.prompt:
                raise
            print(f"no tokenizer round trip: {printable(str(err))}")
    if args.prompt:
        model = load_causal_lm(source, (layer.info or {}).get("architecture"))  # refused before the check's work
    try:
        audit = audit_layer(layer, name=Path(args.path.rstrip("/")).name, hardest=args.hardest, refine=args.refine,
                            lp_rounds=args.lp_rounds or None, unused=args.unused, progress=args.progress,
                            tokenizer=tokenizer, model=model, controls=args.controls, steps=args.steps,
                            batch=args.batch, state=Path(f"{prefix}.prompting.parquet") if model else None,
                            prompts=args.prompts.split(",") if args.prompts else None, **settings)
    except Contradiction as err:
        print(f"argmaxable: contradiction, audit stopped: {printable(str(err))}", file=sys.stderr)
        return 1
    card = audit.card
    print(audit.result.summary().split("\n")[0] + f" (in the box {card['box']})")
    print(card["decoding"])
    _list_unargmaxable(audit.result, layer, settings, audit.unargmaxable)
    if card["hardest"]:
        h = card["hardest"][0]
        print(f"hardest to reach of the {len(card['hardest'])} tokens the LP bounded (the smallest certified bounds "
              f"and the longest reflections): {_name(h['id'], layer)}, radius in [{h['radius_at_least']:.3g}, "
              f"{h['radius_at_most']:.3g}]; every other argmaxable token's region holds a ball of radius >= "
              f"{card['others_at_least']:.3g} (certified)")
    if card["round_trip"]:
        print("round trip: " + ", ".join(f"{v['tokens']} {k}" for k, v in card["round_trip"]["classes"].items()))
    if card["prompting"]:
        p = card["prompting"]
        print(f"prompting test: {p['candidates']['under_trained']} of {p['candidates']['tested']} candidates and "
              f"{p['controls']['under_trained']} of {p['controls']['tested']} controls under-trained (largest "
              f"probability below {p['threshold']:g}); {p['positions_checked']} positions held to the certificate, "
              f"0 contradictions; {p['seconds_per_token']} s a token ({p['resumed']} tokens read back)")
    paths = write_audit(audit, prefix, layer.W, evidence=args.evidence, model=args.path,
                        config={"command": sys.argv[1:], **audit.result.settings}, inputs=layer.files or [args.path])
    for stack in args.export or []:
        from argmaxable.provenance import atomic_path

        out = Path(f"{prefix}.{stack}.{'txt' if stack == 'llama.cpp' else 'json'}")
        with atomic_path(out) as tmp:
            tmp.write_text(export(card, stack) + "\n", encoding="utf-8")
        paths[f"export {stack}"] = out
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    return 0


def cmd_check_assignments(args) -> int:
    _check_out(args)
    _settings(args, ASSIGNMENT_BOUND)  # a bad combination of options is refused before the model is read
    layer = _read_layer(args)
    settings = _settings(args, ASSIGNMENT_BOUND, layer)
    W, b = layer.W, layer.b
    Y = read_labels(args.labels, W.shape[0])
    print(_describe(args.path, W, b))
    res = am.check_assignments(W, Y, b, progress=args.progress, **settings)
    print(res.summary())
    print(f"{int(res.one_argmaxable().sum())} of {len(res)} assignments are 1-argmaxable (radius > 1)")
    _write(res, args, layer, [args.labels])
    return 0


FLOAT_COLUMNS = ("radius", "radius_upper", "witness_norm")


def _table_mismatch(table: Path, res, layer) -> str | None:
    """Where the table disagrees with what its evidence and the layer give (:func:`_table`), or None. Every
    column is compared: one that cannot be checked (a token column without the names, one we never write) is a
    mismatch, never skipped."""
    import pandas as pd

    try:
        frame = pd.read_parquet(table) if table.suffix == ".parquet" else csv_frame(
            pd.read_csv(table, keep_default_na=False, dtype=str), csv_uncell)
    except Exception as err:  # pyarrow, pandas and OS errors: the table is unreadable
        raise UsageError(f"cannot read the table {str(table)!r}: {str(err).strip().splitlines()[0]}") from None
    want = _table(res, layer)
    if len(frame) != len(want):
        return f"{len(frame)} rows for {len(want)} items"
    for column in frame.columns:
        if column not in want:
            need = " without the names the check gave the rows (give its --vocab)" if column in TOKEN_COLUMNS else ""
            return f"column {printable(column)!r} cannot be checked against the evidence{need}"
    for column in want.columns:
        if column not in frame:
            return f"no column {column!r}"
        a, b = want[column].to_numpy(), frame[column].to_numpy()
        if column in FLOAT_COLUMNS:
            b = pd.to_numeric(pd.Series(b), errors="coerce").to_numpy(dtype=np.float64)
            same = (a == b) | (np.isnan(a) & np.isnan(b))
        else:
            same = a.astype(str) == b.astype(str)
        if not same.all():
            k = int(np.flatnonzero(~same)[0])
            return f"column {column!r} differs at {int((~same).sum())} rows (first: row {k}, " \
                   f"{printable(repr(b[k]))} in the table, {printable(repr(a[k]))} from the evidence)"
    return None


def _box_text(settings: dict) -> str:
    """The box and eps verified, per coordinate where they differ from the bound."""
    bound = settings.get("bound")
    text = f"bound {bound}, eps {settings.get('eps')}"
    for key, edge in (("lower", -1), ("upper", 1)):
        values = np.unique(np.asarray(settings.get(key, []), dtype=np.float64))
        if values.size and not (values.size == 1 and bound is not None and values[0] == edge * bound):
            shown = f"{values[0]:g}" if values.size == 1 else f"{values.size} values in [{values[0]:g}, {values[-1]:g}]"
            text += f", {key} {shown}"
    return text


def cmd_verify(args) -> int:
    given = Path(args.result)
    if given.name.endswith(".npz"):
        path = given
        table = given.with_name(given.name[: -len(EVIDENCE_SUFFIX)]) if given.name.endswith(EVIDENCE_SUFFIX) else None
        table = table if table is not None and table.is_file() else None
    else:
        path, table = evidence_path(given), given
        if not table.is_file():
            raise UsageError(f"no table {str(table)!r}: give the table 'check --out' wrote, or its .evidence.npz")
    if not path.is_file():
        raise UsageError(f"no evidence file {str(path)!r}: give the .evidence.npz that 'check --out' wrote "
                         "beside its table, or the table itself (a check run with --evidence none kept none: run it "
                         "again without that option to re-check it)")
    layer = _read_layer(args)
    W, b = layer.W, layer.b
    try:
        res = CheckResult.load(path, W=W)
    except (KeyError, ValueError, OSError) as err:
        raise UsageError(f"{path}: not an evidence file written by 'argmaxable check --out' ({err})") from None
    _same_layer(args, layer, res, table)
    items = None
    if res.kind != "categories":
        if args.labels is None:
            raise UsageError(f"a {res.kind} result needs its label sets: --labels FILE")
        items = read_labels(args.labels, W.shape[0])
    given_settings = {k: getattr(args, k) for k in ("bound", "eps", "lower", "upper") if getattr(args, k) is not None}
    bound = given_settings.setdefault("bound", DEFAULT_BOUND.get(res.kind, 100.0))
    given_settings.setdefault("eps", DEFAULT_EPS)
    given_settings.update(_activation_box(args, bound, layer))
    valid = am.verify_certificate(res, W, b, items=items, **given_settings)
    print(f"{path}: {int(valid.sum())} of {len(valid)} verdicts verified, answers and radii included (at "
          f"{_box_text(given_settings)})")
    failed = 0
    if table is not None:
        mismatch = _table_mismatch(table, res, layer)
        print(f"{table}: " + (f"does not match its evidence: {mismatch}" if mismatch else "matches its evidence"))
        failed |= mismatch is not None
    decided = res.status != "undecided"
    if not decided.any():
        print("no verdict to verify: every item is undecided")
        failed = 1
    if not valid.all():
        bad = res.items[~valid]
        print(f"evidence fails for {int((~valid).sum())} items: {', '.join(map(str, bad[:20].tolist()))}"
              f"{' ...' if len(bad) > 20 else ''}")
        failed = 1
    return int(failed)


def _same_layer(args, layer, res, table) -> None:
    """Say which layer is verified, and how many of its categories a categories result names where not all (a
    subset, such as the audit's hardest tokens, is checked against every row all the same); refuse a layer that is
    not the one the result was made from: where the table's .meta.json records the files the check read (by
    sha256), one of them must be among the files read here."""
    from argmaxable.provenance import file_sha256, sidecar

    files = [Path(f) for f in (layer.files or [args.path]) if Path(f).is_file()]
    hashes = {file_sha256(f): f for f in files}
    shown = ", ".join(f"{f} (sha256 {h[:12]})" for h, f in hashes.items()) or str(args.path)
    n = layer.W.shape[0]
    print(f"layer: {layer.W.shape[0]} x {layer.W.shape[1]} from {shown}")
    if res.kind == "categories" and len(np.unique(res.items)) != n:
        print(f"the result covers {len(np.unique(res.items))} of the layer's {n} categories: the others have no "
              "verdict here")
    meta = None if table is None else sidecar(table)
    if meta is None or not meta.is_file():
        print("no .meta.json beside the table: whether this is the layer the check read is not recorded")
        return
    try:
        recorded = json.loads(meta.read_text()).get("inputs") or {}
    except (OSError, ValueError, AttributeError):
        raise UsageError(f"{meta}: not a readable record of the check (JSON with its inputs)") from None
    if not isinstance(recorded, dict) or not recorded:
        print(f"{meta}: records no input files: whether this is the layer the check read is not recorded")
        return
    if not set(map(str, recorded.values())) & set(hashes):
        raise UsageError(f"the layer given is not the one the result was made from: {meta} records "
                         f"{', '.join(f'{k} (sha256 {str(v)[:12]})' for k, v in list(recorded.items())[:3])}; "
                         f"read here: {shown}")


def cmd_config_show(args) -> int:
    from omegaconf import OmegaConf

    from argmaxable.config import load_config

    print(OmegaConf.to_yaml(load_config(args.overrides)), end="")
    return 0


def cmd_config_pin(args) -> int:
    from argmaxable.config import CONFIG_DIR
    from argmaxable.detect.hub import endpoint
    from argmaxable.detect.pins import pin
    from argmaxable.fetch import DownloadError

    config_dir = Path(args.config_dir or CONFIG_DIR)
    try:
        results = pin(config_dir, args.models, refresh=args.refresh, dry_run=args.dry_run)
    except DownloadError as err:
        raise UsageError(str(err)) from None
    failed = 0
    for decl, commit, what in results:
        ok = what in ("pinned", "unchanged", "would pin")
        failed += not ok
        print(f"{decl.key}: {decl.repo} {decl.revision} -> {commit or '?'} {what if ok else 'failed: ' + what}")
    print(f"{sum(w == 'pinned' for _, _, w in results)} pinned, {sum(w == 'unchanged' for _, _, w in results)} "
          f"unchanged, {failed} failed ({endpoint()}, {config_dir})")
    return int(failed > 0)


def cmd_config_catalogues(args) -> int:
    from argmaxable.config import CONFIG_DIR
    from argmaxable.detect.catalogues import write

    config_dir = Path(args.config_dir or CONFIG_DIR)
    try:
        written = write(config_dir)
    except (ValueError, KeyError, OSError) as err:
        raise UsageError(f"catalogues of {config_dir}: {err}") from None
    for path in written:
        print(f"wrote {path}")
    print(f"{len(written)} model config(s) written from {config_dir / 'catalogues'}")
    return 0


def cmd_report_readme(args) -> int:
    from argmaxable.report import readme_blocks, update_documents

    summary, readme = Path(args.summary), Path(args.readme)
    blocks = {}
    if args.card is None or summary.is_file():
        if not summary.is_file():
            raise UsageError(f"no run summary {str(summary)!r}: run the pipeline (rule make_report writes it)")
        blocks = readme_blocks(json.loads(summary.read_text()))
    if args.card is not None:
        from argmaxable.audit.card import EXCERPT, markdown

        card = Path(args.card)
        if not card.is_file():
            raise UsageError(f"no audit card {str(card)!r}: give the .json that 'argmaxable audit' wrote")
        data = json.loads(card.read_text())
        text = markdown(data, only=EXCERPT, level=4).strip()
        blocks["audit"] = (f"{text}\n\n(the card `argmaxable audit {data['model']}` wrote, on a shared machine; "
                           "excerpt generated by `argmaxable report readme --card`)")
    changed = update_documents(readme, blocks)
    print(f"generated blocks {', '.join(blocks)} filled" + (f" in {', '.join(map(str, changed))}" if changed else
                                                             " (unchanged)"))
    return 0


def _add_layer_options(p: argparse.ArgumentParser, bound_default: str,
                       out=("FILE", "write one row per item to FILE (.parquet or .csv)")) -> None:
    p.add_argument("path", help="weights file (.npz, .npy, .pt/.pth/.bin, .safetensors), an ONNX model (.onnx), "
                   "a GGUF model (.gguf), a Hugging Face model directory (save_pretrained) or hub id (owner/name or "
                   "a bare name such as gpt2: only the config, the tokenizer files and the head's bytes are fetched, "
                   "from HF_ENDPOINT, cached under $ARGMAXABLE_CACHE)")
    p.add_argument("--revision", metavar="R", help="branch, tag or commit of a hub id (default: main); the commit "
                   "it names is recorded")
    p.add_argument("--weight-key", metavar="K", help="name of the weight matrix in the file (default: "
                   "lm_head.weight, decoder_ff_logit_out_W, ff_logit_W, decoder_Wemb, Wemb_dec, Wemb, weight, W); "
                   "for .onnx the tensor holding the logits (default: found from the Softmax or graph output)")
    p.add_argument("--vocab", metavar="FILE", help="vocabulary naming each row's token (vocab.json, vocab.txt, "
                   "one token per line, ...): listed and written to --out beside each category")
    p.add_argument("--bias-key", metavar="K", help="name of the bias vector (default: the first known one present)")
    p.add_argument("--no-bias", action="store_true", help="ignore any bias in the file")
    p.add_argument("--bound", type=float, help=f"box on the inputs |x_j| <= B (default {bound_default})")
    p.add_argument("--lower", type=float, help="narrow the box: x_j >= LOWER for every coordinate")
    p.add_argument("--upper", type=float, help="narrow the box: x_j <= UPPER for every coordinate")
    p.add_argument("--activation", choices=sorted(ACTIVATIONS), help="narrow the box to the range of the "
                   "activation feeding the head (e.g. relu: x_j >= 0, silu: x_j >= -0.2785, tanh: |x_j| <= 1; "
                   "gelu is the erf form, gelu_tanh the tanh approximation)")
    p.add_argument("--activation-dtype", choices=DTYPES, help="the dtype the model computes that activation in "
                   "(float16/bfloat16 rounding reaches below the exact range; default: the stored weights' type "
                   "where the model file says it, else float32)")
    p.add_argument("--patience", type=int, help="approximate-stage steps before the exact LP")
    p.add_argument("--eps", type=float, help="Chebyshev radius that counts as a region (default 1e-8)")
    p.add_argument("--solver", help="LP solver: highs (default) or gurobi")
    p.add_argument("--workers", type=int, help="LPs solved at once (default 2)")
    p.add_argument("--out", metavar=out[0], help=out[1])
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=sys.stderr.isatty(),
                   help="show progress bars on stderr (default: when stderr is a terminal)")


def _add_evidence_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--evidence", choices=("compact", "full", "none"), default="compact", help="what --out keeps "
                   "for 'verify': compact (default; witnesses that are a token's own row are made again from the "
                   "model, the others stored), full (every witness stored), or none (no evidence: 'verify' "
                   "cannot re-check the result)")


class _Parser(argparse.ArgumentParser):
    """argparse with its usage errors on one line, as every other error (the usage is in ``--help``)."""

    def error(self, message: str):
        print(f"argmaxable: error: {printable(message)} (see {self.prog} --help)", file=sys.stderr)
        sys.exit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    from argmaxable.audit import HARDEST, LP_ROUNDS, REFINE

    parser = _Parser(prog="argmaxable", description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action="version", version=f"argmaxable {__version__}")
    groups = parser.add_subparsers(dest="group", required=True, metavar="{check,audit,verify,config,report}")

    check = groups.add_parser("check", help="check a softmax layer or sigmoid label assignments")
    checks = check.add_subparsers(dest="what", required=True, metavar="{softmax,assignments}")
    softmax = checks.add_parser("softmax", help="which categories (tokens) of softmax(Wx+b) can be the argmax")
    _add_layer_options(softmax, "100, as Grivas et al. (ACL 2022)")
    _add_evidence_option(softmax)
    softmax.set_defaults(func=cmd_check_softmax)
    assign = checks.add_parser("assignments", help="which label assignments of sigmoid(Wx+b) are argmaxable")
    _add_layer_options(assign, "1e4, as Grivas's thesis (2024)")
    _add_evidence_option(assign)
    assign.add_argument("labels", help="text file, one assignment per line (active label indices separated by "
                        "spaces), or a .npy boolean matrix (m, n)")
    assign.set_defaults(func=cmd_check_assignments)

    audit = groups.add_parser("audit", help="one card per model: every token's verdict and certified reachability, "
                              "ties, and under-training signals (Markdown, HTML, JSON)")
    _add_layer_options(audit, "100, as Grivas et al. (ACL 2022)", out=(
        "PREFIX", "prefix of the files written: PREFIX.md, .html, .json, .tokens.parquet, .evidence.npz, "
                  ".hardest.evidence.npz (default: <model name>-audit in this directory)"))
    audit.set_defaults(func=cmd_audit)
    audit.add_argument("--hardest", type=int, default=HARDEST, metavar="K", help="argmaxable tokens with the "
                       f"smallest certified regions whose radius the LP bounds from both sides (default {HARDEST})")
    audit.add_argument("--refine", type=int, default=REFINE, metavar="M", help="tokens whose lower bound is "
                       f"tightened at the witness before the K hardest are chosen (default {REFINE})")
    audit.add_argument("--lp-rounds", type=int, default=LP_ROUNDS, metavar="R", help="constraint-generation rounds "
                       "of each of the K LPs, at most; the card gives the bounds reached where one stops before its "
                       f"optimum (default {LP_ROUNDS}; 0: to the optimum, minutes a token on a wide head)")
    audit.add_argument("--unused", metavar="SPEC", help="the model's unused tokens, which the unembedding indicator "
                       "compares every row with: ids and ranges ('5,7,100-120') or a regular expression a token's "
                       "whole name matches (default: GGUF type 'unused' and names such as <unused12>)")
    audit.add_argument("--round-trip", action=argparse.BooleanOptionalAction, default=True, help="decode and "
                       "re-encode every token with the tokenizer the model carries (default: on, where transformers "
                       "reads it)")
    audit.add_argument("--prompt", action="store_true", help="run the model itself (transformers, CPU): the "
                       "prompting test of the candidates, every position held to the certificate; resumable from "
                       "PREFIX.prompting.parquet")
    audit.add_argument("--prompts", metavar="NAMES", help="the prompting test's prompts, comma-separated, among "
                       "copy, repeat, explain (default: copy)")
    audit.add_argument("--controls", type=int, default=200, metavar="K", help="ordinary tokens the prompting test "
                       "runs as controls (default 200)")
    audit.add_argument("--steps", type=int, default=None, metavar="S", help="greedy steps per prompt (default 3)")
    audit.add_argument("--batch", type=int, default=None, metavar="B", help="candidates per forward pass (default "
                       "32, fewer for a wide vocabulary)")
    audit.add_argument("--export", action="append", choices=("transformers", "llama.cpp", "vllm"), help="write the "
                       "verified under-trained ids and the tie members greedy decoding never emits in that stack's "
                       "form: PREFIX.transformers.json, PREFIX.llama.cpp.txt, PREFIX.vllm.json (repeatable)")
    _add_evidence_option(audit)

    verify = groups.add_parser("verify", help="re-check the evidence of a saved result independently")
    verify.add_argument("result", help="the table written by 'check --out' (its .evidence.npz is read) or the "
                        ".evidence.npz itself")
    verify.add_argument("path", help="the weights file the check ran on")
    verify.add_argument("--labels", help="label sets file (for an assignments result)")
    verify.add_argument("--weight-key", metavar="K", help="name of the weight matrix in the file")
    verify.add_argument("--bias-key", metavar="K", help="name of the bias vector")
    verify.add_argument("--no-bias", action="store_true", help="ignore any bias in the file")
    verify.add_argument("--bound", type=float, help="box to verify at (must agree with the result's record)")
    verify.add_argument("--lower", type=float, help="x_j >= LOWER for every coordinate (must agree with the record)")
    verify.add_argument("--upper", type=float, help="x_j <= UPPER for every coordinate (must agree with the record)")
    verify.add_argument("--activation", choices=sorted(ACTIVATIONS), help="the box of that activation (as in "
                        "check; must agree with the record)")
    verify.add_argument("--activation-dtype", choices=DTYPES, help="the activation's dtype (as in check)")
    verify.add_argument("--vocab", metavar="FILE", help="the vocabulary the check named the rows with (its "
                        "--vocab): the table's token column is checked against it")
    verify.add_argument("--eps", type=float, help="eps to verify at (must agree with the result's record)")
    verify.set_defaults(func=cmd_verify)

    config = groups.add_parser("config", help="inspect the composed Hydra configuration")
    configs = config.add_subparsers(dest="what", required=True, metavar="{show,pin,catalogues}")
    show = configs.add_parser("show", help="print the composed, validated config")
    show.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. experiment=paper detect.bound=50")
    show.set_defaults(func=cmd_config_show)
    pin = configs.add_parser("pin", help="write into the model configs the commit each hub repo's revision names now "
                             "(asks HF_ENDPOINT; needs a network)")
    pin.add_argument("--models", nargs="*", default=[], metavar="KEY", help="model keys to pin (default: every "
                     "hub model)")
    pin.add_argument("--refresh", action="store_true", help="ask 'main' again for models pinned already")
    pin.add_argument("--dry-run", action="store_true", help="show the commits, write nothing")
    pin.add_argument("--config-dir", help="the config tree to edit (default: the repository's config/)")
    pin.set_defaults(func=cmd_config_pin)
    catalogue = configs.add_parser("catalogues", help="write config/model/<key>.yaml of every catalogue row "
                                   "(config/catalogues/: the WMT17, OPUS-MT and Bergamot models)")
    catalogue.add_argument("--config-dir", help="the config tree (default: the repository's config/)")
    catalogue.set_defaults(func=cmd_config_catalogues)

    report = groups.add_parser("report", help="the replication report's outputs")
    reports = report.add_subparsers(dest="what", required=True, metavar="{readme}")
    readme = reports.add_parser("readme", help="fill README.md's generated blocks (coverage, per-model counts "
                                "and check times) from a run's report_summary.json")
    readme.add_argument("--summary", default="results/report_summary.json", help="the run's summary "
                        "(default: results/report_summary.json)")
    readme.add_argument("--readme", default="README.md", help="the README to update, with the pages of the docs/ "
                        "beside it (default: README.md)")
    readme.add_argument("--card", help="an audit card's .json (argmaxable audit): fill the README's card excerpt")
    readme.set_defaults(func=cmd_report_readme)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; return the exit status (0 on success, 2 on a user error)."""
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ModuleNotFoundError as err:  # `pip install .` is the tool alone; config and report need the pipeline's
        if (err.name or "").split(".")[0] not in PIPELINE_MODULES:
            raise
        print(f"argmaxable: error: 'argmaxable {args.group}' needs the pipeline's packages ({err.name} is not "
              "installed): pip install 'argmaxable[pipeline]', or '.[pipeline]' from a clone", file=sys.stderr)
        return EXIT_USAGE
    except (ValueError, OSError, SolverError) as err:  # our errors: WeightsError, ConfigError, UsageError...
        message = str(err).strip().splitlines() or [type(err).__name__]
        print(f"argmaxable: error: {printable(message[0])}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:  # Ctrl-C: one line, the shell's status for SIGINT, no partial file (atomic writes)
        print("argmaxable: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
