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

from argmaxable.core.reflect import stall_window
from argmaxable.provenance import atomic_path, code_version, metadata, sidecar, write_json
from argmaxable.text import csv_frame, csv_uncell, markdown_table

# How an item relates to the paper's, per experiment (declared).
KINDS = ("same", "substitute", "not_run")
# What the report concludes (computed), in the coverage table's order.
STATUSES = ("exact match", "within tolerance", "self-check", "same inputs", "differs", "substitute data",
            "beyond the papers", "not run", "missing")
COMPARED = ("exact match", "within tolerance", "self-check", "differs")  # outcomes of a comparison, best first
VERDICTS = ("agrees", "differs")  # ours against the paper's claim
TABLE_ROWS = 25  # rows of a table shown inline; the file holds the rest
TABLE_SUFFIXES = (".parquet", ".csv")
FIGURE_SUFFIXES = (".png",)
TEXT_SUFFIXES = (".md",)
BEYOND = "beyond"  # the paper key of items the papers do not have
# A placeholder in prose: {name} (a declared value) or {cfg:dotted.key} (the composed config).
PLACEHOLDER = re.compile(r"\{(cfg:[\w.]+|[A-Za-z_]\w*)\}")
AGGREGATES = {"first": lambda v: v[0], "last": lambda v: v[-1], "min": np.min, "max": np.max, "mean": np.mean,
              "median": np.median, "sum": np.sum, "count": len, "positive": lambda v: int((v > 0).sum())}
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


def load_catalogue(path: str | Path) -> dict[str, dict]:
    """``{paper: {title, seed, items: [{item, title}, ...]}}`` from ``papers.yaml``."""
    return yaml.safe_load(Path(path).read_text())["papers"]


def load_methods(path: str | Path) -> list[dict]:
    """The method differences declared in ``papers.yaml`` (see :func:`method_differences`)."""
    return yaml.safe_load(Path(path).read_text()).get("methods", [])


def _prose(decl: dict) -> list[tuple[str, str]]:
    """Every piece of prose of a declaration as (where, text): notes, differences, claim causes."""
    out = []
    for prefix, holder in [("", decl), *((f"relation.{k}.", v) for k, v in decl.get("relation", {}).items())]:
        if holder.get("note"):
            out.append((f"{prefix}note", holder["note"]))
        out += [(f"{prefix}differences", d) for d in holder.get("differences", [])]
        if cause := (holder.get("claim") or {}).get("cause"):
            out.append((f"{prefix}claim.cause", cause))
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
    if spec.get("tolerance") and not spec.get("tolerance_reason"):
        raise DeclarationError(f"{where}: compare on {spec.get('ours')!r} has a tolerance without "
                               "`tolerance_reason` (why that much difference is allowed)")


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
    smallest value among the rows left); no expression is evaluated."""
    for col, want in (where or {}).items():
        if want in ("max", "min"):
            df = df[df[col] == getattr(df[col], want)()]
        else:
            df = df[df[col].isin(want if isinstance(want, list) else [want])]
    return df


def value_files(spec: dict, results_dir: Path) -> list[Path]:
    """The files a ``values`` entry reads: ``file``, or every match of ``glob`` (both under the results)."""
    if "glob" in spec:
        if ".." in Path(spec["glob"]).parts or Path(spec["glob"]).is_absolute():
            raise DeclarationError(f"values: glob {spec['glob']!r} must stay under the results directory")
        return sorted(results_dir.glob(spec["glob"]))
    return [results_dir / spec["file"]]


def _json_field(record: Any, key: str) -> Any:
    for part in key.split("."):
        record = record[int(part)] if isinstance(record, list) else record[part]
    return record


def read_value(spec: dict, results_dir: Path) -> Any:
    """One number (or label) from a run's files, as a ``values`` entry declares it.

    ``spec``: ``file`` or ``glob`` (under the results directory; a glob gathers one value per matching file,
    or with ``per_file: true`` takes the median over the files of each file's aggregate);
    for JSON ``key`` (dotted path) and optionally ``per`` (another key to divide by); for a table ``column``,
    optional ``where`` ({column: value, [values], "max" or "min"}), ``agg`` (one of :data:`AGGREGATES` or
    :data:`FITS`, default first) and ``x`` (the column a fit runs against); ``scale`` multiplies the result.
    """
    paths = value_files(spec, results_dir)
    agg = spec.get("agg", "first")
    if paths and paths[0].suffix == ".json":
        records = [json.loads(p.read_text()) for p in paths]
        if where := spec.get("where"):
            records = [r for r in records if all(_json_field(r, k) in (w if isinstance(w, list) else [w])
                                                 for k, w in where.items())]
        data = np.array([_json_field(r, spec["key"]) / (_json_field(r, spec["per"]) if "per" in spec else 1)
                         for r in records], dtype=float).ravel()
        value: Any = data[0] if len(data) else float("nan")
    elif spec.get("per_file"):  # the aggregate within each file, then the median over the files
        per = [read_value({k: v for k, v in spec.items() if k not in ("glob", "per_file", "scale")}
                          | {"file": str(p.relative_to(results_dir))}, results_dir) for p in paths]
        value, data = float(np.median(per)), None
    else:
        df = _select(pd.concat([_read_table(p) for p in paths], ignore_index=True), spec.get("where"))
        if len(df) == 0 and agg == "count":
            return 0
        if len(df) == 0:
            raise DeclarationError(f"values: {spec.get('file', spec.get('glob'))} has no row where "
                                   f"{spec.get('where')}")
        value, data = df[spec["column"]].iloc[0], df[spec["column"]].to_numpy()
        if agg in FITS:
            x, y = df[spec["x"]].to_numpy(dtype=float), data.astype(float)
            slope, intercept = np.polyfit(x, y, 1)
            value = {"slope": slope, "intercept": intercept, "ratio_min": np.min(y / x),
                     "ratio_max": np.max(y / x), "through_origin": float(x @ y / (x @ x))}[agg]
            data = None
    if data is not None and agg in AGGREGATES and len(data):
        value = AGGREGATES[agg](data if data.dtype.kind in "OUSb" else data.astype(float))
    if isinstance(value, np.generic):
        value = value.item()
    return value * spec["scale"] if "scale" in spec and isinstance(value, int | float) else value


def _format(value: Any, fmt: str | None) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
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


def check_claim(checks: list[dict], values: dict[str, Any], formats: dict[str, str | None] | None = None
                ) -> tuple[str, str]:
    """Whether ours agrees with the paper's claim: every ``{left, op, right}`` check holds.

    ``left``/``right`` name values (``right`` may be a number: the paper's, as its claim states it);
    ``times`` multiplies the right side (a claim such as "a lot more": the factor is the declaration's).
    Returns the verdict and the checks as text (each with the values it compared).
    """
    parts, holds = [], True
    for chk in checks:
        left = values[chk["left"]]
        raw = values[chk["right"]] if isinstance(chk["right"], str) else chk["right"]
        ok = bool(OPS[chk["op"]](left, raw * chk.get("times", 1)))
        holds &= ok
        rname = chk["right"] if isinstance(chk["right"], str) else "the paper's"
        times = f"{chk['times']:g} x " if "times" in chk else ""
        fmt = formats or {}
        parts.append(f"{chk['left']} {_format(left, fmt.get(chk['left']))} {chk['op']} {times}{rname} "
                     f"{_format(raw, fmt.get(chk['right']) if isinstance(chk['right'], str) else None)}: "
                     f"{'holds' if ok else 'fails'}")
    return ("agrees" if holds else "differs"), "; ".join(parts)


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
    ``tolerance_reason``; a cell is within it when |diff| < tolerance, strictly) and ``where`` ({column: value}).

    Returns
    -------
    status : {"exact match", "within tolerance", "self-check", "differs"}
    summary : str
    cells : DataFrame
        key columns, ours, paper, diff (rows where the paper has no value are dropped).
    """
    df = _read_table(results_dir / spec["table"])
    named = [*spec["key"], spec["ours"], *([] if isinstance(spec["paper"], list) else [spec["paper"]])]
    if absent := [c for c in named if c not in df.columns]:
        raise KeyError(", ".join(map(repr, absent)))
    where = spec.get("where")
    if isinstance(where, str):
        raise DeclarationError(f"compare on {spec['ours']!r}: `where` is a mapping {{column: value}}, not an "
                               "expression")
    df = _select(df, where)
    if isinstance(spec["paper"], list):  # the paper's numbers, given in the declaration
        ours = df[[*spec["key"], spec["ours"]]].rename(columns={spec["ours"]: "ours"})
        paper = pd.DataFrame(spec["paper"])
        as_text = {k: str for k in spec["key"]}  # keys compare as text (a CSV column may mix numbers and labels)
        cells = ours.astype(as_text).merge(paper.astype(as_text), on=spec["key"], how="inner")
    else:
        cells = df[[*spec["key"], spec["ours"], spec["paper"]]].rename(
            columns={spec["ours"]: "ours", spec["paper"]: "paper"})
    cells = cells.dropna(subset=["paper"]).reset_index(drop=True)
    ours = pd.to_numeric(cells["ours"], errors="coerce")
    paper = pd.to_numeric(cells["paper"], errors="coerce")
    numeric = ours.notna().all() and paper.notna().all()
    tol = float(spec.get("tolerance", 0))
    if numeric:
        cells["diff"] = ours - paper
        equal, within = cells["diff"] == 0, cells["diff"].abs() < tol
    else:  # verdicts and other labels: equal or not
        equal = within = cells["ours"].astype(str) == cells["paper"].astype(str)
    n = len(cells)
    self_check = spec.get("self_check")
    if n == 0:
        return "differs", "no cell of ours has a paper value to compare with", cells
    if equal.all():
        return ("self-check", f"{n}/{n} cells equal the project's own values ({self_check})", cells) \
            if self_check else ("exact match", f"{n}/{n} cells equal", cells)
    if (equal | within).all() and not self_check:
        return "within tolerance", (f"{n}/{n} cells within ±{tol:g} ({int(equal.sum())} equal; "
                                    f"{spec['tolerance_reason']})"), cells
    worst = f", largest |diff| {cells['diff'].abs().max():g}" if numeric else ""
    bound = f"±{tol:g}" if tol else "equality"
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
    a.missing = _missing_inputs(outputs, specs, value_specs, results_dir)
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
    note = text(rel.get("note", decl.get("note", "")))
    if claim := rel.get("claim", decl.get("claim")):
        a.claim = _assess_claim(claim, values, formats, text, seed, seeds)
    if pv := rel.get("paper_values", decl.get("paper_values")):
        a.paper_values, a.paper_cite = pd.DataFrame(pv["rows"]), _cite(pv["cite"], seed, seeds)
    claim_text = (f"; ours {'agrees with' if a.claim['verdict'] == 'agrees' else 'differs from'} the paper's "
                  "claim") if a.claim else ""
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


def _assess_claim(claim: dict, values: dict[str, Any], formats: dict[str, str | None], text, seed: str,
                  seeds: dict[str, str] | None) -> dict:
    """The paper's claim with its citation, our verdict and, when ours differs, the declared cause."""
    verdict, detail = check_claim(claim.get("check", []), values, formats)
    return {"text": claim["text"], "cite": _cite(claim["cite"], seed, seeds) if "cite" in claim else "",
            "verdict": verdict, "detail": detail,
            "cause": text(claim["cause"]) if verdict == "differs" and claim.get("cause") else ""}


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


def coverage_counts(items: list[Assessment]) -> dict[str, int]:
    """The numbers :func:`coverage_line` states (also the README's generated summary)."""
    papers = [a for a in items if a.paper != BEYOND]
    c = Counter(a.status for a in papers)
    claims = Counter(a.claim["verdict"] for a in papers if a.claim)
    return {"items": len(papers), "same": sum(c[s] for s in ("exact match", "within tolerance", "self-check",
                                                             "same inputs", "differs")),
            **{s: c[s] for s in STATUSES if s != "beyond the papers"},
            "claims agree": claims["agrees"], "claims differ": claims["differs"],
            "beyond the papers": sum(a.paper == BEYOND for a in items)}


def coverage_line(items: list[Assessment]) -> str:
    """One sentence: reproduced with the same inputs (and how closely), substitute data, not run, missing."""
    c = coverage_counts(items)
    return (f"{c['items']} items of the papers: {c['same']} reproduced with the same inputs "
            f"({c['exact match']} exact matches of numbers printed in the papers, {c['within tolerance']} within "
            f"a stated tolerance of them, {c['differs']} differing, {c['self-check']} self-checks against values "
            f"the project computes where the paper prints none, {c['same inputs']} with nothing numeric to "
            f"compare); {c['substitute data']} with substitute data; {c['not run']} not run in this experiment; "
            f"{c['missing']} missing. Of the papers' claims tested on this run, {c['claims agree']} agree and "
            f"{c['claims differ']} differ. {c['beyond the papers']} items beyond the papers.")


def run_summary(items: list[Assessment], results_dir: Path) -> dict[str, Any]:
    """What the README states about a run: coverage counts and, per checked model, its unargmaxable tokens
    (paper's box, activation box) and the check's seconds (from ``detect/<model>/summary.json``)."""
    models = []
    for path in sorted(results_dir.glob("detect/*/summary.json")):
        s = json.loads(path.read_text())
        box = s.get("activation_box") or {}
        models.append({"model": path.parent.name, "n": s.get("n"), "d": s.get("d"),
                       "unargmaxable": s.get("unargmaxable"), "unargmaxable_activation_box": box.get("unargmaxable"),
                       "seconds": s.get("seconds")})
    return {"coverage": coverage_counts(items), "coverage_line": coverage_line(items), "models": models}


README_BLOCKS = ("coverage", "models")  # <!-- generated:NAME --> ... <!-- /generated:NAME --> in README.md


def readme_blocks(summary: dict[str, Any]) -> dict[str, str]:
    """The README's generated blocks from a run's ``report_summary.json`` (see :func:`update_readme`)."""
    stamp = f"(generated from the run of {summary.get('created', '?')}, code {summary.get('code_version', '?')})"
    rows = [f"| `{m['model']}` | {m['n']} x {m['d']} | {m['unargmaxable']} | "
            f"{'' if m['unargmaxable_activation_box'] is None else m['unargmaxable_activation_box']} | "
            f"{m['seconds']:.1f} |" for m in summary["models"]]
    table = ["| model | head | unargmaxable, \\|x_j\\| <= 100 | in the activation's box | check, s |",
             "|---|---|---|---|---|", *rows]
    return {"coverage": f"{summary['coverage_line']} {stamp}",
            "models": "\n".join([*table, "", f"Check times are one job's wall time on a shared machine {stamp}."])}


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


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def _anchor(paper: str, item: str) -> str:
    return re.sub(r"[^a-z0-9-]", "", f"{paper}-{item}".lower().replace(" ", "-"))


def _table_preview(path: Path) -> tuple[pd.DataFrame, int]:
    df = _read_table(path)
    return df.head(TABLE_ROWS), len(df)


def _sections(catalogue: dict, items: list[Assessment]) -> list[tuple[str, str, list[Assessment]]]:
    """(title, seed line, items) per paper, then the items beyond the papers."""
    out = [(spec["title"], f"Seed: `{spec['seed']}`", [a for a in items if a.paper == paper])
           for paper, spec in catalogue.items()]
    beyond = [a for a in items if a.paper == BEYOND]
    if beyond:
        out.append(("Beyond the papers", "Results the papers do not have (declared with `beyond: true`).", beyond))
    return out


def _claim_text(a: Assessment) -> str:
    c = a.claim
    cause = f" Cause: {c['cause']}" if c["cause"] else ""
    return f"Paper's claim ({c['cite']}): \"{c['text']}\". Ours **{c['verdict']}** ({c['detail']}).{cause}"


def _methods_md(methods: list[dict]) -> list[str]:
    lines = ["## Method differences", "", "Where this project's method is not the papers'; each item whose numbers "
             "it changes repeats it.", "", "| what | ours (this run) | the paper | seed |", "|---|---|---|---|"]
    lines += [f"| {_cell(m['what'])} | {_cell(m['ours'])} | {_cell(m['paper'])} | `{m['cite']}` |" for m in methods]
    return [*lines, ""]


def render_markdown(catalogue: dict, items: list[Assessment], header: dict, results_dir: Path,
                    methods: list[dict] = ()) -> str:
    """The report as Markdown; figures are linked relative to the results directory."""
    lines = ["# Replication report", "", *(f"- {k}: {v}" for k, v in header.items()), "",
             *_methods_md(list(methods)),
             "## Coverage", "", coverage_line(items), "", markdown_table(coverage(items)), "",
             "| paper | item | title | status | relation |", "|---|---|---|---|---|"]
    lines += [f"| {a.paper} | [{a.item}](#{_anchor(a.paper, a.item)}) | {_cell(a.title)} | {a.status} | "
              f"{_cell(a.line)} |" for a in items]
    for title, seed, group in _sections(catalogue, items):
        lines += ["", f"## {title}", "", seed]
        for a in group:
            lines += ["", f'<a id="{_anchor(a.paper, a.item)}"></a>', f"### {a.item}: {a.title}", "",
                      f"**{a.status}** {_detail(a)}", ""]
            if a.claim:
                lines += [_claim_text(a), ""]
            if a.paper_values is not None:
                lines += [f"The paper's values (`{a.paper_cite}`):", "", markdown_table(a.paper_values), ""]
            lines += [f"- known difference: {d}" for d in a.differences]
            for fig in a.figures:
                lines += ["", f"![{a.item}]({fig.relative_to(results_dir).as_posix()})"]
            if a.comparison is not None:
                cited = f" (the paper's values: `{'`, `'.join(a.cited)}`)" if a.cited else ""
                lines += ["", f"Ours beside the paper's values{cited}:", "",
                          markdown_table(a.comparison.head(TABLE_ROWS))]
            for tab in a.tables:
                df, n = _table_preview(tab)
                shown = f" (first {len(df)} of {n} rows)" if n > len(df) else ""
                lines += ["", f"`{tab.relative_to(results_dir).as_posix()}`{shown}:", "", markdown_table(df)]
            for txt in a.texts:
                lines += ["", f"`{txt.relative_to(results_dir).as_posix()}`:", "", txt.read_text().strip()]
            for rec in a.provenance:
                lines += [f"- provenance `{rec['file']}`: experiment {rec['experiment']}, {rec['code_version']}, "
                          f"{rec['created']}, config "
                          f"{rec['config_sha256']}, inputs {json.dumps(rec['inputs']) if rec['inputs'] else 'none'}"]
    return "\n".join(lines) + "\n"


_CSS = """body{font-family:sans-serif;max-width:1100px;margin:auto;padding:1em;line-height:1.4}
table{border-collapse:collapse;font-size:12px;margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 6px}
img{max-width:100%;border:1px solid #eee}.s{font-weight:bold}.exact-match,.within-tolerance{color:#17692b}
.self-check{color:#3d7a7a}.same-inputs{color:#1a4f8b}.differs{color:#b35c00}.substitute-data{color:#6b4ca8}
.beyond-the-papers{color:#8b1a6b}.not-run{color:#777}.missing{color:#b00020}.agrees{color:#17692b}
details{font-size:12px;color:#444}section{border-top:1px solid #ddd;margin-top:1em}pre{font-size:11px;overflow:auto}"""


def _html_table(df: pd.DataFrame) -> str:
    return df.to_html(index=False, border=0, na_rep="", float_format=lambda v: f"{v:.6g}")


def _status_span(status: str) -> str:
    return f'<span class="s {status.replace(" ", "-")}">{html.escape(status)}</span>'


def render_html(catalogue: dict, items: list[Assessment], header: dict, methods: list[dict] = ()) -> str:
    """The report as one self-contained HTML file: figures embedded as base64 PNG, no external resource."""
    esc = html.escape
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>Replication report</title>"
             f"<style>{_CSS}</style></head><body><h1>Replication report</h1><ul>"]
    parts += [f"<li>{esc(k)}: {esc(str(v))}</li>" for k, v in header.items()]
    parts.append("</ul><h2>Method differences</h2><p>Where this project's method is not the papers'; each item "
                 "whose numbers it changes repeats it.</p><table><tr><th>what</th><th>ours (this run)</th>"
                 "<th>the paper</th><th>seed</th></tr>")
    parts += [f"<tr><td>{esc(m['what'])}</td><td>{esc(m['ours'])}</td><td>{esc(m['paper'])}</td>"
              f"<td><code>{esc(m['cite'])}</code></td></tr>" for m in methods]
    parts += [f"</table><h2>Coverage</h2><p>{esc(coverage_line(items))}</p>", _html_table(coverage(items)),
              "<table><tr><th>paper</th><th>item</th><th>title</th><th>status</th><th>relation</th></tr>"]
    parts += [f"<tr><td>{esc(a.paper)}</td><td><a href='#{_anchor(a.paper, a.item)}'>{esc(a.item)}</a></td>"
              f"<td>{esc(a.title)}</td><td>{_status_span(a.status)}</td><td>{esc(a.line)}</td></tr>" for a in items]
    parts.append("</table>")
    for title, seed, group in _sections(catalogue, items):
        parts.append(f"<h2>{esc(title)}</h2><p>{esc(seed.replace('`', ''))}</p>")
        for a in group:
            parts.append(f"<section id='{_anchor(a.paper, a.item)}'><h3>{esc(a.item)}: {esc(a.title)}</h3>"
                         f"<p>{_status_span(a.status)} {esc(_detail(a))}</p>")
            if a.claim:
                c = a.claim
                cause = f" Cause: {esc(c['cause'])}" if c["cause"] else ""
                parts.append(f"<p><b>Paper's claim</b> (<code>{esc(c['cite'])}</code>): &ldquo;{esc(c['text'])}"
                             f"&rdquo; Ours {_status_span(c['verdict'])} ({esc(c['detail'])}).{cause}</p>")
            if a.paper_values is not None:
                parts += [f"<p>The paper's values (<code>{esc(a.paper_cite)}</code>):</p>",
                          _html_table(a.paper_values)]
            parts += [f"<p><b>Known difference:</b> {esc(d)}</p>" for d in a.differences]
            for fig in a.figures:
                data = base64.b64encode(fig.read_bytes()).decode("ascii")
                parts.append(f"<figure><img class='report-figure' alt='{esc(a.item)}' "
                             f"src='data:image/png;base64,{data}'><figcaption>{esc(fig.name)}</figcaption></figure>")
            if a.comparison is not None:
                cited = f" (the paper's values: <code>{esc(', '.join(a.cited))}</code>)" if a.cited else ""
                parts += [f"<p>Ours beside the paper's values{cited}:</p>",
                          _html_table(a.comparison.head(TABLE_ROWS))]
            for tab in a.tables:
                df, n = _table_preview(tab)
                shown = f" (first {len(df)} of {n} rows)" if n > len(df) else ""
                parts += [f"<p><code>{esc(tab.name)}</code>{shown}</p>", _html_table(df)]
            for txt in a.texts:
                parts += [f"<p><code>{esc(txt.name)}</code></p>", f"<pre>{esc(txt.read_text().strip())}</pre>"]
            if a.provenance:
                parts.append("<details><summary>provenance</summary><ul>")
                parts += [f"<li><code>{esc(r['file'])}</code>: experiment {esc(str(r['experiment']))}, "
                          f"{esc(str(r['code_version']))}, "
                          f"{esc(str(r['created']))}, config {r['config_sha256']}, inputs "
                          f"{esc(json.dumps(r['inputs']) if r['inputs'] else 'none')}</li>" for r in a.provenance]
                parts.append("</ul></details>")
            parts.append("</section>")
    parts.append("</body></html>")
    return "\n".join(parts)


def make_report(report_dir: str | Path, results_dir: str | Path, out_md: str | Path, out_html: str | Path, *,
                experiment: str, families: list[str] | None = None, config: Any = None,
                out_summary: str | Path | None = None) -> list[Assessment]:
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
                             "data (with the paper's claim and whether ours agrees) / not run / missing"}
    for path, text in ((out_md, render_markdown(catalogue, items, header, results_dir, methods)),
                       (out_html, render_html(catalogue, items, header, methods))):
        with atomic_path(path) as tmp:
            tmp.write_text(text, encoding="utf-8")
        write_json(metadata(config, [*report_dir.glob("*.yaml")]), sidecar(path))
    if out_summary is not None:
        write_json({**run_summary(items, results_dir), **metadata(config, [])}, out_summary)
    return items
