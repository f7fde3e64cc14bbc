"""Rule download_dataset's fetches on tiny fixtures in the real formats, served from file:// URLs or a local
HTTP server that asks for credentials as PhysioNet (basic auth) and BioASQ (token) would."""

from __future__ import annotations

import base64
import hashlib
import http.server
import json
import threading
import zipfile
from pathlib import Path

import pytest
from test_datasets_sources import OPENIMAGES_IDS, write_openimages

from argmaxable.fetch import DownloadError
from argmaxable.multilabel.datasets import build, load_built
from argmaxable.multilabel.datasets.download import download_dataset
from argmaxable.multilabel.datasets.schema import DatasetConfig

# ----------------------------------------------------------------------------------------------- OpenImages


def openimages_source(tmp_path: Path) -> Path:
    """A CVDF-like bucket: the label files at the top, images in train/, validation/, test/ (and one extra)."""
    src = write_openimages(tmp_path / "bucket")
    for image in sorted((src / "images").iterdir()):
        split = {"1": "train", "v": "validation", "t": "test"}[image.name[0]]
        (src / split).mkdir(exist_ok=True)
        image.rename(src / split / image.name)
    (src / "images").rmdir()
    (src / "train" / "2zz.jpg").write_bytes((src / "train" / "1aa.jpg").read_bytes())  # not in the "1" shard
    (src / "weights.pth").write_bytes(b"checkpoint bytes")
    return src


def openimages_config(src: Path) -> DatasetConfig:
    files = {p.name: p.as_uri() for p in src.iterdir() if p.is_file() and p.suffix in (".csv", ".txt")}
    files["Open_ImagesV6_TRresNet_L_448.pth"] = (src / "weights.pth").as_uri()
    return DatasetConfig(name="openimages", train_id_prefix="1", dev_size=2, test_size=10,
                         download={"files": files, "images": src.as_uri() + "/{split}/{image_id}.jpg", "workers": 2})


def test_openimages_download_fetches_labels_checkpoint_and_exactly_the_images_used(tmp_path):
    src = openimages_source(tmp_path / "src")
    cfg = openimages_config(src)
    root = tmp_path / "data" / "openimages"
    manifest = download_dataset(cfg, root)
    images = sorted(p.stem for p in (root / "images").iterdir())
    assert images == sorted(OPENIMAGES_IDS)  # 2zz (other shard) and v3 (beyond dev_size) are not fetched
    assert manifest["images"] == len(OPENIMAGES_IDS)
    weights = manifest["files"]["Open_ImagesV6_TRresNet_L_448.pth"]
    assert weights["sha256"] == hashlib.sha256(b"checkpoint bytes").hexdigest()
    assert json.loads((root / "manifest.json").read_text())["files"] == manifest["files"]
    build(cfg, tmp_path / "out", tmp_path / "data")  # the build reads what was fetched
    dsd, _ = load_built(tmp_path / "out")
    assert dsd["train"]["id"] == ["1aa", "1bb", "1cc"]

    # A rerun fetches only what is missing: a changed source image is not fetched again, a deleted one is.
    (src / "train" / "1aa.jpg").write_bytes(b"changed")
    (root / "images" / "1bb.jpg").unlink()
    download_dataset(cfg, root)
    assert (root / "images" / "1aa.jpg").read_bytes() != b"changed" and (root / "images" / "1bb.jpg").is_file()


def test_openimages_failed_image_leaves_no_manifest_and_says_so_in_one_line(tmp_path):
    src = openimages_source(tmp_path / "src")
    (src / "test" / "t1.jpg").unlink()
    root = tmp_path / "data" / "openimages"
    with pytest.raises(DownloadError) as err:
        download_dataset(openimages_config(src), root)
    message = str(err.value)
    assert "openimages" in message and "t1.jpg" in message and "offline" in message and "\n" not in message
    assert not (root / "manifest.json").exists() and not list(root.rglob(".*.part"))


# ----------------------------------------------------------------------------------- PhysioNet and BioASQ

USER, PASSWORD, TOKEN = "reader", "s3cret", "tok123"


class Server(http.server.BaseHTTPRequestHandler):
    """Files of a directory; /physionet/ asks for basic auth, /bioasq/ for the bearer token."""

    root: Path

    def do_GET(self):
        auth = self.headers.get("Authorization", "")
        if self.path.startswith("/physionet/"):
            expected = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
            if auth != expected:
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="PhysioNet"')
                self.end_headers()
                return
        if self.path.startswith("/bioasq/") and auth != f"Bearer {TOKEN}":
            self.send_response(403)
            self.end_headers()
            return
        path = self.root / self.path.lstrip("/")
        if not path.is_file():
            self.send_response(404)
            self.end_headers()
            return
        body = path.read_bytes()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):  # keep the test output quiet
        pass


@pytest.fixture
def server(tmp_path):
    handler = type("Handler", (Server,), {"root": tmp_path / "www"})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield tmp_path / "www", f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


MIMIC_FILES = {"NOTEEVENTS.csv.gz": b"\x1f\x8b notes", "DIAGNOSES_ICD.csv.gz": b"\x1f\x8b codes"}


def mimic_config(www: Path, url: str, tamper: bool = False) -> DatasetConfig:
    release = www / "physionet" / "mimiciii" / "1.4"
    release.mkdir(parents=True)
    sums = []
    for name, body in MIMIC_FILES.items():
        (release / name).write_bytes(body)
        sums.append(f"{hashlib.sha256(body + (b'x' if tamper else b'')).hexdigest()}  {name}")
    (release / "SHA256SUMS.txt").write_text("\n".join(sums) + "\n")
    base = f"{url}/physionet/mimiciii/1.4"
    return DatasetConfig(name="mimic3", download={
        "credentials": "physionet", "checksums": f"{base}/SHA256SUMS.txt",
        "files": {name: f"{base}/{name}" for name in MIMIC_FILES}})


def test_mimic3_without_credentials_says_how_to_get_access(server, tmp_path, monkeypatch):
    www, url = server
    monkeypatch.delenv("PHYSIONET_USERNAME", raising=False)
    monkeypatch.delenv("PHYSIONET_PASSWORD", raising=False)
    with pytest.raises(DownloadError) as err:
        download_dataset(mimic_config(www, url), tmp_path / "mimic3")
    message = str(err.value)
    assert "PHYSIONET_USERNAME, PHYSIONET_PASSWORD not set" in message and "physionet.org" in message
    assert "\n" not in message and not (tmp_path / "mimic3").exists()


def test_mimic3_with_credentials_fetches_checked_files(server, tmp_path, monkeypatch):
    www, url = server
    monkeypatch.setenv("PHYSIONET_USERNAME", USER)
    monkeypatch.setenv("PHYSIONET_PASSWORD", PASSWORD)
    manifest = download_dataset(mimic_config(www, url), tmp_path / "mimic3")
    for name, body in MIMIC_FILES.items():
        assert (tmp_path / "mimic3" / name).read_bytes() == body
        assert manifest["files"][name]["sha256"] == hashlib.sha256(body).hexdigest()
    assert "SHA256SUMS.txt" in manifest["files"]


def test_mimic3_wrong_password_or_checksum_fails_without_a_manifest(server, tmp_path, monkeypatch):
    www, url = server
    monkeypatch.setenv("PHYSIONET_USERNAME", USER)
    monkeypatch.setenv("PHYSIONET_PASSWORD", "wrong")
    cfg = mimic_config(www, url, tamper=True)
    with pytest.raises(DownloadError, match="HTTP 401"):
        download_dataset(cfg, tmp_path / "mimic3")
    monkeypatch.setenv("PHYSIONET_PASSWORD", PASSWORD)
    with pytest.raises(DownloadError, match="does not match its expected sha256"):
        download_dataset(cfg, tmp_path / "mimic3")
    assert not (tmp_path / "mimic3" / "manifest.json").exists()
    assert not (tmp_path / "mimic3" / "NOTEEVENTS.csv.gz").exists()


def test_bioasq_fetches_the_users_link_with_the_token_and_unzips(server, tmp_path, monkeypatch):
    www, url = server
    (www / "bioasq").mkdir(parents=True)
    article = {"journal": "J", "title": "T", "abstractText": "A", "meshMajor": ["Humans"], "pmid": "1"}
    text = '{"articles":[' + json.dumps(article) + "]}\n"
    with zipfile.ZipFile(www / "bioasq" / "allMeSH_2021.zip", "w") as zf:
        zf.writestr("allMeSH_2021.json", text.encode("latin-1"))
    cfg = DatasetConfig(name="bioasq", download={"credentials": "bioasq", "files": {"allMeSH_2021.zip": ""},
                                                 "unpack": ["allMeSH_2021.zip"]})
    monkeypatch.delenv("BIOASQ_TOKEN", raising=False)
    monkeypatch.setenv("BIOASQ_URL", f"{url}/bioasq/allMeSH_2021.zip")
    with pytest.raises(DownloadError, match=r"BIOASQ_TOKEN not set\. BioASQ needs registration"):
        download_dataset(cfg, tmp_path / "bioasq")
    monkeypatch.setenv("BIOASQ_TOKEN", TOKEN)
    manifest = download_dataset(cfg, tmp_path / "bioasq")
    assert (tmp_path / "bioasq" / "allMeSH_2021.json").read_text(encoding="latin-1") == text
    assert list(manifest["files"]) == ["allMeSH_2021.json"] and manifest["sources"]["allMeSH_2021.zip"].startswith(url)


# ------------------------------------------------------------------------------------------- confinement


@pytest.mark.parametrize("key", ["files", "unpack"])
def test_a_dataset_download_cannot_write_outside_its_directory(tmp_path, key):
    src = tmp_path / "labels.csv"
    src.write_text("id,labels\n")
    files = {"../escaped.csv": src.as_uri()} if key == "files" else {"labels.csv": src.as_uri()}
    spec = {"files": files, **({"unpack": ["../labels.csv"]} if key == "unpack" else {})}
    root = tmp_path / "data" / "tiny"
    with pytest.raises(DownloadError, match=f"download.{key} '../.*' is not a path inside"):
        download_dataset(DatasetConfig(name="tiny", download=spec), root)
    assert not (tmp_path / "data" / "escaped.csv").exists()
