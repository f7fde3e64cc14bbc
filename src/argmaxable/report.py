"""The replication report: every table and figure of the three seed papers, ours beside theirs.

Inputs are plain YAML files in ``workflow/report/``:

- ``papers.yaml``, the catalogue: each paper's tables and figures in the paper's order, and the method
  differences (:func:`method_differences`) with the seed lines that state the paper's method;
- ``<family>.yaml``, one per experiment family, next to its rules: the items that family makes. The fields
  are documented in ``workflow/report/theory.yaml``'s header; in short: ``paper`` and ``item`` (as the paper
  numbers it) or ``beyond: true`` (an item the papers do not have), ``outputs``, ``relation`` per experiment,
  ``compare`` (our column beside the paper's: ``cite`` names the seed lines that print the paper's values,
  ``self_check`` says what the project computed instead), ``values`` (numbers read from this run's files),
  ``claim`` (the paper's claim, its seed line and the check that says whether ours agrees), ``needs`` and
  ``differences``.

Prose never carries a number typed by hand: notes, differences and causes are templates whose ``{name}``
placeholders are filled from the item's ``values`` (read from this run's files) or ``{cfg:dotted.key}`` (the
composed config). :func:`assess` turns one declaration into a status (:data:`STATUSES`); :func:`make_report`
writes the Markdown and the self-contained HTML report (figures embedded as base64 PNG). A declared output that
does not exist makes the item "missing" (or "not run" when the declaration says what it needs); it never fails
the run.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import operator
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from argmaxable import glyphs
from argmaxable.core.reflect import stall_window
from argmaxable.provenance import atomic_path, code_version, metadata, sidecar, write_json
from argmaxable.text import csv_frame, csv_uncell, markdown_cell, markdown_table

# How an item relates to the paper's, per experiment (declared).
KINDS = ("same", "substitute", "not_run")
# What the report concludes (computed), in the coverage table's order.
STATUSES = ("exact match", "within tolerance", "self-check", "same inputs", "differs", "substitute data",
            "beyond the papers", "not run", "missing")
COMPARED = ("exact match", "within tolerance", "self-check", "differs")  # outcomes of a comparison, best first
VERDICTS = ("agrees", "differs", "inconclusive")  # ours against the paper's claim (or: cannot tell)
CLAIM_PHRASES = {"agrees": "ours agrees with", "differs": "ours differs from",
                 "inconclusive": "this run cannot decide"}
TABLE_ROWS = 25  # rows of a table shown inline; the file holds the rest
TABLE_SUFFIXES = (".parquet", ".csv")
FIGURE_SUFFIXES = (".png",)
TEXT_SUFFIXES = (".md",)
BEYOND = "beyond"  # the paper key of items the papers do not have
SIDECAR = ".meta.json"  # a result's provenance record (argmaxable.provenance.sidecar), never a value's file
ORIGIN = "origin"  # a table's column marking the paper's rows ("paper") beside ours (:func:`ours_only`)
# A placeholder in prose: {name} (a declared value) or {cfg:dotted.key} (the composed config).
PLACEHOLDER = re.compile(r"\{(cfg:[\w.]+|[A-Za-z_]\w*)\}")
AGGREGATES = {"first": lambda v: v[0], "last": lambda v: v[-1], "min": np.min, "max": np.max, "mean": np.mean,
              "median": np.median, "sum": np.sum, "count": len, "positive": lambda v: int((v > 0).sum()),
              "nunique": lambda v: len(set(v.tolist())), "list": lambda v: ", ".join(map(str, v.tolist())),
              "distinct": lambda v: ", ".join(map(str, dict.fromkeys(v.tolist())))}  # labels, in order
COUNTS = ("count", "positive", "sum", "nunique")  # aggregates whose value over no row is 0
FITS = ("slope", "intercept", "ratio_min", "ratio_max", "through_origin")  # of column against x
OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq,
       "!=": operator.ne}
# A number that a run measures, when it appears in prose outside a placeholder: a decimal or power of ten, a
# count out of a total, a time or a percentage (item numbers such as "Fig. 5.2" and sizes such as "d = 2" are
# configuration, not measurements). :func:`bare_numbers` finds them; the tests keep every declaration free of them.
MEASURED = re.compile(r"(?<![\w.])(\d+(\.\d+)?e-?\d+|\d+(\.\d+)?\s*(s|ms|min|h|%)(?!\w)|\d+(\.\d+)?x(?!\w)"
                      r"|\d+\s*(of|/)\s*\d+|\d+\.\d+(?!\.\d))")
REFERENCE = re.compile(r"(Fig\.|Figs\.|Figure|Table|Tables|eq\.|Eq\.|Thm|Theorem|Cor\.|Corollary|Prop\.|"
                       r"Proposition|Definition|§|appendix|section|ch\.)\s*[A-Z]?\d+(\.\d+)*"
                       r"(\s*(,|and|/|-)\s*[A-Z]?\d+(\.\d+)*)*", re.IGNORECASE)  # "Tables 5.1 and 5.2" too


class DeclarationError(ValueError):
    """A report declaration is malformed (names the file, the item and the fix)."""


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


def load_catalogue(path: str | Path) -> dict[str, dict]:
    """``{paper: {title, seed, items: [{item, title}, ...]}}`` from ``papers.yaml``."""
    return yaml.safe_load(Path(path).read_text())["papers"]


def load_methods(path: str | Path) -> list[dict]:
    """The method differences declared in ``papers.yaml`` (see :func:`method_differences`)."""
    return yaml.safe_load(Path(path).read_text()).get("methods", [])


def _prose(decl: dict) -> list[tuple[str, str]]:
    """Every piece of prose of a declaration as (where, text): notes, differences, and a claim's cause, evidence
    and the reasons it may be inconclusive."""
    out = []
    for prefix, holder in [("", decl), *((f"relation.{k}.", v) for k, v in decl.get("relation", {}).items())]:
        if holder.get("note"):
            out.append((f"{prefix}note", holder["note"]))
        out += [(f"{prefix}differences", d) for d in holder.get("differences", [])]
        claim = holder.get("claim") or {}
        out += [(f"{prefix}claim.{k}", claim[k]) for k in ("cause", "evidence") if claim.get(k)]
        out += [(f"{prefix}claim.inconclusive.why", c["why"]) for c in claim.get("inconclusive", [])]
    return out


def _values_of(decl: dict) -> set[str]:
    names = set(decl.get("values", {}))
    for rel in decl.get("relation", {}).values():
        names |= set(rel.get("values", {}))
    return names


def bare_numbers(text: str) -> list[str]:
    """Measured-looking numbers in ``text`` outside its ``{placeholders}`` (see :data:`MEASURED`)."""
    stripped = REFERENCE.sub(" ", PLACEHOLDER.sub(" ", text))
    return [m.group(0) for m in MEASURED.finditer(stripped)]


def _check_compare(spec: dict, where: str) -> None:
    if not (spec.get("cite") or spec.get("self_check")):
        raise DeclarationError(f"{where}: compare on {spec.get('ours')!r} needs `cite` (the seed lines that print "
                               "the paper's values) or `self_check` (what the project computed in their place)")
    if (spec.get("tolerance") or spec.get("interval")) and not spec.get("tolerance_reason"):
        raise DeclarationError(f"{where}: compare on {spec.get('ours')!r} has a tolerance without "
                               "`tolerance_reason` (why that much difference is allowed)")
    if spec.get("interval") is not None and len(spec["interval"]) != 2:
        raise DeclarationError(f"{where}: compare on {spec.get('ours')!r}: `interval` names two columns (low, "
                               "high)")


def _check_declaration(decl: dict, where: str) -> None:
    """One declaration's own rules: known relation kinds, compares that cite or self-check, placeholders that
    name declared values."""
    for exp, rel in decl.get("relation", {}).items():
        if rel.get("kind") not in KINDS:
            raise DeclarationError(f"{where}: relation.{exp}.kind must be one of {KINDS}; got {rel.get('kind')!r}")
    for holder in [decl, *decl.get("relation", {}).values()]:
        specs = holder.get("compare") or []
        for spec in specs if isinstance(specs, list) else [specs]:
            _check_compare(spec, where)
    names = _values_of(decl)
    for field_name, text in _prose(decl):
        unknown = [m for m in PLACEHOLDER.findall(text) if not m.startswith("cfg:") and m not in names]
        if unknown:
            raise DeclarationError(f"{where}: {field_name} names {{{unknown[0]}}}, which no `values` entry declares")
    for holder in [decl, *decl.get("relation", {}).values()]:
        claim = holder.get("claim") or {}
        if unknown := [n for n in _claim_names(claim) if n not in names]:
            raise DeclarationError(f"{where}: claim compares {unknown[0]!r}, which no `values` entry declares")
        if any(not c.get("why") for c in claim.get("inconclusive", [])):
            raise DeclarationError(f"{where}: each claim.inconclusive condition needs `why` (what the run cannot "
                                   "tell when it holds)")


def load_declarations(report_dir: str | Path, catalogue: dict[str, dict]) -> dict[tuple[str, str], dict]:
    """Every family's declarations keyed by (paper, item), validated against the catalogue.

    Items with ``beyond: true`` are keyed (:data:`BEYOND`, item) and need a ``title``.

    Raises
    ------
    DeclarationError
        An unknown paper or item, a relation kind outside :data:`KINDS`, an item declared twice, a compare
        without a citation or self-check reason, a tolerance without a reason, a placeholder naming no value.
    """
    known = {(p, it["item"]) for p, spec in catalogue.items() for it in spec["items"]}
    out: dict[tuple[str, str], dict] = {}
    for path in sorted(Path(report_dir).glob("*.yaml")):
        if path.name == "papers.yaml":
            continue
        doc = yaml.safe_load(path.read_text()) or {}
        for decl in doc.get("items", []):
            beyond = bool(decl.get("beyond"))
            key = (BEYOND if beyond else decl.get("paper"), str(decl.get("item")))
            where = f"{path}: {key[0]} {key[1]}"
            if beyond and not decl.get("title"):
                raise DeclarationError(f"{where}: an item beyond the papers needs a `title`")
            if not beyond and key not in known:
                raise DeclarationError(f"{where} is not in the catalogue papers.yaml; use a paper key "
                                       f"({', '.join(catalogue)}) and the item as the paper numbers it, "
                                       "or `beyond: true` for an item the papers do not have")
            if key in out:
                raise DeclarationError(f"{where} is declared twice (also in {out[key]['family']}.yaml)")
            _check_declaration(decl, where)
            out[key] = {**decl, "family": doc.get("family", path.stem)}
    return out


def _read_table(path: Path) -> pd.DataFrame:
    return pd.read_parquet(path) if path.suffix == ".parquet" else csv_frame(pd.read_csv(path), csv_uncell)


def _select(df: pd.DataFrame, where: dict | None) -> pd.DataFrame:
    """Rows whose columns equal the given values (a list: any of them; "max"/"min": the column's largest or
    smallest value among the rows left; ``{op: value}`` with an operator of :data:`OPS`: the rows where
    ``column op value`` holds; the key ``any`` with a list of such mappings: the rows any one of them selects);
    no expression is evaluated."""
    for col, want in (where or {}).items():
        if col == "any":
            df = df[df.index.isin(set().union(*(_select(df, w).index for w in want)))]
        elif want in ("max", "min"):
            df = df[df[col] == getattr(df[col], want)()]
        elif isinstance(want, dict):
            for op, bound in want.items():
                df = df[OPS[op](df[col], bound)]
        else:
            df = df[df[col].isin(want if isinstance(want, list) else [want])]
    return df


def ours_only(df: pd.DataFrame) -> pd.DataFrame:
    """The rows of a table that are this run's: a table that sets the paper's rows beside ours marks them
    ``origin == "paper"`` (:data:`ORIGIN`), and no value or claim reads them."""
    return df[df[ORIGIN] != "paper"] if ORIGIN in df.columns else df


def value_files(spec: dict, results_dir: Path) -> list[Path]:
    """The files a ``values`` entry reads: ``file``, or every match of ``glob`` (both under the results) that is
    not a provenance sidecar (``detect/study/*.json`` would also match ``<name>.parquet.meta.json``)."""
    if "glob" in spec:
        if ".." in Path(spec["glob"]).parts or Path(spec["glob"]).is_absolute():
            raise DeclarationError(f"values: glob {spec['glob']!r} must stay under the results directory")
        return sorted(p for p in results_dir.glob(spec["glob"]) if not p.name.endswith(SIDECAR))
    return [results_dir / spec["file"]]


def _json_field(record: Any, key: str) -> Any:
    for part in key.split("."):
        record = record[int(part)] if isinstance(record, list) else record[part]
    return record


def _wanted(value: Any, want: Any) -> bool:
    """Whether one JSON field matches a ``where`` entry (a value, a list of values, or ``{op: value}``)."""
    if isinstance(want, dict):
        return all(OPS[op](value, bound) for op, bound in want.items())
    return value in (want if isinstance(want, list) else [want])


def _records(spec: dict, paths: list[Path]) -> tuple[list[Any], int]:
    """The JSON records a ``values`` entry reads (its ``where`` applied), and how many its files hold."""
    records = [json.loads(p.read_text()) for p in paths]
    where = spec.get("where") or {}

    def selected(record: Any) -> bool:  # a record without a selecting field is not selected
        try:
            return all(_wanted(_json_field(record, k), w) for k, w in where.items())
        except (KeyError, IndexError, TypeError):
            return False
    return [r for r in records if selected(r)], len(records)


def _rows(spec: dict, paths: list[Path]) -> tuple[pd.DataFrame, int, int]:
    """The table rows a ``values`` entry reads (ours only, its ``where`` applied), how many are ours, and how many
    are the paper's (not read)."""
    whole = pd.concat([_read_table(p) for p in paths], ignore_index=True)
    df = ours_only(whole)
    return _select(df, spec.get("where")), len(df), len(whole) - len(df)


def read_value(spec: dict, results_dir: Path) -> Any:
    """One number (or label) from a run's files, as a ``values`` entry declares it.

    ``spec``: ``file`` or ``glob`` (under the results directory; a glob gathers one value per matching file,
    or with ``per_file: true`` takes the median over the files of each file's aggregate);
    for JSON ``key`` (dotted path), optionally ``per`` (another key to divide by) and ``where`` (fields that
    select the records); for a table ``column``, optional ``where`` ({column: value, [values], "max", "min" or
    {op: value}}), ``agg`` (one of :data:`AGGREGATES` or :data:`FITS`, default first) and ``x`` (the column a fit
    runs against); ``scale`` multiplies the result; ``empty`` is the value when no row is selected (default: NaN,
    which no claim check decides; a count (:data:`COUNTS`) is 0). A table's rows marked as the paper's are never read
    (:func:`ours_only`).
    """
    paths = value_files(spec, results_dir)
    agg = spec.get("agg", "first")
    if paths and paths[0].suffix == ".json":
        records, _ = _records(spec, paths)
        fields = [_json_field(r, spec["key"]) for r in records]
        if "per" in spec:
            fields = [f / _json_field(r, spec["per"]) for f, r in zip(fields, records, strict=True)]
        data = np.array(fields).ravel()
        data = data.astype(float) if data.dtype.kind in "biuf" else data  # numbers as floats, labels as they are
        value: Any = data[0] if len(data) else (0 if agg in COUNTS else float("nan"))
    elif spec.get("per_file"):  # the aggregate within each file, then the median over the files
        per = [read_value({k: v for k, v in spec.items() if k not in ("glob", "per_file", "scale")}
                          | {"file": str(p.relative_to(results_dir))}, results_dir) for p in paths]
        value, data = float(np.median(per)), None
    else:
        df, _, _ = _rows(spec, paths)
        if spec["column"] not in df:
            raise KeyError(spec["column"])
        if len(df) == 0:  # nothing selected: a count of 0, else ``empty`` or no number (a claim on it is
            return 0 if agg in COUNTS else spec.get("empty", float("nan"))  # inconclusive)
        value, data = df[spec["column"]].iloc[0], df[spec["column"]].to_numpy()
        if agg in FITS:
            x, y = df[spec["x"]].to_numpy(dtype=float), data.astype(float)
            slope, intercept = np.polyfit(x, y, 1)
            value = {"slope": slope, "intercept": intercept, "ratio_min": np.min(y / x),
                     "ratio_max": np.max(y / x), "through_origin": float(x @ y / (x @ x))}[agg]
            data = None
    if data is not None and agg in AGGREGATES and len(data):
        value = AGGREGATES[agg](data if data.dtype.kind in "OUSb" or agg in ("list", "distinct") else
                                data.astype(float))
    if isinstance(value, np.generic):
        value = value.item()
    return value * spec["scale"] if "scale" in spec and isinstance(value, int | float) else value


def _where_text(where: dict | None) -> str:
    def one(col: str, want: Any) -> str:
        if col == "any":
            return f"any of ({' | '.join(_where_text(w) for w in want)})"
        if isinstance(want, dict):
            return " and ".join(f"{col} {op} {v}" for op, v in want.items())
        if isinstance(want, list):
            return f"{col} in {', '.join(map(str, want))}"
        return f"{col} {want}" if want in ("max", "min") else f"{col} = {want}"
    return "; ".join(one(c, w) for c, w in (where or {}).items())


def describe_value(name: str, spec: dict, results_dir: Path) -> str:
    """What a ``values`` entry read, for a claim's evidence: its files, the rows or records selected out of how
    many (ours only), the field and the aggregate."""
    paths = value_files(spec, results_dir)
    where = _where_text(spec.get("where"))
    files = spec.get("file") or f"{spec['glob']} ({len(paths)} files)"
    agg = spec.get("agg", "first")
    if spec.get("per_file"):
        return f"{name}: {spec['column']} of each of {files}, {agg} per file, median over the files"
    if paths and paths[0].suffix == ".json":
        records, total = _records(spec, paths)
        chosen = f", {len(records)} of {total} records where {where}" if where else ""
        per = f" / {spec['per']}" if "per" in spec else ""
        return f"{name}: {files}{chosen}, {spec['key']}{per}, {agg}"
    rows, total, paper = _rows(spec, paths) if all(p.exists() for p in paths) else (pd.DataFrame(), 0, 0)
    chosen = f"{len(rows)} of {total} rows where {where}" if where else f"all {total} rows"
    chosen += f" of ours (the paper's {paper} not read)" if paper else ""
    against = f" against {spec['x']}" if "x" in spec else ""
    return f"{name}: {files}, {chosen}, {spec['column']}{against}, {agg}"


def _format(value: Any, fmt: str | None) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if value != value:  # NaN: no row selected
        return "none"
    if fmt:
        return format(value, fmt)
    return str(int(value)) if float(value).is_integer() else f"{value:.3g}"


def _config_value(config: Any, dotted: str) -> Any:
    value = config
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return f"(config {dotted} not recorded)"
        value = value[part]
    return value


def fill(text: str, values: dict[str, Any], formats: dict[str, str | None], config: Any = None) -> str:
    """``text`` with each ``{name}`` replaced by its value and each ``{cfg:key}`` by the config's."""
    def one(m: re.Match) -> str:
        name = m.group(1)
        if name.startswith("cfg:"):
            return _format(_config_value(config, name[4:]), None)
        return _format(values[name], formats.get(name))
    return PLACEHOLDER.sub(one, text)


def _number(value: Any) -> float | None:
    """``value`` as a float, or None when it is no number (absent, NaN, a label)."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        return None
    return None if np.isnan(value) else float(value)


def _one_check(chk: dict, values: dict[str, Any], fmt: dict[str, str | None]) -> tuple[bool | None, str]:
    """One ``{left, op, right, times}`` comparison: whether it holds (None: a side has no number) and as text."""
    left = values[chk["left"]]
    raw = values[chk["right"]] if isinstance(chk["right"], str) else chk["right"]
    lnum, rnum = _number(left), _number(raw)
    # the declared factor times the right side, to 12 digits: 0.75 x 0.2 is 0.15, not 0.15000000000000002
    ok = None if lnum is None or rnum is None else \
        bool(OPS[chk["op"]](lnum, float(f"{rnum * chk.get('times', 1):.12g}")))
    rname = chk["right"] if isinstance(chk["right"], str) else "the paper's"
    times = f"{chk['times']:g} x " if "times" in chk else ""
    text = (f"{chk['left']} {_format(left, fmt.get(chk['left']))} {chk['op']} {times}{rname} "
            f"{_format(raw, fmt.get(chk['right']) if isinstance(chk['right'], str) else None)}")
    return ok, f"{text}: {'no number' if ok is None else 'holds' if ok else 'fails'}"


def check_claim(checks: list[dict], values: dict[str, Any], formats: dict[str, str | None] | None = None,
                inconclusive: list[dict] | None = None) -> tuple[str, str, str]:
    """Whether ours agrees with the paper's claim: every ``{left, op, right}`` check holds.

    ``left``/``right`` name values (``right`` may be a number: the paper's, as its claim states it);
    ``times`` multiplies the right side (a claim such as "a lot more": the factor is the declaration's).
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


def _cite(spec: dict | int | list, seed: str, seeds: dict[str, str] | None = None) -> str:
    """``seed:line[,line]`` for a ``cite`` of one line, several, or ``{paper, line}`` (another paper's seed)."""
    if isinstance(spec, dict):
        seed, spec = (seeds or {})[spec["paper"]], spec["line"]
    lines = spec if isinstance(spec, list) else [spec]
    return f"{seed}:{','.join(map(str, lines))}"


def compare(spec: dict, results_dir: Path) -> tuple[str, str, pd.DataFrame]:
    """Compare our column with the paper's column of one table, cell by cell.

    ``spec``: ``table`` (path under results), ``key`` (columns naming a cell), ``ours`` (column name),
    ``paper`` (a column of the same table, or the paper's numbers as records ``[{<key>: ..., paper: ...}]``),
    ``cite`` (seed lines printing the paper's values) or ``self_check`` (what the project computed in their
    place: the outcome is then "self-check", never a match), optional ``tolerance`` (absolute, with its
    ``tolerance_reason``; a cell is within it when |diff| < tolerance, strictly), optional ``interval`` (two
    columns of the table, low and high, bounding our value's uncertainty: a cell is within tolerance when the
    paper's value lies between them, with its ``tolerance_reason``) and ``where`` ({column: value}).

    Returns
    -------
    status : {"exact match", "within tolerance", "self-check", "differs"}
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
           families: list[str] | None = None, *, seed: str = "", config: Any = None,
           methods: list[str] | None = None, seeds: dict[str, str] | None = None) -> Assessment:
    """Status and one-line relation of one catalogue item for this run.

    ``families``: the families whose rules ran (None: all); an item of another family is "not run".
    ``seed``: the paper's seed file (citations name it; ``seeds``: every paper's, for a cite naming another
    paper); ``config``: the composed config (``{cfg:...}``);
    ``methods``: the method differences that change this item's numbers (from :func:`method_differences`).
    """
    a = Assessment(paper=paper, item=entry["item"], title=entry["title"], status="missing",
                   line="no family declares this item")
    if decl is None:
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
        a.claim = _assess_claim(claim, values, formats, text, seed, seeds, value_specs, results_dir)
    if pv := rel.get("paper_values", decl.get("paper_values")):
        a.paper_values, a.paper_cite = pd.DataFrame(pv["rows"]), _cite(pv["cite"], seed, seeds)
    claim_text = f"; {CLAIM_PHRASES[a.claim['verdict']]} the paper's claim" if a.claim else ""
    if decl.get("beyond"):
        a.status, a.line = "beyond the papers", f"beyond the papers: {note}{claim_text}"
    elif rel["kind"] == "substitute":
        a.status, a.line = "substitute data", f"substitute data: {note}{claim_text}"
    elif specs:
        _assess_comparisons(a, specs, results_dir, seed, seeds)
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


def _claim_names(claim: dict) -> list[str]:
    """The values a claim's checks and inconclusive conditions compare, in order."""
    conditions = [*claim.get("check", []), *(c for i in claim.get("inconclusive", []) for c in [i, *i.get("and", [])])]
    sides = [c[k] for c in conditions for k in ("left", "right")]
    return list(dict.fromkeys(v for v in sides if isinstance(v, str)))


def _assess_claim(claim: dict, values: dict[str, Any], formats: dict[str, str | None], text, seed: str,
                  seeds: dict[str, str] | None, value_specs: dict[str, dict], results_dir: Path) -> dict:
    """The paper's claim with its citation, our verdict, what it read (files and rows of each compared value),
    the declared evidence it rests on and, when ours differs, the declared cause (inconclusive: why)."""
    verdict, detail, why = check_claim(claim.get("check", []), values, formats, claim.get("inconclusive"))
    names = _claim_names(claim)
    key = _key([claim["text"], claim.get("cite"), claim.get("check"), claim.get("inconclusive"),
                {n: value_specs[n] for n in names}])
    return {"text": claim["text"], "cite": _cite(claim["cite"], seed, seeds) if "cite" in claim else "",
            "verdict": verdict, "detail": detail, "why": why,
            "evidence": text(claim.get("evidence", "")),
            "read": [describe_value(n, value_specs[n], results_dir) for n in names],
            "cause": text(claim["cause"]) if verdict == "differs" and claim.get("cause") else "",
            "key": key, "shared": []}


def _assess_comparisons(a: Assessment, specs: list[dict], results_dir: Path, seed: str,
                        seeds: dict[str, str] | None) -> None:
    """Compare every declared table: the worst outcome is the status; the line starts with their summary."""
    try:
        done = [compare(spec, results_dir) for spec in specs]
    except KeyError as err:
        raise DeclarationError(f"{a.family}.yaml: {a.paper} {a.item}: compare names column {err.args[0]} that "
                               "its table does not have; fix the declaration's key/ours/paper") from None
    a.status = max((status for status, _, _ in done), key=COMPARED.index)  # the worst of the comparisons
    summary = "; ".join(f"{spec['ours']}: {text}" if len(done) > 1 else text
                        for spec, (_, text, _) in zip(specs, done, strict=True))
    a.comparison = pd.concat([cells.assign(column=spec["ours"]) if len(done) > 1 else cells
                              for spec, (_, _, cells) in zip(specs, done, strict=True)], ignore_index=True)
    a.cited = list(dict.fromkeys(_cite(spec["cite"], seed, seeds) for spec in specs if spec.get("cite")))
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
        gone = [v.get("file", v.get("glob")) for v in specs.values()
                if not all(p.exists() for p in value_files(v, results_dir)) or not value_files(v, results_dir)]
        values = {**builtin, **{n: read_value(v, results_dir) for n, v in specs.items() if not gone}}
        ours = fill(m["ours"], values, {n: v.get("fmt") for n, v in specs.items()}, config) if not gone else \
            f"not measured in this run ({', '.join(gone)} absent)"
        out.append({"what": m["what"], "ours": ours, "paper": m["paper"],
                    "cite": _cite(m["cite"]["line"], catalogue[m["cite"]["paper"]]["seed"]),
                    "items": [tuple(i.split(" ", 1)) for i in m.get("items", [])]})
    return out


def assess_all(catalogue: dict[str, dict], decls: dict[tuple[str, str], dict], results_dir: str | Path,
               experiment: str, families: list[str] | None = None, *, config: Any = None,
               methods: list[dict] = ()) -> list[Assessment]:
    """Every catalogue item, in each paper's order, then the items beyond the papers."""
    def per_item(paper: str, item: str) -> list[str]:
        return [f"method: {m['what']}: ours {m['ours']}; the paper {m['paper']} ({m['cite']})"
                for m in methods if (paper, item) in m["items"]]
    seeds = {paper: spec["seed"] for paper, spec in catalogue.items()}
    items = [assess(paper, entry, decls.get((paper, entry["item"])), Path(results_dir), experiment, families,
                    seed=spec["seed"], config=config, methods=per_item(paper, entry["item"]), seeds=seeds)
             for paper, spec in catalogue.items() for entry in spec["items"]]
    items += [assess(BEYOND, {"item": item, "title": d["title"]}, d, Path(results_dir), experiment, families,
                     config=config, seeds=seeds) for (paper, item), d in decls.items() if paper == BEYOND]
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
                                                             "same inputs", "differs")),
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
            f"{c['same inputs']} with nothing numeric to compare); {c['substitute data']} with substitute data; "
            f"{c['not run']} not run in this experiment; {c['missing']} missing. The papers' claims tested on "
            f"this run are {c['claims']} distinct checks over {c['claim items']} items (an item that shares "
            f"another's check says so and counts once): {c['claims agrees']} agree, {c['claims differs']} differ, "
            f"{c['claims inconclusive']} inconclusive. {c['beyond the papers']} items beyond the papers.")


def _study_split(results_dir: Path, model: str) -> dict[str, int | None]:
    """A model's unargmaxable tokens in the paper's box split into ties, near-ties and rows strictly inside
    (the LM study's record ``detect/study/<model>.json``; None where the study did not run on it)."""
    path = results_dir / "detect" / "study" / f"{model}.json"
    if not path.exists():
        return {"ties": None, "near_ties": None, "strictly_inside": None}
    box = next(b for b in json.loads(path.read_text())["boxes"] if b["box"] == "paper")
    return {"ties": box["ties"], "near_ties": box["near_ties"],
            "strictly_inside": box["strictly_inside"] - box["near_ties"]}


def _summary_rows(path: Path, columns: dict[str, str]) -> list[dict[str, Any]]:
    """The rows of a run's table (absent: none), the given columns renamed (``{column: key}``)."""
    if not path.exists():
        return []
    df = _read_table(path)
    return [{key: _json_cell(row[col]) if col in row else None for col, key in columns.items()}
            for _, row in df.iterrows()]


def run_summary(items: list[Assessment], results_dir: Path) -> dict[str, Any]:
    """What the README states about a run: coverage counts; per checked model its unargmaxable tokens (paper's
    box split into ties, near-ties and strictly inside where the LM study ran, activation box) and the check's
    seconds (``detect/<model>/summary.json``); the prevention runs (``lm/tables/lm_prevention.parquet``) and the
    quantisation study (``detect/tables/quant.parquet``) where the run made them."""
    models = []
    for path in sorted(results_dir.glob("detect/*/summary.json")):
        s = json.loads(path.read_text())
        box = s.get("activation_box") or {}
        models.append({"model": path.parent.name, "n": s.get("n"), "d": s.get("d"),
                       "unargmaxable": s.get("unargmaxable"), **_study_split(results_dir, path.parent.name),
                       "unargmaxable_activation_box": box.get("unargmaxable"), "seconds": s.get("seconds")})
    prevention = _summary_rows(results_dir / "lm" / "tables" / "lm_prevention.parquet", {
        "head": "head", "d": "d", "held-out perplexity": "perplexity", "tokens unargmaxable": "lost",
        "rankings argmaxable": "rankings_proven", "rankings sampled": "rankings_sampled",
        "train cpu seconds": "train_cpu_s", "check seconds": "check_s"})
    quant = _summary_rows(results_dir / "detect" / "tables" / "quant.parquet", {
        "model": "model", "type": "type", "bits per weight": "bits", "identical": "identical",
        "source # unargmaxable": "source_unargmaxable", "# unargmaxable": "unargmaxable",
        "became unargmaxable": "became_unargmaxable", "became argmaxable": "became_argmaxable",
        "seconds": "seconds"})
    return {"coverage": coverage_counts(items), "coverage_line": coverage_line(items), "models": models,
            "prevention": prevention, "quant": quant}


# <!-- generated:NAME --> ... <!-- /generated:NAME --> in README.md
README_BLOCKS = ("coverage", "models", "prevention", "quant")


def _blank(value: Any, fmt: str = "") -> str:
    return "" if value is None else format(value, fmt)


def readme_blocks(summary: dict[str, Any]) -> dict[str, str]:
    """The README's generated blocks from a run's ``report_summary.json`` (see :func:`update_readme`); a block
    whose part the run did not make says so."""
    stamp = f"(generated from the run of {summary.get('created', '?')}, code {summary.get('code_version', '?')})"
    rows = [f"| `{m['model']}` | {m['n']} x {m['d']} | {m['unargmaxable']} | "
            + ("not studied |" if m.get("ties") is None else
               f"{m['ties']} / {m['near_ties']} / {m['strictly_inside']} |")
            + f" {_blank(m['unargmaxable_activation_box'])} | {m['seconds']:.1f} |" for m in summary["models"]]
    table = ["| model | head | unargmaxable, \\|x_j\\| <= 100 | of which ties / near-ties / strictly inside | "
             "in the activation's box | check, s |", "|---|---|---|---|---|---|", *rows]
    prevention = ["| head | d | held-out perplexity | tokens lost | top-k rankings proven / sampled | training "
                  "CPU s | check, s |", "|---|---|---|---|---|---|---|"]
    prevention += [f"| {r['head']} | {r['d']} | {r['perplexity']} | {r['lost']} | "
                   + (f"{_blank(r['rankings_proven'], '.0f')} / {r['rankings_sampled']:.0f}"
                      if r.get("rankings_sampled") else "")
                   + f" | {_blank(r['train_cpu_s'], '.0f')} | {_blank(r.get('check_s'), '.1f')} |"
                   for r in summary.get("prevention", [])]
    quant = ["| model | type | bits per weight | identical to the source | unargmaxable, source -> requantised | "
             "became unargmaxable | became argmaxable | s |", "|---|---|---|---|---|---|---|---|"]
    quant += [f"| {q['model']} | {q['type']} | {q['bits']} | {q['identical']} | {q['source_unargmaxable']} -> "
              f"{q['unargmaxable']} | {q['became_unargmaxable']} | {q['became_argmaxable']} | "
              f"{_blank(q['seconds'], '.1f')} |" for q in summary.get("quant", [])]
    none = f"Not made by this run {stamp}."
    return {"coverage": f"{summary['coverage_line']} {stamp}",
            "models": "\n".join([*table, "", f"Check times are one job's wall time on a shared machine {stamp}."]),
            "prevention": "\n".join([*prevention, "", f"Seconds on a shared machine; a plain head's check is in the "
                                      f"models table {stamp}."])
            if summary.get("prevention") else none,
            "quant": "\n".join([*quant, "", f"Seconds are one job's wall time on a shared machine, the requantising "
                                 f"and the check together (an identical head is not checked) {stamp}."])
            if summary.get("quant") else none}


def update_readme(text: str, blocks: dict[str, str]) -> str:
    """``text`` with each generated block replaced; a block whose markers are absent is an error."""
    for name, body in blocks.items():
        begin, end = f"<!-- generated:{name} -->", f"<!-- /generated:{name} -->"
        if begin not in text or end not in text:
            raise DeclarationError(f"README has no {begin} ... {end} block")
        head, rest = text.split(begin, 1)
        text = f"{head}{begin}\n{body}\n{end}{rest.split(end, 1)[1]}"
    return text


def _detail(a: Assessment) -> str:
    """The relation line without its leading status, for a section headed by the status."""
    return a.line[len(a.status):].lstrip(" :") if a.line.startswith(a.status) else a.line


def _anchor(paper: str, item: str) -> str:
    return re.sub(r"[^a-z0-9-]", "", f"{paper}-{item}".lower().replace(" ", "-"))


def _sections(catalogue: dict, items: list[Assessment]) -> list[tuple[str, str, list[Assessment]]]:
    """(title, seed line, items) per paper, then the items beyond the papers."""
    out = [(spec["title"], f"Seed: `{spec['seed']}`", [a for a in items if a.paper == paper])
           for paper, spec in catalogue.items()]
    beyond = [a for a in items if a.paper == BEYOND]
    if beyond:
        out.append(("Beyond the papers", "Results the papers do not have (declared with `beyond: true`).", beyond))
    return out


def _claim_parts(c: dict) -> tuple[str, list[str]]:
    """A claim's sentence after the verdict (the checks, why it cannot decide, the cause, the evidence, the items
    that share the check) and the list of what it read."""
    def sentence(text: str) -> str:  # declared prose, ended with a full stop where it has none
        return text if text.endswith((".", "!", "?")) else f"{text}."
    why = f" It cannot decide: {sentence(c['why'])}" if c["why"] else ""
    cause = f" Cause: {sentence(c['cause'])}" if c["cause"] else ""
    evidence = f" Evidence: {sentence(c['evidence'])}" if c["evidence"] else ""
    shared = (f" The same check as {', '.join(c['shared'])} (counted once)." if c["shared"] else "")
    return f"({c['detail']}).{why}{cause}{evidence}{shared}", c["read"]


def _claim_text(a: Assessment) -> list[str]:
    c = a.claim
    after, read = _claim_parts(c)
    return [f"Paper's claim ({c['cite']}): \"{c['text']}\". Ours **{c['verdict']}** {after}", "",
            *(f"- read {r}" for r in read)]


def _methods_md(methods: list[dict]) -> list[str]:
    lines = ["## Method differences", "", "Where this project's method is not the papers'; each item whose numbers "
             "it changes repeats it.", "", "| what | ours (this run) | the paper | seed |", "|---|---|---|---|"]
    lines += [f"| {markdown_cell(m['what'])} | {markdown_cell(m['ours'])} | {markdown_cell(m['paper'])} | "
              f"`{m['cite']}` |" for m in methods]
    return [*lines, ""]


def _md_table(df: pd.DataFrame) -> str:
    """A table as Markdown, its text cells escaped (:func:`argmaxable.text.markdown_table`); an empty one says so."""
    return "none" if df.empty else markdown_table(df)


class _Shown:
    """The figures and tables already drawn in the report: a second item that declares one links to the first."""

    def __init__(self):
        self.first: dict[Path, Assessment] = {}

    def before(self, path: Path, a: Assessment) -> Assessment | None:
        """The item that showed ``path`` first, or None (and ``a`` shows it now)."""
        if path in self.first:
            return self.first[path]
        self.first[path] = a
        return None


def _md_item(a: Assessment, results_dir: Path, shown: _Shown) -> list[str]:
    """One item's section of the Markdown report."""
    rel = lambda path: path.relative_to(results_dir).as_posix()  # noqa: E731
    lines = ["", f'<a id="{_anchor(a.paper, a.item)}"></a>', f"### {a.item}: {a.title}", "",
             f"**{a.status}** {_detail(a)}", ""]
    if a.claim:
        lines += [*_claim_text(a), ""]
    if a.paper_values is not None:
        lines += [f"The paper's values (`{a.paper_cite}`):", "", _md_table(a.paper_values), ""]
    lines += [f"- known difference: {d}" for d in a.differences]
    for fig in a.figures:
        first = shown.before(fig, a)
        lines += ["", f"`{rel(fig)}`: shown above under [{first.name}](#{_anchor(first.paper, first.item)})" if first
                  else f"![{a.item}]({rel(fig)})"]
    if a.comparison is not None:
        cited = f" (the paper's values: `{'`, `'.join(a.cited)}`)" if a.cited else ""
        lines += ["", f"Ours beside the paper's values{cited}:", "", _md_table(a.comparison)]
    for title, rows, path in a.views:
        lines += ["", f"{title} (all {len(rows)} rows of `{rel(path)}`):", "", _md_table(rows)]
    for tab in a.tables:
        if first := shown.before(tab, a):
            lines += ["", f"`{rel(tab)}`: shown above under [{first.name}](#{_anchor(first.paper, first.item)})"]
            continue
        df = _read_table(tab)
        cut = f" (first {TABLE_ROWS} of {len(df)} rows; report.html pages, sorts and searches them all)" \
            if len(df) > TABLE_ROWS else ""
        lines += ["", f"`{rel(tab)}`{cut}:", "", _md_table(df.head(TABLE_ROWS))]
    for txt in a.texts:
        lines += ["", f"`{rel(txt)}`:", "", txt.read_text().strip() or "none"]
    for title, files in a.links:
        lines += ["", f"{title}: " + (", ".join(f"[{f.name}]({f.as_posix()})" for f in files) or "none")]
    for rec in a.provenance:
        lines += [f"- provenance `{rec['file']}`: experiment {rec['experiment']}, {rec['code_version']}, "
                  f"{rec['created']}, config "
                  f"{rec['config_sha256']}, inputs {json.dumps(rec['inputs']) if rec['inputs'] else 'none'}"]
    return lines


def render_markdown(catalogue: dict, items: list[Assessment], header: dict, results_dir: Path,
                    methods: list[dict] = ()) -> str:
    """The report as Markdown; figures are linked relative to the results directory. A table longer than
    :data:`TABLE_ROWS` shows its first rows (the HTML report holds every row); declared views show every row."""
    lines = ["# Replication report", "", *(f"- {k}: {v}" for k, v in header.items()), "",
             *_methods_md(list(methods)),
             "## Coverage", "", coverage_line(items), "", markdown_table(coverage(items)), "",
             "| paper | item | title | status | relation |", "|---|---|---|---|---|"]
    lines += [f"| {a.paper} | [{a.item}](#{_anchor(a.paper, a.item)}) | {markdown_cell(a.title)} | {a.status} | "
              f"{markdown_cell(a.line)} |" for a in items]
    shown = _Shown()
    for title, seed, group in _sections(catalogue, items):
        lines += ["", f"## {title}", "", seed]
        for a in group:
            lines += _md_item(a, results_dir, shown)
    return "\n".join(lines) + "\n"


_CSS = f"body{{font-family:'{glyphs.FAMILY}',sans-serif," + """'Noto Sans CJK SC','Source Han Sans SC',
'PingFang SC','Hiragino Sans','Microsoft YaHei','Yu Gothic',sans-serif;max-width:1100px;margin:auto;padding:1em;
line-height:1.4}
table{border-collapse:collapse;font-size:12px;margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 6px}
.wide{overflow-x:auto}th{vertical-align:bottom;max-width:9em;font-weight:600}
img{max-width:100%;border:1px solid #eee}.s{font-weight:bold}.exact-match,.within-tolerance{color:#17692b}
.self-check{color:#3d7a7a}.same-inputs{color:#1a4f8b}.differs{color:#b35c00}.substitute-data{color:#6b4ca8}
.beyond-the-papers{color:#8b1a6b}.not-run{color:#777}.missing{color:#b00020}.agrees{color:#17692b}
.inconclusive{color:#8a6d00}ul.read{font-size:12px;color:#444;margin-top:0}.none{color:#777;font-style:italic}
.pager{font-size:12px;margin:.3em 0}.pager input{width:16em}th.sortable{cursor:pointer}
details{font-size:12px;color:#444}section{border-top:1px solid #ddd;margin-top:1em}pre{font-size:11px;overflow:auto}
"""

# Pages, sorts (click a column's head) and searches every long table (div.paged): its rows are the JSON beside it.
_PAGER_JS = """document.querySelectorAll('div.paged').forEach(box => {
  const data = JSON.parse(box.querySelector('script').textContent), size = +box.dataset.rows;
  const body = box.querySelector('tbody'), bar = box.querySelector('.pager');
  bar.innerHTML = "<input type='search' placeholder='search every column'> <button>&lsaquo;</button> " +
    "<span></span> <button>&rsaquo;</button>";
  const [find, prev, info, next] = [bar.children[0], bar.children[1], bar.children[2], bar.children[3]];
  const esc = v => String(v ?? '').replace(/[&<>]/g, c => ({'&': '&amp;', '<': '&lt;', '>': '&gt;'}[c]));
  let shown = data.rows, page = 0, col = -1, dir = 1;
  const cmp = (a, b) => (typeof a === 'number' && typeof b === 'number') ? a - b :
    String(a ?? '').localeCompare(String(b ?? ''));
  function draw() {
    const last = Math.max(0, Math.ceil(shown.length / size) - 1); page = Math.min(Math.max(page, 0), last);
    body.innerHTML = shown.slice(page * size, (page + 1) * size)
      .map(r => '<tr>' + r.map(v => '<td>' + esc(v) + '</td>').join('') + '</tr>').join('');
    info.textContent = `rows ${shown.length ? page * size + 1 : 0}-${Math.min((page + 1) * size, shown.length)} of ` +
      `${shown.length}` + (shown.length < data.rows.length ? ` matching (of ${data.rows.length})` : '');
  }
  find.oninput = () => { const q = find.value.toLowerCase();
    shown = data.rows.filter(r => !q || r.some(v => String(v ?? '').toLowerCase().includes(q)));
    if (col >= 0) shown.sort((a, b) => dir * cmp(a[col], b[col])); page = 0; draw(); };
  prev.onclick = () => { page--; draw(); }; next.onclick = () => { page++; draw(); };
  box.querySelectorAll('th').forEach((th, i) => { th.classList.add('sortable'); th.onclick = () => {
    dir = col === i ? -dir : 1; col = i; shown = [...shown].sort((a, b) => dir * cmp(a[col], b[col])); page = 0;
    draw(); }; });
  draw();
});"""


def _json_cell(v: Any) -> Any:
    """A table cell for the pager's JSON: numbers to 6 significant digits, missing values null."""
    if v is None or (isinstance(v, float) and np.isnan(v)) or v is pd.NA:
        return None
    if isinstance(v, bool | np.bool_):
        return str(bool(v))
    if isinstance(v, int | np.integer):
        return int(v)
    if isinstance(v, float | np.floating):
        return float(f"{v:.6g}")
    return str(v)


def _html_table(df: pd.DataFrame) -> str:
    """A table as HTML: "none" when empty; a long one (more than :data:`TABLE_ROWS` rows) whole, paged, sortable
    and searchable by the page's script (its first page drawn without it); a ``card`` column (a path relative to the
    results, beside report.html) becomes a link to it."""
    if df.empty:
        return "<p class='none'>none</p>"
    page = df.head(TABLE_ROWS)
    if "card" in df:
        page = page.copy()
        for col in [c for c in page.columns if not pd.api.types.is_numeric_dtype(page[c])]:
            page[col] = page[col].map(lambda v: html.escape(str(v)))
        page["card"] = [f'<a href="{html.escape(str(p), quote=True)}">{html.escape(str(p))}</a>'
                        for p in df["card"].head(TABLE_ROWS)]
    head = page.to_html(index=False, border=0, na_rep="", float_format=lambda v: f"{v:.6g}", escape="card" not in df)
    if len(df) <= TABLE_ROWS:
        return f"<div class='wide'>{head}</div>"
    data = json.dumps({"rows": [[_json_cell(v) for v in row] for row in df.itertuples(index=False)]},
                      ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")  # no tag in a script
    return (f"<div class='paged wide' data-rows='{TABLE_ROWS}'><div class='pager'>rows 1-{TABLE_ROWS} of {len(df)} "
            f"(scripts page, sort and search them all)</div>{head}"
            f"<script type='application/json'>{data}</script></div>")


_GLYPHS = "<!-- glyphs -->"  # where the header states the glyphs shipped in the page


def _status_span(status: str) -> str:
    return f'<span class="s {status.replace(" ", "-")}">{html.escape(status)}</span>'


def _html_item(a: Assessment, shown: _Shown) -> list[str]:
    """One item's section of the HTML report."""
    esc = html.escape
    link = lambda first: f"<a href='#{_anchor(first.paper, first.item)}'>{esc(first.name)}</a>"  # noqa: E731
    parts = [f"<section id='{_anchor(a.paper, a.item)}'><h3>{esc(a.item)}: {esc(a.title)}</h3>"
             f"<p>{_status_span(a.status)} {esc(_detail(a))}</p>"]
    if a.claim:
        c = a.claim
        after, read = _claim_parts(c)
        parts.append(f"<p><b>Paper's claim</b> (<code>{esc(c['cite'])}</code>): &ldquo;{esc(c['text'])}"
                     f"&rdquo; Ours {_status_span(c['verdict'])} {esc(after)}</p><ul class='read'>"
                     + "".join(f"<li>read {esc(r)}</li>" for r in read) + "</ul>")
    if a.paper_values is not None:
        parts += [f"<p>The paper's values (<code>{esc(a.paper_cite)}</code>):</p>", _html_table(a.paper_values)]
    parts += [f"<p><b>Known difference:</b> {esc(d)}</p>" for d in a.differences]
    for fig in a.figures:
        if first := shown.before(fig, a):
            parts.append(f"<p><code>{esc(fig.name)}</code>: shown above under {link(first)}</p>")
            continue
        data = base64.b64encode(fig.read_bytes()).decode("ascii")
        parts.append(f"<figure><img class='report-figure' alt='{esc(a.item)}' "
                     f"src='data:image/png;base64,{data}'><figcaption>{esc(fig.name)}</figcaption></figure>")
    if a.comparison is not None:
        cited = f" (the paper's values: <code>{esc(', '.join(a.cited))}</code>)" if a.cited else ""
        parts += [f"<p>Ours beside the paper's values{cited}:</p>", _html_table(a.comparison)]
    for title, rows, path in a.views:
        parts += [f"<p>{esc(title)} (all {len(rows)} rows of <code>{esc(path.name)}</code>):</p>", _html_table(rows)]
    for tab in a.tables:
        if first := shown.before(tab, a):
            parts.append(f"<p><code>{esc(tab.name)}</code>: shown above under {link(first)}</p>")
            continue
        parts += [f"<p><code>{esc(tab.name)}</code></p>", _html_table(_read_table(tab))]
    for txt in a.texts:
        parts += [f"<p><code>{esc(txt.name)}</code></p>", f"<pre>{esc(txt.read_text().strip() or 'none')}</pre>"]
    for title, files in a.links:  # relative to the report, which sits in the results directory
        parts.append(f"<p>{esc(title)}: " + (", ".join(
            f"<a href='{esc(f.as_posix())}'>{esc(f.name)}</a>" for f in files) or "none")
            + "</p>")
    if a.provenance:
        parts.append("<details><summary>provenance</summary><ul>")
        parts += [f"<li><code>{esc(r['file'])}</code>: experiment {esc(str(r['experiment']))}, "
                  f"{esc(str(r['code_version']))}, "
                  f"{esc(str(r['created']))}, config {r['config_sha256']}, inputs "
                  f"{esc(json.dumps(r['inputs']) if r['inputs'] else 'none')}</li>" for r in a.provenance]
        parts.append("</ul></details>")
    parts.append("</section>")
    return parts


def render_html(catalogue: dict, items: list[Assessment], header: dict, methods: list[dict] = (), *,
                fonts: list | None = None) -> str:
    """The report as one self-contained HTML file: figures embedded as base64 PNG, long tables whole (paged by an
    inline script), the glyphs its text needs beyond Latin embedded as font subsets (:mod:`argmaxable.glyphs`;
    ``fonts``: the font files to take them from, default the machine's); no external resource."""
    esc = html.escape
    parts = ["</style></head><body><h1>Replication report</h1><ul>"]
    parts += [f"<li>{esc(k)}: {esc(str(v))}</li>" for k, v in header.items()]
    parts.append(f"{_GLYPHS}</ul><h2>Method differences</h2><p>Where this project's method is not the papers'; each "
                 "item whose numbers it changes repeats it.</p><table><tr><th>what</th><th>ours (this run)</th>"
                 "<th>the paper</th><th>seed</th></tr>")
    parts += [f"<tr><td>{esc(m['what'])}</td><td>{esc(m['ours'])}</td><td>{esc(m['paper'])}</td>"
              f"<td><code>{esc(m['cite'])}</code></td></tr>" for m in methods]
    parts += [f"</table><h2>Coverage</h2><p>{esc(coverage_line(items))}</p>", _html_table(coverage(items)),
              "<table><tr><th>paper</th><th>item</th><th>title</th><th>status</th><th>relation</th></tr>"]
    parts += [f"<tr><td>{esc(a.paper)}</td><td><a href='#{_anchor(a.paper, a.item)}'>{esc(a.item)}</a></td>"
              f"<td>{esc(a.title)}</td><td>{_status_span(a.status)}</td><td>{esc(a.line)}</td></tr>" for a in items]
    parts.append("</table>")
    shown = _Shown()
    for title, seed, group in _sections(catalogue, items):
        parts.append(f"<h2>{esc(title)}</h2><p>{esc(seed.replace('`', ''))}</p>")
        for a in group:
            parts += _html_item(a, shown)
    parts.append(f"<script>{_PAGER_JS}</script></body></html>")
    body = "\n".join(parts)
    faces, note = glyphs.font_faces(html.unescape(body), fonts)
    body = body.replace(_GLYPHS, f"<li>glyphs: {esc(note)}</li>" if note else "", 1)
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>Replication report</title>"
            f"<style>{_CSS}{faces}\n{body}")


def make_report(report_dir: str | Path, results_dir: str | Path, out_md: str | Path, out_html: str | Path, *,
                experiment: str, families: list[str] | None = None, config: Any = None,
                out_summary: str | Path | None = None, fonts: list | None = None) -> list[Assessment]:
    """Rule ``make_report``: write ``report.md`` and ``report.html`` (each with a provenance sidecar).

    Parameters
    ----------
    report_dir : path
        Holds ``papers.yaml`` and the families' declarations.
    results_dir : path
        Where the declared outputs live.
    out_md, out_html : path
    experiment : str
        The composed ``experiment`` (selects each item's declared relation).
    families : list of str, optional
        Families whose rules ran in this run (None: all); the others' items are "not run".
    config : dict, optional
        The composed config, recorded in the sidecars and read by ``{cfg:...}`` placeholders.
    out_summary : path, optional
        JSON of :func:`run_summary` with its provenance (``argmaxable report readme`` fills the README from it).
    fonts : list of paths, optional
        Font files the page's glyphs beyond Latin are taken from (default: the machine's, :mod:`argmaxable.glyphs`).
    """
    report_dir, results_dir = Path(report_dir), Path(results_dir)
    catalogue = load_catalogue(report_dir / "papers.yaml")
    methods = method_differences(load_methods(report_dir / "papers.yaml"), catalogue, results_dir, config)
    items = assess_all(catalogue, load_declarations(report_dir, catalogue), results_dir, experiment, families,
                       config=config, methods=methods)
    header = {"experiment": experiment, "code version": code_version(),
              "families run": ", ".join(families) if families is not None else "all",
              "how to read": "one section per paper, items in the paper's order, then the items beyond the papers; "
                             "each states how ours relates to the paper's: exact match / within tolerance (of "
                             "numbers printed in the paper, cited by seed line) / self-check (against values the "
                             "project computes where the paper prints none) / same inputs / differs / substitute "
                             "data / not run / missing; a paper's claim is tested on this run's files (each value's "
                             "file and rows named) and ours agrees, differs or is inconclusive (the run cannot "
                             "decide); a check several items share is counted once"}
    for path, text in ((out_md, render_markdown(catalogue, items, header, results_dir, methods)),
                       (out_html, render_html(catalogue, items, header, methods, fonts=fonts))):
        with atomic_path(path) as tmp:
            tmp.write_text(text, encoding="utf-8")
        write_json(metadata(config, [*report_dir.glob("*.yaml")]), sidecar(path))
    if out_summary is not None:
        write_json({**run_summary(items, results_dir), **metadata(config, [])}, out_summary)
    return items
