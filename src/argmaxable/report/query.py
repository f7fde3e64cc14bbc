"""Values read from a run's files for the report's prose and claims: the ``values`` fields of a declaration (a file
or glob, a JSON key or a table column, row filters, an aggregate or a fit), described with the files and rows
they read, and the ``{name}`` / ``{cfg:key}`` placeholders filled from them.
"""

from __future__ import annotations

import json
import operator
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from argmaxable.report.declarations import PLACEHOLDER, DeclarationError
from argmaxable.text import csv_frame, csv_uncell

SIDECAR = ".meta.json"  # a result's provenance record (argmaxable.provenance.sidecar), never a value's file

ORIGIN = "origin"  # a table's column marking the paper's rows ("paper") beside ours (:func:`ours_only`)

AGGREGATES = {"first": lambda v: v[0], "last": lambda v: v[-1], "min": np.min, "max": np.max, "mean": np.mean,
              "median": np.median, "sum": np.sum, "count": len, "positive": lambda v: int((v > 0).sum()),
              "nunique": lambda v: len(set(v.tolist())), "list": lambda v: ", ".join(map(str, v.tolist())),
              "distinct": lambda v: ", ".join(map(str, dict.fromkeys(v.tolist())))}  # labels, in order

COUNTS = ("count", "positive", "sum", "nunique")  # aggregates whose value over no row is 0

FITS = ("slope", "intercept", "ratio_min", "ratio_max", "through_origin")  # of column against x

OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq,
       "!=": operator.ne}

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
