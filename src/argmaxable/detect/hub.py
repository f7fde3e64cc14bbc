"""Hugging Face hub models by id: the revision pinned to its commit, the small files fetched, the head's bytes only.

:func:`fetch_model` fills a directory with what a check reads from a hub model: ``config.json``, the tokenizer
files, and of the checkpoint only the tensors of the output layer (:mod:`argmaxable.detect.remote` reads them by
HTTP ``Range`` from the format's header: a 7B model's head is 0.5 GB of a 13 GB repository). It speaks the hub's own
protocol through huggingface_hub where that library has the call (``model_info`` for the commit a revision names;
``hf_hub_download`` for the small files, into the hub cache, each checked against the ETag the hub gives: the
sha-256 of an LFS file, the git blob sha-1 of another) and ranges itself where it has none. ``HF_ENDPOINT`` (read
at each call, not at import) points it at a mirror or a local hub, ``HF_TOKEN`` authorises gated repos,
``HF_HUB_OFFLINE=1`` reads a pre-filled hub cache instead.

Failures are one :class:`~argmaxable.fetch.DownloadError` line naming the repo and the reason: no such repo, a
gated one, no such revision or file, the machine offline, a server error that outlasted the retries (five, with
back-off, also for huggingface_hub 1.x, which tried a failing ``HEAD`` once), bytes that differ from their ETag.

:func:`hub_dir` is what ``argmaxable check softmax org/name`` reads: the same directory, cached under
``$ARGMAXABLE_CACHE/hub`` (default ``~/.cache/argmaxable/hub``) per repo and commit, with ``refs/<revision>``
naming the commit it resolved to, so a later run offline finds it.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import re
import shutil
import time
import urllib.parse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from argmaxable import fetch
from argmaxable.detect.gguf import HEAD, NORM, TIED_HEAD
from argmaxable.detect.logits import choose, logits_names, read_config
from argmaxable.detect.remote import Remote, extract_head, gguf_of, part_dir, tensors_of
from argmaxable.detect.source import Local, first_line
from argmaxable.detect.weights import FORMATS, WeightsError
from argmaxable.fetch import DownloadError, Refused, inside, read_manifest, staging_dir, write_manifest

T = TypeVar("T")

# owner/name, or a bare name such as gpt2 or bert-base-uncased (the hub's oldest ids); ":file.gguf" picks a GGUF file
HUB_ID = re.compile(r"^(?:[A-Za-z0-9][\w.-]*/)?[A-Za-z0-9][\w.-]*(?::[\w.-]+\.gguf)?$")
REVISION = re.compile(r"^[\w.-]+(?:/[\w.-]+)*$")
COMMIT = re.compile(r"^[0-9a-f]{40}$")
RETRIES = 2  # further attempts of a huggingface_hub call (since 1.31 it retries a failing HEAD five times itself)
# Files naming the tokens of a hub model (argmaxable.detect.vocab.read_vocab reads them).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "vocab.txt", "merges.txt",
                   "special_tokens_map.json", "added_tokens.json", "target_vocab.json", "vocab-tgt.json")
INDEXES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")
SINGLES = ("model.safetensors", "pytorch_model.bin")
SHARD = re.compile(r"^(model|pytorch_model)(-\d+-of-\d+)?\.(safetensors|bin)$")


def is_hub_id(text: str) -> bool:
    """Whether ``text`` names a hub model (``owner/name``, a bare ``name``, either with ``:file.gguf``) rather than
    a local path or file."""
    gguf = text.partition(":")[2]
    path = Path(text)
    return (bool(HUB_ID.match(text)) and ".." not in text and "--" not in text and not path.exists()
            and (bool(gguf) or path.suffix.lower() not in (*FORMATS, ".onnx", ".gguf")))


def check_revision(revision: str | None) -> str | None:
    """A branch, tag or commit name as the hub allows them; one line for anything else (``..``, ``/x``, ``\\``):
    revisions become paths in the hub cache, so one that climbs out of it is refused."""
    if revision is None:
        return None
    if not REVISION.match(revision) or ".." in revision.split("/") or len(revision) > 256:
        raise Refused(f"{revision!r} is not a revision (a branch, tag or commit: letters, digits, '.', '_', "
                      "'-' and '/' between names)")
    return revision


def endpoint() -> str:
    """The hub's URL: ``HF_ENDPOINT`` when set now (huggingface_hub itself reads it once, at import)."""
    from huggingface_hub import constants

    return (os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/")


def offline() -> bool:
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE) or os.environ.get("HF_HUB_OFFLINE", "").upper() in ("1", "ON", "YES",
                                                                                              "TRUE")


def _headers() -> dict[str, str]:
    from huggingface_hub.utils import build_hf_headers

    return dict(build_hf_headers(library_name="argmaxable"))


def _transient(err: Exception) -> bool:
    from huggingface_hub.errors import HfHubHTTPError

    if isinstance(err, HfHubHTTPError) and err.response is not None:
        return err.response.status_code >= 500 or err.response.status_code in (408, 429)
    # connection errors of httpx (huggingface_hub 1.x) or httpx2 (2.x), and OSError
    return isinstance(err, OSError) or type(err).__module__.split(".")[0] in ("httpx", "httpx2", "httpcore")


def _reason(err: BaseException) -> str:
    from huggingface_hub.errors import HfHubHTTPError

    if isinstance(err, HfHubHTTPError) and err.response is not None:
        message = err.response.headers.get("X-Error-Message") or err.response.reason_phrase
        return f"HTTP {err.response.status_code} {message}".strip()
    text = str(err).strip().splitlines()
    return text[0] if text else type(err).__name__


def _hub(what: str, call: Callable[[], T]) -> T:
    """Run a huggingface_hub call, retrying transient failures; every other failure is one DownloadError line."""
    from huggingface_hub.errors import (
        EntryNotFoundError,
        GatedRepoError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    for attempt in range(RETRIES + 1):
        try:
            return call()
        except GatedRepoError:
            raise Refused(f"{what}: a gated repo: accept its licence on the hub and set HF_TOKEN") from None
        except RepositoryNotFoundError:
            raise Refused(f"{what}: no such repo on {endpoint()} (or a private one: set HF_TOKEN)") from None
        except RevisionNotFoundError:
            raise Refused(f"{what}: no such revision on {endpoint()}") from None
        except LocalEntryNotFoundError as err:  # before EntryNotFoundError, its base: offline, 5xx, no connection
            if offline():
                raise DownloadError(f"{what}: not in the local hub cache and HF_HUB_OFFLINE is set (this machine "
                                    "may be offline)") from None
            cause = err.__cause__ or err
            if attempt == RETRIES:
                raise DownloadError(f"{what}: {_reason(cause)}") from None
        except EntryNotFoundError:
            raise Refused(f"{what}: no such file in the repo") from None
        except Exception as err:  # HTTP and connection errors of huggingface_hub and its HTTP client
            if not _transient(err) or attempt == RETRIES:
                raise DownloadError(f"{what}: {_reason(err)}") from None
        time.sleep(fetch.BACKOFF * 2 ** attempt)
    raise AssertionError("unreachable")


# ------------------------------------------------------------------------------------------- resolution


def resolve(repo: str, revision: str | None) -> tuple[str, list[str]]:
    """The commit ``revision`` names now (``GET /api/models/{repo}/revision/{rev}``) and the files it holds."""
    from huggingface_hub import HfApi

    check_revision(revision)
    api = HfApi(endpoint=endpoint(), library_name="argmaxable")
    info = _hub(f"{repo}@{revision or 'main'}", lambda: api.model_info(repo, revision=revision))
    if not info.sha or not COMMIT.match(info.sha):
        raise Refused(f"{repo}@{revision or 'main'}: the hub names no commit for it")
    return info.sha, sorted(s.rfilename for s in info.siblings or [])


def _verify(path: Path, what: str) -> None:
    """Check a downloaded file against the ETag its hub-cache blob is named by (sha-256 for LFS files, git's
    blob sha-1 otherwise); a mismatch removes the blob and the snapshot's link to it."""
    blob = path.resolve()
    etag = blob.name
    if len(etag) == 64:
        digest = hashlib.sha256()
    elif len(etag) == 40:
        digest = hashlib.sha1(f"blob {blob.stat().st_size}\0".encode())
    else:
        return  # an ETag that is no hash (a mirror's own): nothing to compare
    with open(blob, "rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    if digest.hexdigest() != etag:
        path.unlink(missing_ok=True)
        blob.unlink(missing_ok=True)
        raise Refused(f"{what}: the bytes received do not match the ETag the hub gives ({etag}, got "
                      f"{digest.hexdigest()}): removed")


def fetch_file(repo: str, commit: str, name: str) -> Path:
    """One small file of a commit through ``hf_hub_download`` (into the hub cache), checked against its ETag."""
    from huggingface_hub import hf_hub_download

    what = f"{repo}@{commit[:12]}: {name}"
    path = Path(_hub(what, lambda: hf_hub_download(repo, name, revision=commit, endpoint=endpoint())))
    _verify(path, what)
    return path


def _link(src: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    real = src.resolve()  # hub snapshots hold symlinks into a blob store
    try:
        os.link(real, target)
    except OSError:
        shutil.copy2(real, target)


# -------------------------------------------------------------------------------------------- the model


def head_keys(config_dir: Path, available: Sequence[str], repo: str) -> list[str]:
    """The stored names of the head's tensors (weight, then biases) among ``available``, from the config's model
    class built on the meta device (:func:`argmaxable.detect.logits.logits_names`)."""
    try:
        weight, biases = logits_names(read_config(config_dir))
        return choose(available, [weight, *biases], repo)
    except WeightsError as err:
        raise Refused(str(err)) from None


def _checkpoint(files: Sequence[str], patterns: Sequence[str]) -> str | None:
    """The checkpoint to read the head from: an index or a single file, safetensors before torch's format (the
    shards an index names need no pattern of their own)."""
    for name in (INDEXES[0], SINGLES[0], INDEXES[1], SINGLES[1]):
        if name in files and (not patterns or any(fnmatch.fnmatch(name, p) for p in patterns)):
            return name
    return None


def fetch_model(repo: str, revision: str | None, into: Path, patterns: Sequence[str] = (),
                parts: Path | None = None) -> dict[str, Any]:
    """Fill ``into`` with a hub model's config, tokenizer files (those matching ``patterns``; without patterns
    the config and :data:`TOKENIZER_FILES`) and its head: of the checkpoint (``model.safetensors``, or the shards
    its index maps the head to, else ``pytorch_model.bin`` likewise) only the head's tensors, in the
    checkpoint's format and under its name. Offline, the same from the hub cache.

    ``parts``: where ranges wait between runs (a later run resumes them; removed once done or on a failure),
    default beside ``into``. Returns the manifest's record: source, revision (the commit), requested (the revision
    asked for), bytes_fetched, per checkpoint file what was read (``head``), and the head's tensor names, weight
    first (``head_keys``: found here from the config's model class, read by the loader without building it again).
    """
    into = Path(into)
    parts = Path(parts) if parts is not None else part_dir(into)
    try:
        record = _fetch_model(repo, revision, into, patterns, parts)
    except DownloadError:
        shutil.rmtree(parts, ignore_errors=True)
        raise
    shutil.rmtree(parts, ignore_errors=True)
    return record


def _fetch_model(repo: str, revision: str | None, into: Path, patterns: Sequence[str], parts: Path
                 ) -> dict[str, Any]:
    if offline():
        commit, files, local = _cached(repo, revision)
    else:
        commit, files = resolve(repo, revision)
        local = None
    ggufs = [f for f in files if f.endswith(".gguf") and (not patterns or any(fnmatch.fnmatch(f, p)
                                                                               for p in patterns))]
    if "config.json" not in files and len(ggufs) == 1:  # a GGUF model: its tokens are in its own header
        return {**_fetch_gguf(repo, commit, ggufs[0], into, parts, local), "requested": revision or "main"}
    if "config.json" not in files:
        more = f" (GGUF files: {', '.join(ggufs)}; pick one with {repo}:FILE)" if ggufs else ""
        raise Refused(f"{repo}@{commit[:12]} has no config.json: not a transformers model{more}")
    smalls = [f for f in files if not SHARD.match(f.rsplit("/", 1)[-1]) and f not in INDEXES and
              (any(fnmatch.fnmatch(f, p) for p in patterns) if patterns else f in ("config.json", *TOKENIZER_FILES))]
    fetched = 0
    for name in dict.fromkeys(["config.json", *smalls]):
        src = local / name if local is not None else fetch_file(repo, commit, name)
        _link(src, inside(into, name, "hub file"))
        fetched += 0 if local is not None else src.stat().st_size
    checkpoint = _checkpoint(files, patterns)
    if checkpoint is None:
        raise Refused(f"{repo}@{commit[:12]}: no checkpoint among its files (looked for "
                      f"{', '.join((*SINGLES, *INDEXES))})")

    def source(name: str):
        return _source(repo, commit, name, local)

    heads: dict[str, Any] = {}
    if checkpoint in INDEXES:
        index_path = local / checkpoint if local is not None else fetch_file(repo, commit, checkpoint)
        _link(index_path, into / checkpoint)
        fetched += 0 if local is not None else index_path.stat().st_size
        weight_map = _weight_map(into / checkpoint)
        keys = head_keys(into, list(weight_map), repo)
        for shard in sorted({weight_map[k] for k in keys}):
            src = source(shard)
            heads[shard] = extract_head(shard, src, [k for k in keys if weight_map[k] == shard],
                                        inside(into, shard, "index entry"), parts)
    else:
        src = source(checkpoint)
        keys = head_keys(into, list(tensors_of(checkpoint, src, keys=())), repo)
        heads[checkpoint] = extract_head(checkpoint, src, keys, into / checkpoint, parts)
    fetched += sum(h["fetched"] for h in heads.values()) if local is None else 0
    return {"source": f"huggingface:{repo}", "revision": commit, "requested": revision or "main",
            "endpoint": endpoint() if local is None else "hub cache (offline)", "bytes_fetched": fetched,
            "head": heads, "head_keys": keys}


def _source(repo: str, commit: str, name: str, local: Path | None):
    """A file of the commit by ranges: from the hub, or from the hub cache's snapshot offline."""
    if local is not None:
        return Local(local / name)
    return Remote(f"{endpoint()}/{repo}/resolve/{commit}/{urllib.parse.quote(name)}", _headers(), commit=commit)


def _fetch_gguf(repo: str, commit: str, name: str, into: Path, parts: Path, local: Path | None) -> dict[str, Any]:
    """Of a GGUF file its header and the head (``output.weight``, else the tied ``token_embd.weight``) with the
    final norm, written as a GGUF file of those tensors under its own name."""
    src = _source(repo, commit, name, local)
    header = gguf_of(src)
    tensors = header.tensors
    if HEAD not in tensors and TIED_HEAD not in tensors:
        raise Refused(f"{repo}@{commit[:12]}: {name} has no {HEAD!r} and no {TIED_HEAD!r}: not a language model")
    keys = [HEAD if HEAD in tensors else TIED_HEAD, *([NORM] if NORM in tensors else [])]
    head = extract_head(name, src, keys, inside(into, Path(name).name, "GGUF file"), parts, header)
    return {"source": f"huggingface:{repo}", "revision": commit, "endpoint": endpoint() if local is None else
            "hub cache (offline)", "bytes_fetched": 0 if local is not None else head["fetched"], "head": {name: head}}


def _weight_map(index: Path) -> dict[str, str]:
    """An index's tensor -> shard map, every shard a plain file name inside the model's directory."""
    try:
        weight_map = json.loads(index.read_text())["weight_map"]
        if not isinstance(weight_map, dict):
            raise TypeError("its weight_map is not a map of tensor names to file names")
    except (json.JSONDecodeError, KeyError, TypeError, UnicodeDecodeError, RecursionError) as err:
        raise Refused(f"{index.name}: not a checkpoint index ({first_line(err)})") from None
    for shard in set(weight_map.values()):
        if not isinstance(shard, str) or not SHARD.match(Path(shard).name) or Path(shard).is_absolute() or \
                ".." in Path(shard).parts:
            raise Refused(f"{index.name} maps tensors to {shard!r}, which is not a shard inside the model's "
                          "directory: refused")
    return weight_map


def _cached(repo: str, revision: str | None) -> tuple[str, list[str], Path]:
    """Offline: the commit, files and snapshot directory of a pre-filled hub cache."""
    from huggingface_hub import snapshot_download

    check_revision(revision)
    snapshot = Path(_hub(f"{repo}@{revision or 'main'}", lambda: snapshot_download(
        repo, revision=revision, local_files_only=True)))
    files = sorted(p.relative_to(snapshot).as_posix() for p in snapshot.rglob("*") if p.is_file())
    return snapshot.name, files, snapshot


# ---------------------------------------------------------------------------------------------- the cache


def cache_root() -> Path:
    """Where :func:`hub_dir` keeps models: ``$ARGMAXABLE_CACHE/hub`` (default ``~/.cache/argmaxable/hub``)."""
    base = os.environ.get("ARGMAXABLE_CACHE") or Path(os.environ.get("XDG_CACHE_HOME") or
                                                      Path.home() / ".cache") / "argmaxable"
    return Path(base) / "hub"


def hub_dir(repo: str, revision: str | None = None) -> Path:
    """A hub model's directory for a check (:func:`fetch_model`), cached per commit: online the revision is
    resolved and a cached commit reused; offline the cache's ``refs/<revision>`` (else the hub cache) names it.
    ``owner/name:file.gguf`` fetches that GGUF file's head."""
    check_revision(revision)
    repo, _, gguf = repo.partition(":")
    folder = cache_root() / f"models--{repo.replace('/', '--')}{f'--{gguf}' if gguf else ''}"
    ref = folder / "refs" / (revision or "main")
    if not offline():
        commit = resolve(repo, revision)[0]
    elif revision and COMMIT.match(revision):
        commit = revision
    else:
        commit = ref.read_text().strip() if ref.is_file() else _cached(repo, revision)[0]
    dest = folder / commit
    try:
        read_manifest(dest)
    except DownloadError:  # not fetched yet, or changed since
        with staging_dir(dest) as tmp:
            record = fetch_model(repo, commit, tmp, [gguf] if gguf else (), parts=part_dir(dest))
            write_manifest(tmp, model=repo, kind="huggingface", **{**record, "requested": revision or "main"})
    ref.parent.mkdir(parents=True, exist_ok=True)
    ref.write_text(commit)
    return dest
