"""What the report concludes for each item: its status (:data:`STATUSES`) from its declaration and this run's files,
our column beside the paper's (exact match, within tolerance, self-check, differs), the paper's claim tested on
our values, the method differences, and the coverage counts (a check several items share counted once).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from argmaxable.core.reflect import stall_window
from argmaxable.provenance import sidecar
from argmaxable.report.declarations import BEYOND, DeclarationError, _claim_names, citation
from argmaxable.report.query import (
    OPS,
    _format,
    _number,
    _read_table,
    _select,
    describe_value,
    fill,
    read_value,
    value_files,
)

# What the report concludes (computed), in the coverage table's order.
STATUSES = ("exact match", "within tolerance", "self-check", "unresolved", "same inputs", "differs",
            "substitute data", "beyond the papers", "not run", "out of scope", "missing")

# Outcomes of a comparison, best first. "unresolved": our value's uncertainty interval reaches the smallest (or
# largest) value the quantity can take, so it would admit every paper value on that side: no tolerance is granted.
COMPARED = ("exact match", "within tolerance", "self-check", "unresolved", "differs")

VERDICTS = ("agrees", "differs", "inconclusive")  # ours against the paper's claim (or: cannot tell)

CLAIM_PHRASES = {"agrees": "ours agrees with", "differs": "ours differs from",
                 "inconclusive": "this run cannot decide"}

TABLE_SUFFIXES = (".parquet", ".csv")

FIGURE_SUFFIXES = (".png",)

TEXT_SUFFIXES = (".md",)

@dataclass
class Assessment:
    """One catalogue item (or one item beyond the papers) with what we made for it."""

    paper: str
    item: str
    title: str
    status: str
    line: str  # the one-line relation
    family: str | None = None
    figures: list[Path] = field(default_factory=list)
    tables: list[Path] = field(default_factory=list)
    texts: list[Path] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    comparison: pd.DataFrame | None = None
    cited: list[str] = field(default_factory=list)  # where the paper prints the compared values
    differences: list[str] = field(default_factory=list)
    claim: dict | None = None  # {text, cite, verdict, detail, cause}
    paper_values: pd.DataFrame | None = None  # the paper's numbers for a substitute, shown beside ours
    paper_cite: str = ""
    provenance: list[dict] = field(default_factory=list)
    compare_key: str = ""  # the same comparison (tables, columns, cells) on another item has the same key
    views: list[tuple[str, pd.DataFrame, Path]] = field(default_factory=list)  # (title, rows, file): shown whole
    links: list[tuple[str, list[Path]]] = field(default_factory=list)  # (title, files under the results): linked

    @property
    def name(self) -> str:
        return f"{self.paper} {self.item}"

def _one_check(chk: dict, values: dict[str, Any], fmt: dict[str, str | None]) -> tuple[bool | None, str]:
    """One ``{left, op, right, times}`` comparison: whether it holds (None: a side has no number) and as text."""
    left = values[chk["left"]]
    raw = values[chk["right"]] if isinstance(chk["right"], str) else chk["right"]
    lnum, rnum = _number(left), _number(raw)
    # the declared factor times the right side, to 12 digits: 0.75 x 0.2 is 0.15, not 0.15000000000000002
    ok = None if lnum is None or rnum is None else \
        bool(OPS[chk["op"]](lnum, float(f"{rnum * chk.get('times', 1):.12g}")))
    rname = chk["right"] if isinstance(chk["right"], str) else chk.get("as", "the paper's")  # a typed threshold
    times = f"{chk['times']:g} x " if "times" in chk else ""
    text = (f"{chk['left']} {_format(left, fmt.get(chk['left']))} {chk['op']} {times}{rname} "
            f"{_format(raw, fmt.get(chk['right']) if isinstance(chk['right'], str) else None)}")
    return ok, f"{text}: {'no number' if ok is None else 'holds' if ok else 'fails'}"

def check_claim(checks: list[dict], values: dict[str, Any], formats: dict[str, str | None] | None = None,
                inconclusive: list[dict] | None = None) -> tuple[str, str, str]:
    """Whether ours agrees with the paper's claim: every ``{left, op, right}`` check holds.

    ``left``/``right`` name values (``right`` may be a number: the paper's, as its claim states it);
    ``times`` multiplies the right side (a claim such as "a lot more": the factor is the declaration's); ``as``
    names a numeric right side that is not a number the paper prints (default "the paper's").
    ``inconclusive`` lists conditions of the same form, each with ``why`` (and optionally ``and``: more
    conditions that must hold with it): when one holds the check cannot decide (both sides zero, too few samples,
    a run that stops short of where the claim applies), and neither does a check whose value is not a number.
    Returns the verdict (one of :data:`VERDICTS`), the checks as text (each with the values it compared) and,
    for "inconclusive", why.
    """
    fmt = formats or {}
    done = [_one_check(chk, values, fmt) for chk in checks]
    detail = "; ".join(text for _, text in done)
    blocked = [(chk, text) for chk in inconclusive or [] for ok, text in [_one_check(chk, values, fmt)]
               if ok and all(_one_check(also, values, fmt)[0] for also in chk.get("and", []))]
    if blocked:
        return "inconclusive", detail, "; ".join(f"{chk['why']} ({text.rsplit(':', 1)[0]})" for chk, text in blocked)
    if any(ok is None for ok, _ in done):
        return "inconclusive", detail, "a compared value is not a number in this run"
    return ("agrees" if all(ok for ok, _ in done) else "differs"), detail, ""

def _relation(decl: dict, experiment: str) -> dict:
    """The declared relation for this experiment (the offline one when the experiment has none)."""
    rel = decl.get("relation", {})
    return rel.get(experiment) or rel.get("offline") or {"kind": "not_run", "note": "no relation declared"}

def compare(spec: dict, results_dir: Path) -> tuple[str, str, pd.DataFrame]:
    """Compare our column with the paper's column of one table, cell by cell.

    ``spec``: ``table`` (path under results), ``key`` (columns naming a cell), ``ours`` (column name),
    ``paper`` (a column of the same table, or the paper's numbers as records ``[{<key>: ..., paper: ...}]``),
    ``cite`` (the lines of the paper's text printing its values) or ``self_check`` (what the project computed in their
    place: the outcome is then "self-check", never a match), optional ``tolerance`` (absolute, with its
    ``tolerance_reason``; a cell is within it when |diff| < tolerance, strictly), optional ``interval`` (two
    columns of the table, low and high, bounding our value's uncertainty: a cell is within tolerance when the
    paper's value lies between them, with its ``tolerance_reason``; with ``floor`` and/or ``ceiling``, the smallest
    and largest value the quantity can take: an interval reaching one of them bounds nothing on that side, would
    admit every paper value there, and is refused: the outcome is "unresolved") and ``where`` ({column: value}).

    Returns
    -------
    status : {"exact match", "within tolerance", "self-check", "unresolved", "differs"}
    summary : str
    cells : DataFrame
        key columns, ours, paper, diff (rows where the paper has no value are dropped).
    """
    df = _read_table(results_dir / spec["table"])
    interval = list(spec.get("interval", []))
    named = [*spec["key"], spec["ours"], *([] if isinstance(spec["paper"], list) else [spec["paper"]]), *interval]
    if absent := [c for c in named if c not in df.columns]:
        raise KeyError(", ".join(map(repr, absent)))
    where = spec.get("where")
    if isinstance(where, str):
        raise DeclarationError(f"compare on {spec['ours']!r}: `where` is a mapping {{column: value}}, not an "
                               "expression")
    df = _select(df, where)
    if isinstance(spec["paper"], list):  # the paper's numbers, given in the declaration
        ours = df[[*spec["key"], spec["ours"], *interval]].rename(columns={spec["ours"]: "ours"})
        paper = pd.DataFrame(spec["paper"])
        as_text = {k: str for k in spec["key"]}  # keys compare as text (a CSV column may mix numbers and labels)
        cells = ours.astype(as_text).merge(paper.astype(as_text), on=spec["key"], how="inner")
    else:
        cells = df[[*spec["key"], spec["ours"], spec["paper"], *interval]].rename(
            columns={spec["ours"]: "ours", spec["paper"]: "paper"})
    cells = cells.dropna(subset=["paper"]).reset_index(drop=True)
    ours = pd.to_numeric(cells["ours"], errors="coerce")
    paper = pd.to_numeric(cells["paper"], errors="coerce")
    numeric = ours.notna().all() and paper.notna().all()
    tol = float(spec.get("tolerance", 0))
    if numeric:
        cells["diff"] = ours - paper
        equal, within = cells["diff"] == 0, cells["diff"].abs() < tol
        if interval:  # the paper's value inside our value's uncertainty range
            low, high = (pd.to_numeric(cells[c], errors="coerce") for c in interval)
            floor, ceiling = spec.get("floor", -np.inf), spec.get("ceiling", np.inf)
            refused = ((low <= floor) | (high >= ceiling)) & (cells["diff"] != 0)
            if refused.any():
                i = refused.idxmax()
                edge = f"the smallest value it can take, {floor:g}" if low[i] <= floor else \
                    f"the largest value it can take, {ceiling:g}"
                return "unresolved", (f"ours {_format(float(ours[i]), None)} against the paper's "
                                      f"{_format(float(paper[i]), None)}; our uncertainty interval ({interval[0]}-"
                                      f"{interval[1]}: {low[i]:g}-{high[i]:g}) reaches {edge}, so it would admit "
                                      "every value on that side: no tolerance is granted"), cells
            within |= (low <= paper) & (paper <= high)
    else:  # verdicts and other labels: equal or not
        equal = within = cells["ours"].astype(str) == cells["paper"].astype(str)
    n = len(cells)
    self_check = spec.get("self_check")
    if n == 0:
        return "differs", "no cell of ours has a paper value to compare with", cells
    if equal.all():
        return ("self-check", f"{n}/{n} cells equal the project's own values ({self_check})", cells) \
            if self_check else ("exact match", f"{n}/{n} cells equal", cells)
    bound = f"±{tol:g}" if tol else f"{interval[0]}-{interval[1]}" if interval else "equality"
    if (equal | within).all() and not self_check:
        return "within tolerance", (f"{n}/{n} cells within {bound} ({int(equal.sum())} equal; "
                                    f"{spec['tolerance_reason']})"), cells
    worst = f", largest |diff| {cells['diff'].abs().max():g}" if numeric else ""
    return "differs", f"{int((~(equal | within)).sum())}/{n} cells outside {bound}{worst}", cells

def provenance(path: Path) -> dict | None:
    """Code version, creation time, config hash and input hashes from a result's ``.meta.json`` sidecar."""
    meta_path = sidecar(path)
    if not meta_path.exists():
        return None
    meta = json.loads(meta_path.read_text())
    cfg = meta.get("config")
    config = json.dumps(cfg, sort_keys=True, default=str)
    return {"file": path.name, "experiment": cfg.get("experiment") if isinstance(cfg, dict) else None,
            "code_version": meta.get("code_version"), "created": meta.get("created"),
            "config_sha256": hashlib.sha256(config.encode()).hexdigest()[:12],
            "inputs": {Path(k).name: v[:12] for k, v in (meta.get("inputs") or {}).items()}}

def _value_specs(decl: dict, rel: dict) -> dict[str, dict]:
    return {**decl.get("values", {}), **rel.get("values", {})}

def assess(paper: str, entry: dict, decl: dict | None, results_dir: Path, experiment: str,
           families: list[str] | None = None, *, config: Any = None, methods: list[str] | None = None,
           papers: dict[str, dict] | None = None) -> Assessment:
    """Status and one-line relation of one catalogue item for this run.

    ``families``: the families whose rules ran (None: all); an item of another family is "not run".
    ``papers``: the catalogue (citations name the paper and the place of its lines, :func:`citation`);
    ``config``: the composed config (``{cfg:...}``);
    ``methods``: the method differences that change this item's numbers (from :func:`method_differences`).
    """
    a = Assessment(paper=paper, item=entry["item"], title=entry["title"], status="missing",
                   line="no family declares this item")
    if decl is None:
        if entry.get("out_of_scope"):
            a.status, a.line = "out of scope", f"out of scope: {entry['out_of_scope']}"
        return a
    a.family = decl["family"]
    rel = _relation(decl, experiment)
    if skipped := _not_run(a.family, decl, rel, families):
        a.status, a.line = skipped
        return a
    outputs = [results_dir / p for p in rel.get("outputs", decl.get("outputs", []))]
    specs = rel.get("compare", decl.get("compare")) or []
    specs = specs if isinstance(specs, list) else [specs]
    value_specs = _value_specs(decl, rel)
    views = rel.get("views", decl.get("views", []))
    a.missing = _missing_inputs([*outputs, *(results_dir / v["table"] for v in views)], specs, value_specs,
                                results_dir)
    if a.missing or not outputs:
        needs = decl.get("needs")
        a.status = "not run" if needs else "missing"
        a.line = f"not run: needs {needs}" if needs else f"missing: {', '.join(a.missing) or 'no outputs declared'}"
        return a
    values = _read_values(value_specs, results_dir, f"{a.family}.yaml: {paper} {a.item}")
    formats = {name: v.get("fmt") for name, v in value_specs.items()}
    text = lambda t: fill(t, values, formats, config)  # noqa: E731 - every prose field fills the same way
    a.differences = [text(d) for d in rel.get("differences", decl.get("differences", []))] + list(methods or [])
    a.figures = [p for p in outputs if p.suffix in FIGURE_SUFFIXES]
    a.tables = [p for p in outputs if p.suffix in TABLE_SUFFIXES]
    a.texts = [p for p in outputs if p.suffix in TEXT_SUFFIXES and p.stem not in {t.stem for t in a.tables}]
    a.provenance = [rec for p in outputs if (rec := provenance(p))]
    a.views = [(v["title"], _select(_read_table(results_dir / v["table"]), v.get("where")).reset_index(drop=True),
                results_dir / v["table"]) for v in views]
    a.links = [(link["title"], [f.relative_to(results_dir) for f in value_files(link, results_dir)])
               for link in rel.get("links", decl.get("links", []))]
    note = text(rel.get("note", decl.get("note", "")))
    if claim := rel.get("claim", decl.get("claim")):
        a.claim = _assess_claim(claim, values, formats, text, paper, papers, value_specs, results_dir)
    if pv := rel.get("paper_values", decl.get("paper_values")):
        a.paper_values, a.paper_cite = pd.DataFrame(pv["rows"]), citation(pv["cite"], paper, papers)
    claim_text = f"; {CLAIM_PHRASES[a.claim['verdict']]} the paper's claim" if a.claim else ""
    if decl.get("beyond"):
        a.status, a.line = "beyond the papers", f"beyond the papers: {note}{claim_text}"
    elif rel["kind"] == "substitute":
        a.status, a.line = "substitute data", f"substitute data: {note}{claim_text}"
    elif specs:
        _assess_comparisons(a, specs, results_dir, papers)
        a.line = f"{a.line}{': ' + note if note else ''}{claim_text}"
    else:
        a.status, a.line = "same inputs", (f"same inputs: {note}" if note else "same inputs") + claim_text
    return a

def _not_run(family: str, decl: dict, rel: dict, families: list[str] | None) -> tuple[str, str] | None:
    """("not run", line) when this experiment does not run the item or its family did not run; else None."""
    if rel["kind"] == "not_run":
        return "not run", f"not run in this experiment: {rel.get('note', '')}".rstrip(": ")
    if families is not None and family not in families:
        return "not run", (f"not run: needs {decl['needs']}" if decl.get("needs") else
                           f"not run: the {family} family is disabled in this run")
    return None

def _missing_inputs(outputs: list[Path], specs: list[dict], value_specs: dict[str, dict],
                    results_dir: Path) -> list[str]:
    """Every file the item reads (outputs, compared tables, value files and globs) that does not exist."""
    needed = dict.fromkeys([*outputs, *(results_dir / spec["table"] for spec in specs),
                            *(results_dir / v["file"] for v in value_specs.values() if "file" in v)])
    missing = [str(p.relative_to(results_dir)) for p in needed if not p.exists()]
    return missing + list(dict.fromkeys(v["glob"] for v in value_specs.values()
                                        if "glob" in v and not value_files(v, results_dir)))

def _read_values(value_specs: dict[str, dict], results_dir: Path, where: str) -> dict[str, Any]:
    """The declared values, read from the results; a value its file lacks is a DeclarationError."""
    try:
        return {name: read_value(v, results_dir) for name, v in value_specs.items()}
    except (KeyError, IndexError, ValueError) as err:
        raise DeclarationError(f"{where}: a `values` entry names something its file does not have ({err}); fix the "
                               "declaration's column/key/where") from None

def _key(obj: Any) -> str:
    """A short hash of a declaration's part: two items with the same key run the same check."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:12]

def _assess_claim(claim: dict, values: dict[str, Any], formats: dict[str, str | None], text, paper: str,
                  papers: dict[str, dict] | None, value_specs: dict[str, dict], results_dir: Path) -> dict:
    """The paper's claim with its citation, our verdict, what it read (files and rows of each compared value),
    the declared evidence it rests on and, when ours differs, the declared cause (inconclusive: why). A claim that
    declares ``lacks`` (the population it is about, absent from this experiment: distilled students, say) is
    inconclusive for that reason whatever its checks say; they are still shown."""
    unsure = [{**c, "why": text(c["why"])} for c in claim.get("inconclusive", [])]  # each reason with its values
    verdict, detail, why = check_claim(claim.get("check", []), values, formats, unsure)
    if claim.get("lacks"):  # the run has none of the models the claim is about: its checks decide nothing
        verdict, why = "inconclusive", text(claim["lacks"])
    names = _claim_names(claim)
    key = _key([claim["text"], claim.get("cite"), claim.get("check"), claim.get("inconclusive"), claim.get("lacks"),
                {n: value_specs[n] for n in names}])
    return {"text": claim["text"], "cite": citation(claim["cite"], paper, papers) if "cite" in claim else "",
            "verdict": verdict, "detail": detail, "why": why,
            "evidence": text(claim.get("evidence", "")),
            "read": [describe_value(n, value_specs[n], results_dir) for n in names],
            "cause": text(claim["cause"]) if verdict == "differs" and claim.get("cause") else "",
            "key": key, "shared": []}

def _assess_comparisons(a: Assessment, specs: list[dict], results_dir: Path, papers: dict[str, dict] | None) -> None:
    """Compare every declared table: the worst outcome is the status; the line starts with their summary."""
    try:
        done = [compare(spec, results_dir) for spec in specs]
    except KeyError as err:
        raise DeclarationError(f"{a.family}.yaml: {a.paper} {a.item}: compare names column {err.args[0]} that "
                               "its table does not have; fix the declaration's key/ours/paper") from None
    a.status = max((status for status, _, _ in done), key=COMPARED.index)  # the worst of the comparisons
    summary = "; ".join(f"{spec.get('label', spec['ours'])}: {status} ({text})" if len(done) > 1 else text
                        for spec, (status, text, _) in zip(specs, done, strict=True))
    a.comparison = pd.concat([cells.assign(column=spec.get("label", spec["ours"])) if len(done) > 1 else cells
                              for spec, (_, _, cells) in zip(specs, done, strict=True)], ignore_index=True)
    a.cited = list(dict.fromkeys(citation(spec["cite"], a.paper, papers) for spec in specs if spec.get("cite")))
    a.compare_key = _key([{k: v for k, v in spec.items() if k != "cite"} for spec in specs])
    a.line = f"{a.status} ({summary})"

def method_differences(methods: list[dict], catalogue: dict, results_dir: Path, config: Any) -> list[dict]:
    """The project's method against the papers', each ``{what, ours, paper, cite, items}`` filled for this run.

    ``ours`` is a template over ``{cfg:...}``, ``{stall_min}``/``{stall_max}`` (the range of the approximate
    stage's stall window, :func:`argmaxable.core.reflect.stall_window`) and the entry's own ``values``.
    """
    builtin = {"stall_min": stall_window(2**62, 1), "stall_max": stall_window(1, 2**62)}
    out = []
    for m in methods:
        specs = m.get("values", {})
        gone = list(dict.fromkeys(v.get("file", v.get("glob")) for v in specs.values()
                                  if not all(p.exists() for p in value_files(v, results_dir))
                                  or not value_files(v, results_dir)))
        values = {**builtin, **{n: read_value(v, results_dir) for n, v in specs.items() if not gone}}
        ours = fill(m["ours"], values, {n: v.get("fmt") for n, v in specs.items()}, config) if not gone else \
            f"not measured in this run ({', '.join(gone)} absent)"
        out.append({"what": m["what"], "ours": ours, "paper": m["paper"],
                    "cite": citation(m["cite"], "", catalogue),
                    "items": [tuple(i.split(" ", 1)) for i in m.get("items", [])]})
    return out

def assess_all(catalogue: dict[str, dict], decls: dict[tuple[str, str], dict], results_dir: str | Path,
               experiment: str, families: list[str] | None = None, *, config: Any = None,
               methods: list[dict] = ()) -> list[Assessment]:
    """Every catalogue item, in each paper's order, then the items beyond the papers."""
    def per_item(paper: str, item: str) -> list[str]:
        return [f"method: {m['what']}: ours {m['ours']}; the paper {m['paper']} ({m['cite']})"
                for m in methods if (paper, item) in m["items"]]
    items = [assess(paper, entry, decls.get((paper, entry["item"])), Path(results_dir), experiment, families,
                    config=config, methods=per_item(paper, entry["item"]), papers=catalogue)
             for paper, spec in catalogue.items() for entry in spec["items"]]
    items += [assess(BEYOND, {"item": item, "title": d["title"]}, d, Path(results_dir), experiment, families,
                     config=config, papers=catalogue) for (paper, item), d in decls.items() if paper == BEYOND]
    mark_shared(items)
    return items

def coverage(items: list[Assessment]) -> pd.DataFrame:
    """Counts per paper and status (columns in :data:`STATUSES` order, plus a total row)."""
    counts = Counter((a.paper, a.status) for a in items)
    papers = list(dict.fromkeys(a.paper for a in items))
    df = pd.DataFrame([{"paper": p, **{s: counts[(p, s)] for s in STATUSES}} for p in papers])
    total = {"paper": "all", **{s: int(df[s].sum()) for s in STATUSES}}
    df = pd.concat([df, pd.DataFrame([total])], ignore_index=True)
    df["total"] = df[list(STATUSES)].sum(axis=1)
    return df

def _distinct(items: list[Assessment], key) -> dict[str, list[Assessment]]:
    """Items grouped by the check they run (``key`` of an item; None: no check)."""
    groups: dict[str, list[Assessment]] = {}
    for a in items:
        if (k := key(a)) is not None:
            groups.setdefault(k, []).append(a)
    return groups

def mark_shared(items: list[Assessment]) -> None:
    """Name, on each item's claim, the other items that run the same claim check (counted once)."""
    for group in _distinct(items, lambda a: a.claim["key"] if a.claim else None).values():
        for a in group:
            a.claim["shared"] = [b.name for b in group if b is not a]

def coverage_counts(items: list[Assessment]) -> dict[str, int]:
    """The numbers :func:`coverage_line` states (also the README's generated summary): items per status, and
    the papers' claims and comparisons by distinct check (items that share one count once)."""
    papers = [a for a in items if a.paper != BEYOND]
    c = Counter(a.status for a in papers)
    claims = _distinct(papers, lambda a: a.claim["key"] if a.claim else None)
    verdicts = Counter(group[0].claim["verdict"] for group in claims.values())
    compared = _distinct(papers, lambda a: f"{a.status} {a.compare_key}" if a.compare_key else None)
    return {"items": len(papers), "same": sum(c[s] for s in ("exact match", "within tolerance", "self-check",
                                                             "unresolved", "same inputs", "differs")),
            **{s: c[s] for s in STATUSES if s != "beyond the papers"},
            **{f"{s} checks": sum(g[0].status == s for g in compared.values()) for s in COMPARED},
            "claim items": sum(len(g) for g in claims.values()), "claims": len(claims),
            **{f"claims {v}": verdicts[v] for v in VERDICTS},
            "beyond the papers": sum(a.paper == BEYOND for a in items)}

def _checks(n_items: int, n_checks: int) -> str:
    return "" if n_items == n_checks else f" ({n_checks} distinct checks)"

def coverage_line(items: list[Assessment]) -> str:
    """One sentence: reproduced with the same inputs (and how closely), substitute data, not run, missing; the
    papers' claims by distinct check."""
    c = coverage_counts(items)
    return (f"{c['items']} items of the papers: {c['same']} reproduced with the same inputs "
            f"({c['exact match']} exact matches of numbers printed in the papers"
            f"{_checks(c['exact match'], c['exact match checks'])}, {c['within tolerance']} within "
            f"a stated tolerance of them, {c['differs']} differing{_checks(c['differs'], c['differs checks'])}, "
            f"{c['self-check']} self-checks against values the project computes where the paper prints none, "
            f"{c['unresolved']} unresolved (our value too uncertain to hold the paper's to), "
            f"{c['same inputs']} with nothing numeric to compare); {c['substitute data']} with substitute data; "
            f"{c['not run']} not run in this experiment; {c['out of scope']} out of scope (each says why); "
            f"{c['missing']} missing. The papers' claims tested on "
            f"this run are {c['claims']} distinct checks over {c['claim items']} items (an item that shares "
            f"another's check says so and counts once): {c['claims agrees']} agree, {c['claims differs']} differ, "
            f"{c['claims inconclusive']} inconclusive. {c['beyond the papers']} items beyond the papers.")
