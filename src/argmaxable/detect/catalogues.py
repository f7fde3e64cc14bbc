"""Families of many near-identical models declared as one table each: ``config/catalogues/<family>.yaml``.

A catalogue holds a ``template`` (one model config with ``{column}`` fields), its ``columns`` and one row per
model. Each row is written out as ``config/model/<key>.yaml``, the Hydra option that composition, pinning and the
rehearsal read like any other model's, so a catalogued model and a hand-written one are the same to the rest of
the project. ``argmaxable config catalogues`` (``make catalogues``) writes the files; a test holds every file
equal to its row. Adding a model of such a family is one row (then ``make catalogues``); a model of its own
stays one hand-written YAML.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import yaml

DIRECTORY = "catalogues"  # beside the config groups, under the config directory


@dataclass(frozen=True)
class Catalogue:
    """One family's table: where it lives, its template and its rows (each a dict over ``columns``)."""

    path: Path
    template: str
    columns: tuple[str, ...]
    rows: tuple[dict, ...]

    def render(self, row: dict) -> str:
        """The model config ``config/model/<key>.yaml`` of one row."""
        return self.template.format(**row)


def load(path: Path) -> Catalogue:
    """Read one catalogue; a row whose length differs from ``columns`` is an error naming the row."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    columns = tuple(data["columns"])
    rows = []
    for values in data["rows"]:
        if len(values) != len(columns):
            raise ValueError(f"{path}: row {values[0]!r} has {len(values)} values for the {len(columns)} columns "
                             f"{', '.join(columns)}")
        rows.append(dict(zip(columns, values, strict=True)))
    return Catalogue(path, data["template"], columns, tuple(rows))


def catalogues(config_dir: str | Path) -> list[Catalogue]:
    """Every catalogue of a config tree, in file-name order."""
    return [load(p) for p in sorted((Path(config_dir) / DIRECTORY).glob("*.yaml"))]


def model_files(config_dir: str | Path) -> dict[Path, str]:
    """Each catalogued model's config file and the text its row gives it."""
    model_dir = Path(config_dir) / "model"
    return {model_dir / f"{row['key']}.yaml": cat.render(row) for cat in catalogues(config_dir) for row in cat.rows}


def write(config_dir: str | Path) -> list[Path]:
    """Write every catalogued model's config file whose text differs from its row; the files written."""
    written = []
    for path, text in model_files(config_dir).items():
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            written.append(path)
    return written


def row_line(values: list) -> str:
    """A row as the catalogues write it: one flow sequence, strings JSON-quoted (valid YAML)."""
    return "  - [" + ", ".join(json.dumps(v, ensure_ascii=False) for v in values) + "]"


def set_value(config_dir: str | Path, key: str, column: str, value) -> Path | None:
    """Set one cell of the row of model ``key`` (its line rewritten in place, a trailing comment kept) and write
    the model's file again; the file, or None when no catalogue holds ``key`` with that column."""
    for cat in catalogues(config_dir):
        row = next((r for r in cat.rows if r["key"] == key), None)
        if row is None or column not in cat.columns:
            continue
        old = row_line([row[c] for c in cat.columns])
        new = {**row, column: value}
        lines = cat.path.read_text(encoding="utf-8").splitlines(keepends=True)
        for i, line in enumerate(lines):
            stripped = line.strip()
            if stripped.startswith("- [") and yaml.safe_load(stripped)[0][0] == key:
                text = line.rstrip("\n")
                comment = text[len(old):] if text.startswith(old) else ""  # a row written by row_line
                lines[i] = row_line([new[c] for c in cat.columns]) + comment + "\n"
                break
        else:  # a row written over several lines: left to the user rather than a file that disagrees with it
            raise ValueError(f"{cat.path}: the row of {key!r} is not on one line; write it as `- [...]` to set "
                             f"its {column}")
        cat.path.write_text("".join(lines), encoding="utf-8")
        path = Path(config_dir) / "model" / f"{key}.yaml"
        path.write_text(cat.render(new), encoding="utf-8")
        return path
    return None
