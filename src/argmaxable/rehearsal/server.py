"""A local Hugging Face hub and URL mirror on 127.0.0.1, speaking the protocols the real ones speak, never a mock.

Model hubs are out of reach here, in CI and on the developers' machines; their protocols are not. :class:`LocalHub`
serves repositories and plain files from :class:`~argmaxable.rehearsal.blobs.Blob` s (made on request, so replicas
of multi-GB checkpoints cost no disk) with the standard library's ``http.server``, as huggingface_hub 1.x and 2.x
and plain HTTP clients expect:

- ``GET /api/models/{repo}[/revision/{rev}]`` (``id``, ``sha``, ``siblings``; with ``blobs=true`` each sibling's
  ``size``, ``blobId`` and ``lfs``), ``GET /api/models/{repo}/tree/{rev}[/{path}]`` (``recursive``; entries with
  ``type``, ``path``, ``size``, ``oid``, ``lfs``); query flags read as ``true``, ``True`` or ``1``;
- ``HEAD``/``GET /{repo}/resolve/{rev}/{file}``: ``X-Repo-Commit``, ``ETag`` (git blob sha-1 of a small file; an
  LFS file's sha-256), ``Content-Length``, ``Accept-Ranges``; an LFS file answers 302 to a second, "CDN" port with
  ``X-Linked-Etag`` and ``X-Linked-Size``, as the hub redirects to its storage; ``Range`` (one range) gives 206 with
  ``Content-Range``, an unsatisfiable one 416, ``If-Range`` with another ETag the whole file;
- errors as the hub sends them: ``X-Error-Code`` ``RepoNotFound`` (401, as the hub answers for repos it will not
  reveal), ``GatedRepo`` (401 without the token), ``RevisionNotFound`` and ``EntryNotFound`` (404); a renamed repo
  (``gpt2`` -> ``openai-community/gpt2``) answers 307 to its new name;
- ``GET``/``HEAD /{mirror}/{path}``: plain files (a Bergamot or WMT17 URL rewritten to the mirror), with ``ETag``,
  ``Content-Length`` and ``Range``.

Faults are injected per request (:class:`Fault`: an HTTP status, a connection dropped after N bytes, bytes that
differ from the ETag, a missing header) and every request is logged (:class:`Request`: method, path, status,
range, bytes sent), so tests assert what a client fetched and that it resumed instead of starting over.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from argmaxable.rehearsal.blobs import Blob, Bytes

LFS_SUFFIXES = (".bin", ".safetensors", ".h5", ".msgpack", ".ot", ".npz", ".model", ".spm", ".gguf", ".pt", ".pth",
                ".onnx")
LFS_MIN = 10 << 20  # bigger files are LFS whatever their suffix (the hub's .gitattributes track large files)
BLOCK = 1 << 20


def is_lfs(path: str, blob: Blob) -> bool:
    """Whether the hub would store ``path`` with LFS (its ETag is then the sha-256 of the content)."""
    return path.endswith(LFS_SUFFIXES) or blob.size >= LFS_MIN


@dataclass
class HubRepo:
    """A model repository: its commits (sha -> files) and refs (branch or tag -> sha); ``gated`` repos need the
    server's token."""

    id: str
    commits: dict[str, dict[str, Blob]]
    refs: dict[str, str]
    gated: bool = False

    @classmethod
    def single(cls, repo_id: str, commit: str, files: Mapping[str, Blob | bytes | str], gated: bool = False
               ) -> HubRepo:
        """One commit on ``main``; ``files`` values may be blobs, bytes or text."""
        blobs = {p: b if isinstance(b, Blob) else Bytes(b.encode() if isinstance(b, str) else b)
                 for p, b in files.items()}
        return cls(repo_id, {commit: blobs}, {"main": commit}, gated)

    def resolve(self, revision: str) -> str | None:
        """The commit a branch, tag or full commit sha names (None: unknown)."""
        if revision in self.commits:
            return revision
        return self.refs.get(revision)


@dataclass
class Fault:
    """A fault served to the requests whose path contains ``path`` (and whose method is ``method``, if given),
    ``times`` times (-1: always). ``action``: ``status:<code>``, ``drop:<bytes>`` (the connection closes after that
    many body bytes), ``stall:<bytes>`` (that many bytes, then nothing until the server stops: a client killed
    meanwhile leaves a partial download), ``corrupt`` (one byte of the body flipped), ``omit:<header>``,
    ``etag:<value>``. The first ``after`` matching requests pass unharmed."""

    path: str
    action: str
    times: int = 1
    method: str | None = None
    after: int = 0


@dataclass
class Request:
    method: str
    path: str
    status: int
    range: str | None
    sent: int  # body bytes written


@dataclass
class LocalHub:
    """The server: ``repos`` by id, ``mirrors`` (URL prefix segment -> {path: blob}), ``aliases`` (old repo id ->
    new), ``token`` (what a gated repo needs), ``cdn`` (LFS files answer 302 to a second port). Use as a context
    manager; ``endpoint`` is what ``HF_ENDPOINT`` should say, ``mirror_url(prefix)`` where a mirror's files are.
    ``hash_cache``: a JSON file keeping the sha-256 of generated files and the CRC-32 of zip members (``crcs``,
    which the blobs take) between runs: hashing GBs takes seconds."""

    repos: dict[str, HubRepo] = field(default_factory=dict)
    mirrors: dict[str, dict[str, Blob]] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)
    token: str | None = None
    cdn: bool = True
    hash_cache: Path | None = None
    faults: list[Fault] = field(default_factory=list)
    log: list[Request] = field(default_factory=list)

    def __post_init__(self):
        self._lock = threading.Lock()
        self._hashes: dict[str, str] = {}
        self.crcs: dict[str, int] = {}
        if self.hash_cache is not None and Path(self.hash_cache).is_file():
            cached = json.loads(Path(self.hash_cache).read_text())
            self._hashes, self.crcs = cached.get("hashes", {}), cached.get("crcs", {})
        self._computing: dict[str, threading.Lock] = {}  # one hash computed once, however many ask at once
        self._servers: list[ThreadingHTTPServer] = []
        self._busy = 0  # requests being answered (their log entries are written when they end)
        self._stopped = threading.Event()

    # ------------------------------------------------------------------------------------------ lifecycle

    def __enter__(self) -> LocalHub:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        if self._servers:
            return
        self._stopped.clear()
        for role, host in (("hub", "127.0.0.1"), ("cdn", "127.0.0.2")):
            handler = type(f"{role.title()}Handler", (_Handler,), {"hub": self, "role": role})
            try:  # the storage on another host name, as the hub's is (huggingface_hub 1.x compares host names)
                server = ThreadingHTTPServer((host, 0), handler)
            except OSError:  # a system without 127.0.0.2 on its loopback
                server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
            server.daemon_threads = True
            threading.Thread(target=server.serve_forever, daemon=True).start()
            self._servers.append(server)

    def stop(self) -> None:
        self._stopped.set()
        for server in self._servers:
            server.shutdown()
            server.server_close()
        self._servers.clear()
        self.save_hashes()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._servers[0].server_address[1]}"

    @property
    def cdn_endpoint(self) -> str:
        host, port = self._servers[1].server_address[:2]
        return f"http://{host}:{port}"

    def mirror_url(self, prefix: str) -> str:
        return f"{self.endpoint}/{prefix}/"

    # --------------------------------------------------------------------------------------------- hashes

    def digest(self, key: str, blob: Blob, kind: str) -> str:
        """sha-256 (``kind="sha256"``) or git blob sha-1 (``"git"``) of a blob, computed once per ``key``."""
        name = f"{kind}:{key}:{blob.size}"
        with self._lock:
            computing = self._computing.setdefault(name, threading.Lock())
        with computing:
            if name not in self._hashes:
                h = hashlib.sha256() if kind == "sha256" else hashlib.sha1(f"blob {blob.size}\0".encode())
                for block in blob.chunks():
                    h.update(block)
                self._hashes[name] = h.hexdigest()
        return self._hashes[name]

    def save_hashes(self) -> None:
        if self.hash_cache is not None:
            Path(self.hash_cache).write_text(json.dumps({"hashes": self._hashes, "crcs": self.crcs}, sort_keys=True))

    def etag(self, repo: str, commit: str, path: str, blob: Blob) -> str:
        key = f"{repo}@{commit}/{path}"
        return self.digest(key, blob, "sha256" if is_lfs(path, blob) else "git")

    def settle(self, timeout: float = 10.0) -> None:
        """Wait until every request a client has seen answered is in the log (its entry is written at its end)."""
        import time

        deadline = time.monotonic() + timeout
        while self._busy and time.monotonic() < deadline:
            time.sleep(0.005)

    def bytes_sent(self, match: str = "") -> int:
        """Body bytes served to requests whose path contains ``match`` (after :meth:`settle`)."""
        self.settle()
        return sum(r.sent for r in self.log if match in r.path)

    def take_fault(self, method: str, path: str) -> Fault | None:
        with self._lock:
            for fault in self.faults:
                if fault.times != 0 and fault.path in path and fault.method in (None, method):
                    if fault.after > 0:
                        fault.after -= 1
                        return None
                    fault.times -= 1 if fault.times > 0 else 0
                    return fault
        return None


_TRUE = ("1", "true", "True")
_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


class _Handler(BaseHTTPRequestHandler):
    hub: LocalHub
    role: str
    protocol_version = "HTTP/1.1"
    server_version = "argmaxable-localhub"

    def log_message(self, format, *args):  # quiet: requests are in hub.log
        pass

    def do_HEAD(self):
        self._dispatch(head=True)

    def do_GET(self):
        self._dispatch(head=False)

    # ------------------------------------------------------------------------------------------- routing

    def _dispatch(self, head: bool) -> None:
        url = urllib.parse.urlsplit(self.path)
        path, query = urllib.parse.unquote(url.path), urllib.parse.parse_qs(url.query)
        self._fault = self.hub.take_fault(self.command, path)
        self._sent, self._status, self._logged, self._path = 0, 0, False, path
        with self.hub._lock:
            self.hub._busy += 1
        try:
            if self._fault is not None and self._fault.action.startswith("status:"):
                self._error(int(self._fault.action.split(":")[1]), None, "injected fault")
            elif self.role == "cdn":
                self._cdn(path, head)
            elif path.startswith("/api/models/"):
                self._api(path.removeprefix("/api/models/"), query)
            elif "/resolve/" in path:
                self._resolve(url.path, head)
            else:
                self._mirror(path, head)
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            self._done(path)

    def _done(self, path: str) -> None:
        """Log the request and count it answered (once: a stalled request is logged when it stalls)."""
        if getattr(self, "_logged", False):
            return
        self._logged = True
        self.hub.log.append(Request(self.command, path, self._status, self.headers.get("Range"), self._sent))
        with self.hub._lock:
            self.hub._busy -= 1

    def _repo(self, repo_id: str, prefix: str) -> HubRepo | None:
        """The repo, or None after answering: a redirect for a renamed repo (its id follows ``prefix`` in the
        path), 401 for an unknown one."""
        if repo_id in self.hub.aliases:
            new = urllib.parse.quote(self.hub.aliases[repo_id])
            self._headers(307, {"Location": prefix + new + self.path[len(prefix) + len(repo_id):],
                                "Content-Length": "0"})
            return None
        repo = self.hub.repos.get(repo_id)
        if repo is None:
            self._error(401, "RepoNotFound", "Repository not found")
        return repo

    @staticmethod
    def _split(rest: str, marker: str) -> tuple[str, str] | None:
        """``org/name<marker>tail`` -> (repo id, tail), for ids with or without an organisation."""
        at = rest.find(marker)
        return (rest[:at], rest[at + len(marker):]) if at > 0 else None

    def _api(self, rest: str, query: Mapping) -> None:
        flag = lambda name: (query.get(name) or [""])[0] in _TRUE  # noqa: E731
        found = [(kind, split) for marker, kind in (("/revision/", "info"), ("/tree/", "tree"))
                 if (split := self._split(rest, marker))]
        kind, (repo_id, tail) = found[0] if found else ("info", (rest.rstrip("/"), "main"))
        repo = self._repo(repo_id, "/api/models/")
        if repo is None:
            return
        revision, _, sub = tail.partition("/") if kind == "tree" and not tail.startswith("refs/") else (tail, "", "")
        commit = repo.resolve(revision)
        if commit is None:
            self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
            return
        files = repo.commits[commit]
        if kind == "info":
            siblings = []
            for p, blob in sorted(files.items()):
                entry = {"rfilename": p}
                if flag("blobs"):
                    entry |= {"size": blob.size, "blobId": self.hub.digest(f"{repo.id}@{commit}/{p}", blob, "git")}
                    if is_lfs(p, blob):
                        entry["lfs"] = {"sha256": self.hub.etag(repo.id, commit, p, blob), "size": blob.size,
                                        "pointerSize": 134}
                siblings.append(entry)
            body = {"_id": hashlib.sha1(repo.id.encode()).hexdigest()[:24], "id": repo.id, "modelId": repo.id,
                    "author": repo.id.partition("/")[0] if "/" in repo.id else None, "sha": commit,
                    "lastModified": "2024-01-01T00:00:00.000Z", "createdAt": "2020-01-01T00:00:00.000Z",
                    "private": False, "disabled": False, "gated": "manual" if repo.gated else False,
                    "downloads": 0, "likes": 0, "tags": [], "library_name": "transformers", "siblings": siblings}
        else:
            prefix = f"{sub.strip('/')}/" if sub.strip("/") else ""
            entries, dirs = [], set()
            for p, blob in sorted(files.items()):
                if not p.startswith(prefix):
                    continue
                inner = p[len(prefix):]
                if "/" in inner and not flag("recursive"):
                    dirs.add(prefix + inner.split("/")[0])
                    continue
                for i in range(inner.count("/")):
                    dirs.add(prefix + "/".join(inner.split("/")[:i + 1]))
                entry = {"type": "file", "oid": self.hub.digest(f"{repo.id}@{commit}/{p}", blob, "git"),
                         "size": blob.size, "path": p}
                if is_lfs(p, blob):
                    entry["lfs"] = {"oid": self.hub.etag(repo.id, commit, p, blob), "size": blob.size,
                                    "pointerSize": 134}
                entries.append(entry)
            if prefix and not entries and not dirs:
                self._error(404, "EntryNotFound", f"{sub} does not exist on {revision}")
                return
            entries += [{"type": "directory", "oid": hashlib.sha1(d.encode()).hexdigest(), "size": 0, "path": d}
                        for d in sorted(dirs)]
            body = entries
        self._send_json(body, {"X-Repo-Commit": commit})

    def _resolve(self, raw_path: str, head: bool) -> None:
        repo_part, _, tail = raw_path.lstrip("/").partition("/resolve/")
        repo_id = urllib.parse.unquote(repo_part)
        repo = self._repo(repo_id, "/")
        if repo is None:
            return
        revision_raw, _, file_raw = tail.partition("/")
        revision, name = urllib.parse.unquote(revision_raw), urllib.parse.unquote(file_raw)
        commit = repo.resolve(revision)
        if commit is None:
            self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
            return
        if repo.gated and self.headers.get("Authorization") != f"Bearer {self.hub.token}":
            self._error(401, "GatedRepo", f"Access to model {repo.id} is restricted. You must have access to it and "
                        "be authenticated to access it. Please log in.")
            return
        blob = repo.commits[commit].get(name)
        if blob is None:
            self._error(404, "EntryNotFound", "Entry not found", {"X-Repo-Commit": commit})
            return
        etag = self.hub.etag(repo.id, commit, name, blob)
        if self.hub.cdn and is_lfs(name, blob):
            location = (f"{self.hub.cdn_endpoint}/lfs/{urllib.parse.quote(repo.id)}/{commit}/"
                        f"{urllib.parse.quote(name)}?sig={etag[:16]}")
            headers = {"Location": location, "X-Repo-Commit": commit, "X-Linked-Etag": f'"{etag}"',
                       "X-Linked-Size": str(blob.size), "ETag": f'"{etag}"', "Content-Length": "0"}
            self._headers(302, self._alter(headers))
            return
        self._file(blob, etag, head, {"X-Repo-Commit": commit})

    def _cdn(self, path: str, head: bool) -> None:
        parts = path.removeprefix("/lfs/").split("/")
        for i in range(1, len(parts)):  # repo ids have one or two segments; the commit is 40 hex digits
            repo = self.hub.repos.get("/".join(parts[:i]))
            if repo is not None and parts[i] in repo.commits:
                name = "/".join(parts[i + 1:])
                blob = repo.commits[parts[i]].get(name)
                if blob is not None:
                    self._file(blob, self.hub.etag(repo.id, parts[i], name, blob), head, {})
                    return
        self._error(404, None, "no such object")

    def _mirror(self, path: str, head: bool) -> None:
        prefix, _, name = path.lstrip("/").partition("/")
        blob = self.hub.mirrors.get(prefix, {}).get(name)
        if blob is None:
            self._error(404, None, "Not Found")
            return
        # a plain web server's ETag: size and a stamp, not a content hash
        self._file(blob, f"{blob.size:x}-{hashlib.sha1(path.encode()).hexdigest()[:13]}", head, {})

    # ------------------------------------------------------------------------------------------ responses

    def _alter(self, headers: dict[str, str]) -> dict[str, str]:
        action = self._fault.action if self._fault is not None else ""
        if action.startswith("omit:"):
            headers = {k: v for k, v in headers.items() if k.lower() != action[5:].lower()}
        if action.startswith("etag:"):
            headers = {k: (f'"{action[5:]}"' if k in ("ETag", "X-Linked-Etag") else v) for k, v in headers.items()}
        return headers

    def _headers(self, status: int, headers: Mapping[str, str]) -> None:
        self._status = status
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()

    def _error(self, status: int, code: str | None, message: str, extra: Mapping[str, str] | None = None) -> None:
        body = json.dumps({"error": message}).encode()
        headers = {"Content-Type": "application/json", "Content-Length": str(len(body)), **(extra or {})}
        if code:
            headers |= {"X-Error-Code": code, "X-Error-Message": message}
        self._headers(status, headers)
        if self.command != "HEAD":
            self.wfile.write(body)
            self._sent = len(body)

    def _send_json(self, body, extra: Mapping[str, str]) -> None:
        data = json.dumps(body).encode()
        self._headers(200, {"Content-Type": "application/json", "Content-Length": str(len(data)), **extra})
        self.wfile.write(data)
        self._sent = len(data)

    def _file(self, blob: Blob, etag: str, head: bool, extra: Mapping[str, str]) -> None:
        start, end, status = 0, blob.size, 200
        wanted, if_range = self.headers.get("Range"), self.headers.get("If-Range")
        match = _RANGE.match(wanted.strip()) if wanted else None
        if match and (if_range is None or if_range.strip('"') == etag):
            first, last = match.groups()
            if first == "" and last == "":
                match = None
            elif first == "":
                start = max(blob.size - int(last), 0)
            else:
                start, end = int(first), min(int(last) + 1, blob.size) if last else blob.size
            if match and start >= blob.size:
                self._error(416, None, "Range Not Satisfiable", {"Content-Range": f"bytes */{blob.size}"})
                return
            status = 206 if match else 200
        headers = {"Content-Type": "application/octet-stream", "Content-Length": str(end - start),
                   "Accept-Ranges": "bytes", "ETag": f'"{etag}"', **extra}
        if status == 206:
            headers["Content-Range"] = f"bytes {start}-{end - 1}/{blob.size}"
        self._headers(status, self._alter(headers))
        if head:
            return
        action = self._fault.action if self._fault is not None else ""
        stop = start + int(action.split(":")[1]) if action.startswith(("drop:", "stall:")) else end
        for at in range(start, min(stop, end), BLOCK):
            data = blob.read(at, min(BLOCK, min(stop, end) - at))
            if action == "corrupt" and at == start and data:
                data = bytes([data[0] ^ 0xFF]) + data[1:]
            self.wfile.write(data)
            self._sent += len(data)
        if stop < end:  # the connection drops (or stalls) mid-body
            self.wfile.flush()
            if action.startswith("stall:"):
                self._done(self._path)
                self.hub._stopped.wait()
            self.close_connection = True
            self.connection.shutdown(2)
