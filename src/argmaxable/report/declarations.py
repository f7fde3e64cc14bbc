"""The report's inputs: the catalogue of the papers' items (``papers.yaml``) and each family's declarations, read
and checked (an unknown field, a number typed into prose, a claim naming no value: :class:`DeclarationError`).
The fields are documented once, in the header of ``workflow/report/papers.yaml``.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

# How an item relates to the paper's, per experiment (declared).
KINDS = ("same", "substitute", "not_run")

BEYOND = "beyond"  # the paper key of items the papers do not have

# A placeholder in prose: {name} (a declared value) or {cfg:dotted.key} (the composed config).
PLACEHOLDER = re.compile(r"\{(cfg:[\w.]+|[A-Za-z_]\w*)\}")

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

def load_catalogue(path: str | Path) -> dict[str, dict]:
    """``{paper: {title, short, seed, sections, floats, items: [{item, title[, out_of_scope]}, ...]}}`` from
    ``papers.yaml``."""
    return yaml.safe_load(Path(path).read_text())["papers"]


def place(paper: dict, line: int) -> str:
    """Where a line of a paper's text sits, as a reader of the published paper finds it: the table or figure
    whose rows or caption it is (``floats``: [first line, last line, name, page?]; numbered through the paper,
    and a float's place in the text need not be its section's), else the innermost section that holds it
    (``sections``: [first line, name, page?]), with its page where the paper's outline gives one: "Table 7",
    "§5.1", "Table 5.1, p. 164"."""
    floats = [f for f in paper.get("floats", []) if f[0] <= line <= f[1]]
    sections = [s for s in paper.get("sections", []) if s[0] <= line]
    found = [(f[2], f[3:]) for f in floats[:1]] or [(s[1], s[2:]) for s in sections[-1:]]
    if not found:
        return "front matter"
    name, page = found[0]
    return f"{name}, p. {page[0]}" if page else name


def _spans(lines: list[int]) -> str:
    """``[302, 303, 304, 310]`` as "302-304, 310"."""
    out: list[list[int]] = []
    for n in sorted(lines):
        if out and n == out[-1][1] + 1:
            out[-1][1] = n
        else:
            out.append([n, n])
    return ", ".join(f"{a}-{b}" if a != b else str(a) for a, b in out)


def citation(spec: dict | int | list, paper: str, papers: dict[str, dict] | None) -> str:
    """A ``cite`` (one line of the paper's text, several, or ``{paper, line}`` for another paper's) as the paper's
    short name and the places its lines sit (:func:`place`), then the line key into the paper's text file for
    those who hold it: "ACL 2022 Table 7 — line 671 of 002_6008ffe8464613bf.txt"."""
    if isinstance(spec, dict):
        paper, spec = spec["paper"], spec["line"]
    lines = spec if isinstance(spec, list) else [spec]
    info = (papers or {}).get(paper, {})
    where = "; ".join(dict.fromkeys(place(info, n) for n in lines))
    plural = "s" if len(lines) > 1 else ""
    return f"{info.get('short', paper)} {where} — line{plural} {_spans(lines)} of {info.get('seed', paper)}"

def load_methods(path: str | Path) -> list[dict]:
    """The method differences declared in ``papers.yaml`` (see :func:`method_differences`)."""
    return yaml.safe_load(Path(path).read_text()).get("methods", [])

def _prose(decl: dict) -> list[tuple[str, str]]:
    """Every piece of prose of a declaration as (where, text): notes, differences, and a claim's cause, evidence
    and the reasons it may be inconclusive (``lacks`` and each condition's ``why``)."""
    out = []
    for prefix, holder in [("", decl), *((f"relation.{k}.", v) for k, v in decl.get("relation", {}).items())]:
        if holder.get("note"):
            out.append((f"{prefix}note", holder["note"]))
        out += [(f"{prefix}differences", d) for d in holder.get("differences", [])]
        claim = holder.get("claim") or {}
        out += [(f"{prefix}claim.{k}", claim[k]) for k in ("cause", "evidence", "lacks") if claim.get(k)]
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
        raise DeclarationError(f"{where}: compare on {spec.get('ours')!r} needs `cite` (the lines of the paper's text "
                               "that print its values) or `self_check` (what the project computed in their place)")
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

def _claim_names(claim: dict) -> list[str]:
    """The values a claim's checks and inconclusive conditions compare, in order."""
    conditions = [*claim.get("check", []), *(c for i in claim.get("inconclusive", []) for c in [i, *i.get("and", [])])]
    sides = [c[k] for c in conditions for k in ("left", "right")]
    return list(dict.fromkeys(v for v in sides if isinstance(v, str)))
