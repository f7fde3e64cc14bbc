"""General fetching (argmaxable.fetch), shared by the model and data set downloads: a URL served on the loopback
that drops the connection half-way is resumed with an HTTP Range request; checksums and permanent errors leave
nothing behind; a staging directory replaces its destination only on success; archives and config paths cannot
reach outside their directory; the manifest lists every file with its size and SHA-256."""

from __future__ import annotations

import hashlib
import http.server
import io
import json
import re
import tarfile
import threading
import zipfile
from pathlib import Path
from typing import ClassVar

import pytest

from argmaxable.fetch import MANIFEST, DownloadError, fetch_url, inside, staging_dir, unpack, write_manifest

PAYLOAD = bytes(range(256)) * 400  # 100 KiB, so that half of it is a real partial transfer


class _Flaky(http.server.BaseHTTPRequestHandler):
    """Serves PAYLOAD at /file with Range support; the first request's connection breaks half-way."""

    requests: ClassVar[list] = []  # the Range header of each request, in order

    def do_GET(self):
        type(self).requests.append(self.headers.get("Range"))
        if self.path != "/file":
            self.send_error(404)
            return
        start = int(self.headers["Range"].split("=")[1].rstrip("-")) if self.headers.get("Range") else 0
        body = PAYLOAD[start:]
        self.send_response(206 if start else 200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if len(type(self).requests) == 1:
            self.wfile.write(body[: len(body) // 2])  # then the connection drops: a short read
            self.close_connection = True
            return
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    _Flaky.requests = []
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Flaky) as srv:
        thread = threading.Thread(target=srv.serve_forever, daemon=True)
        thread.start()
        yield f"http://127.0.0.1:{srv.server_address[1]}"
        srv.shutdown()


def test_fetch_url_resumes_after_a_dropped_connection(server, tmp_path):
    digest = hashlib.sha256(PAYLOAD).hexdigest()
    path = fetch_url(f"{server}/file", tmp_path / "out.bin", sha256=digest, backoff=0)
    assert path.read_bytes() == PAYLOAD
    assert _Flaky.requests == [None, f"bytes={len(PAYLOAD) // 2}-"]  # the second asked only for the rest
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.bin"]


def test_fetch_url_errors_leave_nothing(server, tmp_path):
    with pytest.raises(DownloadError, match="does not match its expected sha256"):
        fetch_url(f"{server}/file", tmp_path / "out.bin", sha256="0" * 64, backoff=0)
    _Flaky.requests = []
    with pytest.raises(DownloadError, match="HTTP 404"):
        fetch_url(f"{server}/missing", tmp_path / "out.bin", backoff=0)
    assert len(_Flaky.requests) == 1  # a 404 is permanent: no retries
    with pytest.raises(DownloadError, match="cannot download file://"):
        fetch_url((tmp_path / "nope.bin").as_uri(), tmp_path / "out.bin", backoff=0)
    assert list(tmp_path.iterdir()) == []


def escaping_archive(tmp_path: Path, kind: str) -> Path:
    """A zip or tar.gz whose second member climbs out of the extraction directory."""
    if kind == "zip":
        path = tmp_path / "evil.zip"
        with zipfile.ZipFile(path, "w") as zf:
            zf.writestr("ok.txt", "fine")
            zf.writestr("../../escaped.txt", "out")
        return path
    path = tmp_path / "evil.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for name, data in (("ok.txt", b"fine"), ("../../escaped.txt", b"out")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


@pytest.mark.parametrize("kind", ["zip", "tar"])
def test_unpack_refuses_a_member_that_leaves_the_directory(tmp_path, kind):
    archive = escaping_archive(tmp_path, kind)
    into = tmp_path / "a" / "b"
    into.mkdir(parents=True)
    with pytest.raises(DownloadError, match=r"evil\.(zip|tar\.gz)") as err:
        unpack(archive, into)
    assert "\n" not in str(err.value) and not list(tmp_path.rglob("escaped.txt"))


def test_unpack_refuses_a_file_that_is_no_archive(tmp_path):
    (tmp_path / "w.bin").write_bytes(b"weights")
    with pytest.raises(DownloadError, match=r"w\.bin is neither a zip nor a tar archive: set 'unpack: false'"):
        unpack(tmp_path / "w.bin", tmp_path)


def test_inside_refuses_paths_that_leave_the_root(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (root / "link").symlink_to(tmp_path)  # a symlink that leads out
    assert inside(root, "a/b.txt", "download.files") == root / "a" / "b.txt"
    for name in ["../out.txt", "/tmp/out.txt", "a/../../out.txt", "link/out.txt", "", "."]:
        with pytest.raises(DownloadError, match=re.escape(f"download.files {name!r} is not a path inside")):
            inside(root, name, "download.files")


def test_staging_dir_replaces_its_destination_only_on_success(tmp_path):
    dest = tmp_path / "d"
    dest.mkdir()
    (dest / "old.txt").write_text("old")
    with pytest.raises(RuntimeError, match="interrupted"), staging_dir(dest) as tmp:
        (tmp / "new.txt").write_text("new")
        raise RuntimeError("interrupted")
    assert [p.name for p in tmp_path.iterdir()] == ["d"] and [p.name for p in dest.iterdir()] == ["old.txt"]
    with staging_dir(dest) as tmp:
        (tmp / "new.txt").write_text("new")
    assert [p.name for p in tmp_path.iterdir()] == ["d"] and [p.name for p in dest.iterdir()] == ["new.txt"]


def test_write_manifest_lists_every_file_with_size_and_sha256_but_itself(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.bin").write_bytes(b"xyz")
    manifest = write_manifest(tmp_path, source="s", revision="r")
    x = {"size": 3, "sha256": hashlib.sha256(b"xyz").hexdigest()}
    assert manifest == {"source": "s", "revision": "r", "files": {"a/x.bin": x}}
    assert json.loads((tmp_path / MANIFEST).read_text()) == manifest
    assert write_manifest(tmp_path, source="s", revision="r") == manifest  # a rewrite does not list the old one
