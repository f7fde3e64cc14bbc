"""Pin the configured hub models to the commits the hub serves now (``argmaxable config pin``).

A config that says ``revision: main`` reproduces whatever the repo holds on the day it runs; a commit reproduces
one state for ever. The real commits cannot be written here (the hubs are out of reach), so this gives users the
tool: with a network, ask the hub (``HF_ENDPOINT``) what each declared repo's revision names now and write the
commit into the declaration, comments and layout kept.

Where a model's repo and revision are declared is this module's only knowledge of the config's layout
(:func:`declarations` reads them, :func:`write_revision` writes one back): one YAML per model under
``config/model/`` with a ``download`` block, and for a catalogued model (:mod:`argmaxable.detect.catalogues`) the
``revision`` cell of its row, from which its YAML is written again.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import yaml

from argmaxable.detect.catalogues import set_value
from argmaxable.detect.hub import COMMIT, resolve
from argmaxable.fetch import DownloadError


@dataclass(frozen=True)
class Declaration:
    """One hub download a config declares: the model's key, the file declaring it, the repo and its revision."""

    key: str
    path: Path
    repo: str
    revision: str


def declarations(config_dir: str | Path) -> list[Declaration]:
    """Every Hugging Face download the config tree declares (``model/<key>.yaml`` with ``download.kind:
    huggingface``), in key order."""
    out = []
    for path in sorted((Path(config_dir) / "model").glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        download = data.get("download") or {}
        if download.get("kind") == "huggingface" and download.get("repo"):
            out.append(Declaration(path.stem, path, str(download["repo"]), str(download.get("revision") or "main")))
    return out


_REVISION = re.compile(r"(?P<lead>\brevision:[ \t]*)(?P<quote>[\"']?)(?P<value>[^\s,}\"'#]+)(?P=quote)"
                       r"(?P<comment>[ \t]*#[^\n]*)?")


def write_revision(decl: Declaration, commit: str, note: str) -> None:
    """Write ``commit`` as the declaration's revision, in place: the first ``revision:`` after the ``download``
    key (block or inline style), its comment replaced by ``note``; nothing else in the file changes. A catalogued
    model's row takes the commit instead, and its file is written from the row (the template's comment stays)."""
    if set_value(decl.path.parents[1], decl.key, "revision", commit) is not None:
        return
    text = decl.path.read_text(encoding="utf-8")
    start = re.search(r"^download:", text, re.M)
    match = _REVISION.search(text, start.end()) if start else None
    if match is None or match.group("value") != decl.revision:
        raise DownloadError(f"{decl.path}: no 'revision: {decl.revision}' in its download block to pin")
    block = text[match.end():match.end() + 1] in ("\n", "")  # a block mapping's line: room for a comment
    pinned = f"{match.group('lead')}{commit}" + (f"  # {note}" if block else "")
    decl.path.write_text(text[:match.start()] + pinned + text[match.end():], encoding="utf-8")


def pin(config_dir: str | Path, models: Iterable[str] = (), refresh: bool = False, dry_run: bool = False
        ) -> list[tuple[Declaration, str, str]]:
    """Pin each declared hub model (or those of ``models``) to the commit its revision names on the hub now.

    A revision that is a commit already stays, unless ``refresh`` (then ``main`` is asked for). Returns
    ``(declaration, commit or "", what happened)`` per model: ``pinned``, ``unchanged``, ``would pin`` (dry run)
    or the one-line error (the others are pinned all the same).
    """
    wanted = set(models)
    known = declarations(config_dir)
    if unknown := wanted - {d.key for d in known}:
        raise DownloadError(f"no hub download declared for {', '.join(sorted(unknown))} in {config_dir}/model")
    results = []
    for decl in known:
        if wanted and decl.key not in wanted:
            continue
        if COMMIT.match(decl.revision) and not refresh:
            results.append((decl, decl.revision, "unchanged"))
            continue
        asked = "main" if COMMIT.match(decl.revision) else decl.revision
        try:
            commit, _ = resolve(decl.repo, asked)
        except DownloadError as err:
            results.append((decl, "", str(err)))
            continue
        if commit == decl.revision:
            results.append((decl, commit, "unchanged"))
        elif dry_run:
            results.append((decl, commit, "would pin"))
        else:
            write_revision(decl, commit, f"pinned from {asked!r} by `argmaxable config pin`")
            results.append((decl, commit, "pinned"))
    return results
