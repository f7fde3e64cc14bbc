"""Atomic result files with provenance.

Every result file a rule writes gets a sidecar ``<file>.meta.json`` recording the composed config, the
package version and git revision, and SHA-256 hashes of the inputs. Files are written to a temporary name in
the same directory and renamed into place, so an interrupted job never leaves a half-written result.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from argmaxable._version import __version__
from argmaxable.text import csv_frame, markdown_table

_REPO = Path(__file__).resolve().parents[2]

FIGURE_DPI = 150  # every saved figure's resolution (save_figure)

# The widest figure, in inches, that fits a laptop's notebook or report page (1600 px) at FIGURE_DPI, with room
# for the labels that a tight bounding box adds beyond the axes.
FIGURE_WIDTH = 10.0


def code_version() -> str:
    """Package version plus the git revision (``+dirty`` when the tree has changes), when available."""
    try:
        rev = subprocess.run(
            ["git", "-C", str(_REPO), "rev-parse", "--short=12", "HEAD"],
            capture_output=True, text=True, timeout=5, check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(_REPO), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, timeout=5, check=True,
        ).stdout.strip()
        return f"{__version__}+g{rev}{'.dirty' if dirty else ''}"
    except (OSError, subprocess.SubprocessError):
        return __version__


@functools.cache
def source_digest() -> str:
    """SHA-256 of the package's own Python sources (paths and bytes, in sorted order): what a stored partial result
    was computed by, so that it is reused only by the same code (unlike :func:`code_version`, it changes with
    every edit, committed or not)."""
    root = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for f in sorted(root.rglob("*.py")):
        digest.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes())
    return digest.hexdigest()


def file_sha256(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    """SHA-256 of a file (or of a directory's files in sorted order)."""
    path = Path(path)
    digest = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for f in files:
        if path.is_dir():
            digest.update(str(f.relative_to(path)).encode())
        with open(f, "rb") as fh:
            while block := fh.read(chunk):
                digest.update(block)
    return digest.hexdigest()


_STAGED: list[list[Path]] = []  # temporaries that a SIGTERM removes before it ends the process


def _end_removing_staged(signum, frame) -> None:
    for path in itertools.chain.from_iterable(_STAGED):
        shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)
    signal.signal(signum, signal.SIG_DFL)
    signal.raise_signal(signum)


@contextlib.contextmanager
def removed_on_termination() -> Iterator[list[Path]]:
    """Yield a list for the temporaries the block makes: while it runs, a SIGTERM that would end the process (its
    default action) first removes them (files, or directories with what they hold), then ends the process as the
    signal does, so no hidden temporary is left beside a result. A program's own SIGTERM handler, and threads
    other than the main one, are left as they are (the callers' ``finally`` clauses still remove the temporaries
    on every exception)."""
    staged: list[Path] = []
    ours = threading.current_thread() is threading.main_thread() and \
        signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, _end_removing_staged)
    if not ours:
        yield staged
        return
    previous = signal.signal(signal.SIGTERM, _end_removing_staged)
    _STAGED.append(staged)
    try:
        yield staged
    finally:
        _STAGED.remove(staged)
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it to ``path`` only if the block succeeds."""
    with atomic_paths(path) as (tmp,):
        yield tmp


@contextlib.contextmanager
def atomic_paths(*paths: str | os.PathLike) -> Iterator[list[Path]]:
    """Temporary paths beside each of ``paths``, renamed onto them together if the block succeeds.

    SIGINT and SIGTERM are held back during the renames (delivered right after), so an interruption leaves
    either every old file or every new one; on failure, or on a SIGTERM before the renames, the temporary files
    are removed (:func:`removed_on_termination`).
    """
    targets = [Path(p) for p in paths]
    umask = os.umask(0)
    os.umask(umask)
    with removed_on_termination() as staged:
        try:
            for path in targets:
                path.parent.mkdir(parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
                os.close(fd)
                staged.append(Path(tmp))
            yield list(staged)
            for tmp in staged:
                tmp.chmod(0o666 & ~umask)  # mkstemp makes the file owner-only; results are for everyone
            # Handlers that only note the signal (a mask would not do: another thread may take it), raised again
            # once every file is in place.
            pending: list[int] = []
            held = (signal.SIGINT, signal.SIGTERM) if threading.current_thread() is threading.main_thread() else ()
            previous = {signum: signal.signal(signum, lambda signum, frame: pending.append(signum)) for signum in held}
            try:
                for tmp, path in zip(staged, targets, strict=True):
                    os.replace(tmp, path)
            finally:
                for signum, handler in previous.items():
                    signal.signal(signum, handler)
                for signum in pending:
                    signal.raise_signal(signum)
        finally:
            for tmp in staged:
                tmp.unlink(missing_ok=True)


def metadata(config: Any = None, inputs: Iterable[str | os.PathLike] = (), **extra: Any) -> dict[str, Any]:
    """The provenance record stored beside (or inside) a result file."""
    return {
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "code_version": code_version(),
        "config": config,
        "inputs": {str(p): file_sha256(p) for p in inputs if Path(p).exists()},
        **extra,
    }


def write_json(obj: Any, path: str | os.PathLike) -> None:
    """Write ``obj`` as indented JSON, atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def write_table(df, path: str | os.PathLike, *, config: Any = None, inputs: Iterable = (),
                companions: Iterable = (), **extra) -> None:
    """Write a pandas DataFrame (.parquet, .csv or .md by suffix) atomically, with a ``.meta.json`` sidecar.

    Text cells are escaped for their format (:mod:`argmaxable.text`): in CSV a cell a spreadsheet would run as a
    formula starts with ``'`` (read back with ``csv_frame(df, csv_uncell)``), in Markdown HTML and table syntax
    are character references.

    Parquet files also carry the record in their schema metadata under ``argmaxable``. ``companions``: more
    ``(path, write)`` pairs (``write(tmp)`` fills a temporary file) staged with the table and its sidecar and
    renamed with them as one unit (:func:`atomic_paths`).
    """
    path = Path(path)
    if path.suffix not in (".parquet", ".csv", ".md"):
        raise ValueError(f"write_table: unsupported suffix {path.suffix!r} of {path} (use .parquet/.csv/.md)")
    meta = metadata(config, inputs, **extra)
    companions = list(companions)
    with atomic_paths(path, sidecar(path), *(p for p, _ in companions)) as (tmp, tmp_meta, *tmp_more):
        if path.suffix == ".parquet":
            import pyarrow as pa
            import pyarrow.parquet as pq

            table = pa.Table.from_pandas(df, preserve_index=False)
            table = table.replace_schema_metadata(
                {**(table.schema.metadata or {}), b"argmaxable": json.dumps(meta, default=str).encode()}
            )
            pq.write_table(table, tmp)
        elif path.suffix == ".csv":
            csv_frame(df).to_csv(tmp, index=False)  # no cell a spreadsheet runs as a formula
        else:
            tmp.write_text(markdown_table(df) + "\n")  # no cell that acts as HTML, a link or a new cell or row
        tmp_meta.write_text(json.dumps(meta, indent=2, sort_keys=True, default=str) + "\n")
        for (_, write), staged in zip(companions, tmp_more, strict=True):
            write(staged)


def save_figure(fig, path: str | os.PathLike, *, config: Any = None, inputs: Iterable = (), **extra) -> None:
    """Save a matplotlib figure atomically as ``path`` (PNG or PDF by suffix) with a provenance sidecar."""
    path = Path(path)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format=path.suffix.lstrip("."), bbox_inches="tight", dpi=FIGURE_DPI)
    write_json(metadata(config, inputs, **extra), sidecar(path))


def panel_grid(n: int, width: float, height: float, *, top: float = 0.0, **subplots: Any):
    """A figure of ``n`` panels of ``width`` x ``height`` inches laid out in a grid no wider than
    :data:`FIGURE_WIDTH`, in as few rows as that allows and its rows balanced (four panels: two by two), ``top``
    inches added for titles and legends: (figure, axes as a rows x columns array; those beyond ``n`` hidden).
    ``subplots``: passed to ``plt.subplots`` (``sharey``, ...)."""
    import matplotlib.pyplot as plt  # the backend is the caller's (Agg where there is no display)

    rows = -(-n // max(1, min(n, int(FIGURE_WIDTH // width))))
    cols = -(-n // rows)
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows + top), squeeze=False, **subplots)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, axes


def sidecar(path: str | os.PathLike) -> Path:
    """Name of the provenance sidecar of a result file."""
    path = Path(path)
    return path.with_name(path.name + ".meta.json")
