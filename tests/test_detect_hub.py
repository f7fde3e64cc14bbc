"""Hub models through the real download protocol: a local hub (argmaxable.rehearsal.server) serving tiny
transformers models saved with save_pretrained, read by huggingface_hub itself and by our head-only fetch.

Oracles that are not our code: huggingface_hub's own client (model_info, list_repo_tree, hf_hub_download,
get_safetensors_metadata, snapshot_download) must read the server as it reads the hub; hashlib gives each file's
ETag; the model's own output layer (probed through the module) must equal what the head-only fetch reads; the
server's request log says what was fetched and whether a download resumed."""

from __future__ import annotations

import hashlib
import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from test_detect_loaders import output_layer, saved

from argmaxable import fetch
from argmaxable.cli import main
from argmaxable.config import load_config
from argmaxable.detect import loaders, remote
from argmaxable.detect.download import download_model
from argmaxable.detect.loaders import load_huggingface, load_model
from argmaxable.detect.weights import WeightsError
from argmaxable.fetch import DownloadError
from argmaxable.rehearsal.server import Fault, HubRepo, LocalHub

PAPER = load_config(["experiment=paper"]).model
COMMIT = "0123456789abcdef0123456789abcdef01234567"
OLD = "fedcba9876543210fedcba9876543210fedcba98"


def files_of(directory: Path) -> dict[str, bytes]:
    return {p.relative_to(directory).as_posix(): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def vocab(directory: Path, n: int) -> list[str]:
    tokens = [f"Ġw{i}" for i in range(n)]
    (directory / "vocab.json").write_text(json.dumps({t: i for i, t in enumerate(tokens)}))
    return tokens


@pytest.fixture
def env(tmp_path, monkeypatch):
    """A clean hub cache, our cache, no offline mode, short back-off; ``env.serve(hub)`` points HF_ENDPOINT."""
    import huggingface_hub.constants as constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("ARGMAXABLE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(fetch, "BACKOFF", 0.01)

    class Env:
        root = tmp_path

        @staticmethod
        def serve(hub: LocalHub) -> LocalHub:
            hub.start()
            monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
            return hub

        @staticmethod
        def offline():
            monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)

    return Env


@pytest.fixture
def gpt2(tmp_path):
    """A tiny GPT-2 saved in four safetensors shards with its vocab.json, served as openai-community/gpt2 (and as
    gpt2, the hub's old name, by redirect)."""
    model = saved("gpt2", tmp_path / "gpt2", max_shard_size="2KB")
    tokens = vocab(tmp_path / "gpt2", 53)
    repo = HubRepo.single("openai-community/gpt2", COMMIT, files_of(tmp_path / "gpt2"))
    return model, tokens, LocalHub({repo.id: repo}, aliases={"gpt2": repo.id})


def test_huggingface_hub_reads_the_local_hub_as_the_hub(env, gpt2):
    """model_info, list_repo_tree, hf_hub_download (through the renamed id and the CDN redirect),
    get_safetensors_metadata (headers by Range only), snapshot_download, and each error class by X-Error-Code."""
    from huggingface_hub import HfApi, hf_hub_download, snapshot_download
    from huggingface_hub.errors import (
        GatedRepoError,
        RemoteEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    _, _, hub = gpt2
    hub.repos["org/gated"] = HubRepo.single("org/gated", COMMIT, {"config.json": "{}"}, gated=True)
    files = files_of(env.root / "gpt2")
    with env.serve(hub):
        api = HfApi(endpoint=hub.endpoint)
        info = api.model_info("openai-community/gpt2", files_metadata=True)
        assert info.sha == COMMIT and sorted(s.rfilename for s in info.siblings) == sorted(files)
        for s in info.siblings:
            data = files[s.rfilename]
            assert s.size == len(data)
            if s.rfilename.endswith(".safetensors"):
                assert s.lfs.sha256 == hashlib.sha256(data).hexdigest()
            assert s.blob_id == hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
        tree = {f.path: f.size for f in api.list_repo_tree("openai-community/gpt2", recursive=True)}
        assert tree == {k: len(v) for k, v in files.items()}
        shard = json.loads(files["model.safetensors.index.json"])["weight_map"]["transformer.wte.weight"]
        for name in ("config.json", shard):
            path = Path(hf_hub_download("gpt2", name, revision="main", endpoint=hub.endpoint))
            assert path.read_bytes() == files[name] and path.parent.name == COMMIT
        meta = api.get_safetensors_metadata("openai-community/gpt2", token=False)
        assert set(meta.weight_map) == set(json.loads(files["model.safetensors.index.json"])["weight_map"])
        snap = Path(snapshot_download("openai-community/gpt2", endpoint=hub.endpoint))
        assert files_of(snap) == files
        with pytest.raises(RepositoryNotFoundError):
            api.model_info("org/missing")
        with pytest.raises(RevisionNotFoundError):
            api.model_info("openai-community/gpt2", revision="v9")
        with pytest.raises(RemoteEntryNotFoundError):
            hf_hub_download("openai-community/gpt2", "missing.bin", endpoint=hub.endpoint)
        with pytest.raises(GatedRepoError):
            hf_hub_download("org/gated", "config.json", endpoint=hub.endpoint, token=False)


def test_hub_id_without_org_resolves_and_fetches_the_head_only(env, gpt2, capsys):
    """`check softmax gpt2` (the papers' ids have no organisation) and `bert-base-uncased`: resolved through the
    hub, only the shard holding the head read, and of it only the head's bytes; the rows named from vocab.json."""
    model, tokens, hub = gpt2
    saved("bert", env.root / "bert")
    (env.root / "bert" / "vocab.txt").write_text("\n".join(f"[t{i}]" for i in range(53)) + "\n")
    hub.repos["google-bert/bert-base-uncased"] = HubRepo.single("google-bert/bert-base-uncased", COMMIT,
                                                                files_of(env.root / "bert"))
    hub.aliases["bert-base-uncased"] = "google-bert/bert-base-uncased"
    with env.serve(hub):
        out = env.root / "t.csv"
        assert main(["check", "softmax", "gpt2", "--revision", "main", "--patience", "50", "--out", str(out)]) == 0
        assert f"head: huggingface:gpt2@{COMMIT}" in capsys.readouterr().out
        hub.settle()
        shards = {r.path.rsplit("/", 1)[-1] for r in hub.log if r.method == "GET" and r.path.endswith(".safetensors")}
        index = json.loads((env.root / "gpt2" / "model.safetensors.index.json").read_text())["weight_map"]
        assert shards == {index["transformer.wte.weight"]} and len(set(index.values())) > 2  # one shard of several
        shard = files_of(env.root / "gpt2")[index["transformer.wte.weight"]]
        assert hub.bytes_sent("/lfs/") <= len(shard)  # each byte once (here the head fills its shard)
        assert main(["check", "softmax", "bert-base-uncased", "--patience", "50"]) == 0
    import pandas as pd

    table = pd.read_csv(out, keep_default_na=False)
    assert table["raw_token" if "raw_token" in table else "token"].tolist() == tokens
    W, _ = output_layer(model)
    reference = load_huggingface(str(env.root / "gpt2"))
    np.testing.assert_array_equal(reference.W, load_huggingface("gpt2").W)  # cached: no server needed now
    np.testing.assert_allclose(reference.W, W, atol=1e-6)
    meta = json.loads(Path(f"{out}.meta.json").read_text())
    assert meta["origin"] == f"huggingface:gpt2@{COMMIT}"
    assert sorted(Path(p).name for p in meta["inputs"]) == ["config.json", index["transformer.wte.weight"],
                                                             "vocab.json"]
    assert all(len(h) == 64 for h in meta["inputs"].values())


def test_a_server_error_is_not_a_missing_file(env, gpt2):
    """The hub answering 500 for the checkpoint: one line naming the file and the error, never "the model lacks
    this file" (huggingface_hub's LocalEntryNotFoundError is an EntryNotFoundError: the narrower one first)."""
    _, _, hub = gpt2
    hub.faults.append(Fault("-of-0", "status:500", times=-1))  # the shards, not their index
    with env.serve(hub), pytest.raises(WeightsError) as err:
        load_huggingface("openai-community/gpt2")
    assert "HTTP 500" in str(err.value) and "no checkpoint" not in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("layout", ["safetensors", "zip", "legacy"])
def test_download_reads_each_checkpoint_format_head_only(env, tmp_path, layout, monkeypatch):
    """A Marian model as model.safetensors, a zip pytorch_model.bin or a legacy (torch < 1.6) one: the download
    keeps only the head's tensors, in the checkpoint's own format, and records their names, which the check reads
    the model's own layer by without building its model class again."""
    from safetensors.torch import load_file

    model = saved("marian", tmp_path / "m")
    if layout != "safetensors":
        state = load_file(str(tmp_path / "m" / "model.safetensors"))
        (tmp_path / "m" / "model.safetensors").unlink()
        torch.save(state, tmp_path / "m" / "pytorch_model.bin", _use_new_zipfile_serialization=layout == "zip")
    vocab(tmp_path / "m", 53)
    cfg = PAPER["opus_mt_ar_el"]
    repo = HubRepo.single(cfg.download.repo, COMMIT, files_of(tmp_path / "m"))
    with env.serve(LocalHub({repo.id: repo})) as hub:
        manifest = download_model(cfg, tmp_path / "data")
    checkpoint = "model.safetensors" if layout == "safetensors" else "pytorch_model.bin"
    head = manifest["head"][checkpoint]
    assert manifest["revision"] == COMMIT and manifest["requested"] == "main"
    assert head["format"] == {"safetensors": "safetensors", "zip": "torch-zip", "legacy": "torch-legacy"}[layout]
    assert set(head["tensors"]) == {"model.shared.weight", "final_logits_bias"}
    assert head["fetched"] <= head["size"]
    assert manifest["bytes_fetched"] == hub.bytes_sent("/resolve/") + hub.bytes_sent("/lfs/")  # files, not API JSON
    assert manifest["head_keys"] == ["model.shared.weight", "final_logits_bias"]

    def built(config):
        raise AssertionError("the head's model class was built again")

    monkeypatch.setattr(loaders, "logits_names", built)
    layer = load_model(cfg, root=tmp_path / "data")
    W, b = output_layer(model)
    np.testing.assert_allclose(layer.W, W, atol=1e-6)
    np.testing.assert_allclose(layer.b, b, atol=1e-6)
    assert not (tmp_path / ".data.parts").exists()


@pytest.mark.parametrize("fmt", ["safetensors", "torch-zip", "torch-legacy", "npz"])
def test_only_the_heads_bytes_are_read(env, fmt):
    """Of a checkpoint with 4 MB of other tensors, the header and the head's 24 KB are read, and nothing else."""
    from argmaxable.detect.remote import Remote, extract_head
    from argmaxable.detect.weights import open_tensors, read_member
    from argmaxable.rehearsal.blobs import Array, npz_blob, safetensors_blob, torch_legacy_blob, torch_zip_blob

    W, b, filler = Array((500, 12), seed=5), Array((500,), seed=6), Array((1000, 1000))
    tensors = [("filler.a", filler), ("head.weight", W), ("head.bias", b), ("filler.b", filler)]
    blob = {"safetensors": safetensors_blob, "torch-zip": torch_zip_blob, "torch-legacy": torch_legacy_blob,
            "npz": npz_blob}[fmt](tensors)
    name = {"safetensors": "model.safetensors", "npz": "model.npz"}.get(fmt, "pytorch_model.bin")
    with env.serve(LocalHub({"org/m": HubRepo.single("org/m", COMMIT, {name: blob})})) as hub:
        source = Remote(f"{hub.endpoint}/org/m/resolve/main/{name}", commit=COMMIT)
        record = extract_head(name, source, ["head.weight", "head.bias"], env.root / name, env.root / "parts")
        sent = hub.bytes_sent()
    head = W.size + b.size
    assert record["format"] == fmt and record["size"] == blob.size > 8_000_000
    assert head <= record["fetched"] == sent < head + 2 * remote.READ_AHEAD + 4096
    with open_tensors(env.root / name) as got:
        assert sorted(got) == ["head.bias", "head.weight"]
        np.testing.assert_array_equal(read_member(got, "head.weight", name), W.values(0, W.numel).reshape(500, 12))


def _marian_repo(tmp_path, n: int = 53) -> tuple[HubRepo, object]:
    """A tiny Marian model served as opus-mt-ar-el (``n`` tokens: 4000 make a head larger than one read-ahead)."""
    import transformers
    from test_detect_loaders import SEQ2SEQ

    torch.manual_seed(0)
    model = transformers.MarianMTModel(transformers.MarianConfig(vocab_size=n, pad_token_id=n - 1,
                                                                 decoder_start_token_id=n - 1, **SEQ2SEQ))
    model.save_pretrained(tmp_path / "m")
    vocab(tmp_path / "m", n)
    return HubRepo.single(PAPER["opus_mt_ar_el"].download.repo, COMMIT, files_of(tmp_path / "m")), model


def test_transient_faults_are_retried_and_resumed(env, tmp_path):
    """500 twice then 200 (a small file through huggingface_hub, a range through ours), and a connection dropped
    mid-range: the download succeeds, and the dropped range resumes at the byte where it stopped."""
    repo, model = _marian_repo(tmp_path)
    hub = LocalHub({repo.id: repo}, faults=[Fault("config.json", "status:500", 2),
                                            Fault("model.safetensors", "status:500", 2, "GET"),
                                            Fault("model.safetensors", "drop:300", 1, "GET")])
    with env.serve(hub):
        download_model(PAPER["opus_mt_ar_el"], tmp_path / "data")
        hub.settle()
    gets = [r for r in hub.log if r.method == "GET" and r.path.endswith("model.safetensors")]
    assert [r.status for r in gets[:3]] == [500, 500, 206] and gets[2].sent == 300
    first = int(gets[2].range.split("=")[1].split("-")[0])
    assert gets[3].range.startswith(f"bytes={first + 300}-")  # resumed, not started over
    assert [r.status for r in hub.log if r.path.endswith("config.json")][:2] == [500, 500]
    np.testing.assert_allclose(load_model(PAPER["opus_mt_ar_el"], root=tmp_path / "data").W, output_layer(model)[0],
                               atol=1e-6)


def test_a_download_killed_halfway_resumes(env, tmp_path):
    """A download process killed while the head's bytes arrive: the next run asks only for the bytes it lacks."""
    repo, model = _marian_repo(tmp_path, 4000)
    # the checkpoint's first GET reads its header; the second, the head's tensor, stalls after 1000 bytes
    hub = LocalHub({repo.id: repo}, faults=[Fault("model.safetensors", "stall:1000", 1, "GET", after=1)])
    dest, parts = tmp_path / "data", remote.part_dir(tmp_path / "data")
    # the download's head read, as download_model makes it, in a process that is killed (importing no torch)
    code = ("import sys; from pathlib import Path; from argmaxable.detect.remote import Remote, extract_head; "
            "url, dest = sys.argv[1:]; extract_head('model.safetensors', Remote(url), ['model.shared.weight'], "
            "Path(dest) / 'x', Path(dest).parent / ('.' + Path(dest).name + '.parts'))")
    with env.serve(hub):
        url = f"{hub.endpoint}/{repo.id}/resolve/{COMMIT}/model.safetensors"
        child = subprocess.Popen([sys.executable, "-c", code, url, str(dest)])
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not any(p.stat().st_size >= 1000 for p in parts.glob("*.part")):
            time.sleep(0.05)
        child.send_signal(signal.SIGKILL)
        child.wait()
        (part,) = parts.glob("*.part")
        offset = int(part.name.split(".")[-2].split("-")[0])
        assert part.stat().st_size == 1000 and not dest.exists()
        hub.log.clear()
        download_model(PAPER["opus_mt_ar_el"], dest)
        hub.settle()
    ranges = [r.range for r in hub.log if r.method == "GET" and r.range]
    assert any(r.startswith(f"bytes={offset + 1000}-") for r in ranges), (offset, ranges)  # the bytes it lacked
    assert not any(r.startswith(f"bytes={offset}-") for r in ranges), (offset, ranges)  # not those it had
    assert not parts.exists()
    np.testing.assert_allclose(load_model(PAPER["opus_mt_ar_el"], root=dest).W, output_layer(model)[0], atol=1e-6)


@pytest.mark.parametrize("case", ["unknown repo", "gated", "unknown revision", "corrupt", "etag changes",
                                  "no commit header", "offline"])
def test_a_failed_download_is_one_line_and_leaves_nothing(env, tmp_path, case):
    """Each ends in one line naming the model and the repo, and no directory, part or partial file is left."""
    repo, _ = _marian_repo(tmp_path)
    cfg = PAPER["opus_mt_ar_el"]
    hub = LocalHub({repo.id: repo}, token="hf_secret")
    if case == "unknown repo":
        cfg = {**cfg, "download": {**cfg.download, "repo": "Helsinki-NLP/opus-mt-xx-yy"}}
    elif case == "gated":
        repo.gated = True
    elif case == "unknown revision":
        cfg = {**cfg, "download": {**cfg.download, "revision": "v2"}}
    elif case == "corrupt":  # the bytes of config.json differ from its ETag
        hub.faults.append(Fault("config.json", "corrupt", -1, "GET"))
    elif case == "etag changes":  # the checkpoint replaced between its HEAD and the ranges
        hub.faults.append(Fault("model.safetensors", f"etag:{'0' * 64}", -1, "GET"))
    elif case == "no commit header":  # a proxy that drops the hub's headers
        hub.faults.append(Fault("model.safetensors", "omit:X-Repo-Commit", -1, "HEAD"))
    elif case == "offline":
        env.offline()
    dest = tmp_path / "data"
    with env.serve(hub), pytest.raises(DownloadError) as err:
        download_model(cfg, dest)
    message = str(err.value)
    expected = {"unknown repo": "no such repo", "gated": "gated repo: accept its licence", "unknown revision":
                "no such revision", "corrupt": "do not match the ETag", "etag changes": "the ETag changed",
                "no commit header": "no X-Repo-Commit header", "offline": "HF_HUB_OFFLINE is set"}[case]
    assert "\n" not in message and expected in message, message
    assert message.startswith(f"cannot download model 'opus-mt-ar-el' from {cfg['download']['repo']}: ")
    assert not dest.exists() and not remote.part_dir(dest).exists() and not list(tmp_path.glob(".data*"))
    if case == "corrupt":  # the corrupt copy is not left in the hub cache either
        config = repo.commits[COMMIT]["config.json"].read(0, 1 << 20)
        etag = hashlib.sha1(b"blob %d\0" % len(config) + config).hexdigest()
        assert not list((tmp_path / "hf").rglob(etag)) and not list((tmp_path / "hf").rglob("config.json"))


def test_a_gated_repo_with_its_token_and_a_pinned_commit(env, tmp_path, monkeypatch):
    """HF_TOKEN opens a gated repo; a config pinned to an older commit gets that commit's files (main has moved on
    to a commit without the model) and records it."""
    repo, model = _marian_repo(tmp_path)
    repo.gated = True
    repo.commits = {OLD: repo.commits[COMMIT], COMMIT: {"config.json": repo.commits[COMMIT]["config.json"]}}
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    cfg = PAPER["opus_mt_ar_el"]
    pinned = {**cfg, "download": {**cfg.download, "revision": OLD}}
    with env.serve(LocalHub({repo.id: repo}, token="hf_secret")) as hub:
        manifest = download_model(pinned, tmp_path / "data")
        hub.settle()
    assert manifest["revision"] == OLD and manifest["requested"] == OLD
    served = [r.path for r in hub.log if "/resolve/" in r.path or r.path.startswith("/lfs/")]
    assert served and all(OLD in p for p in served)
    np.testing.assert_allclose(load_model(cfg, root=tmp_path / "data").W, output_layer(model)[0], atol=1e-6)


def test_url_downloads_through_a_mirror_read_the_npz_head_only(env, tmp_path):
    """A WMT17 .npz URL rewritten by `mirrors` to the local mirror: only Wemb_dec and ff_logit_b are read."""
    from argmaxable.rehearsal.blobs import Array, npz_blob

    W, b, src = Array((300, 8), seed=1), Array((300,), seed=2), Array((280, 8), seed=3)
    filler = Array((400, 64))
    cfg = PAPER["wmt17_en_de_l2r_1"]
    prefix, _, path = cfg.download.url.partition("wmt17_systems/")
    hub = LocalHub(mirrors={"statmt": {f"wmt17_systems/{path}": npz_blob([
        ("Wemb", src), ("Wemb_dec", W), ("ff_logit_b", b), ("decoder_U", filler)])}})
    with env.serve(hub):
        manifest = download_model(cfg, tmp_path / "data", mirrors={prefix: hub.mirror_url("statmt")})
    assert set(manifest["head"]["model.npz"]["tensors"]) == {"Wemb_dec", "ff_logit_b"}
    assert manifest["bytes_fetched"] == hub.bytes_sent() < manifest["head"]["model.npz"]["size"] // 2
    layer = load_model(cfg, root=tmp_path / "data")
    np.testing.assert_array_equal(layer.W, W.values(0, W.numel).reshape(300, 8))
    np.testing.assert_array_equal(layer.b, b.values(0, 300))


def test_an_index_that_leads_out_of_the_directory_is_refused(tmp_path, env):
    """A safetensors index mapping the head to ../outside/x.safetensors or an absolute path
    made the check read that file; now refused in one line, for a directory and for a hub snapshot alike."""
    saved("gpt2", tmp_path / "m", max_shard_size="2KB")
    index_path = tmp_path / "m" / "model.safetensors.index.json"
    index = json.loads(index_path.read_text())
    shard = index["weight_map"]["transformer.wte.weight"]
    (tmp_path / "outside").mkdir()
    shutil.copy(tmp_path / "m" / shard, tmp_path / "outside" / "x.safetensors")
    for target in ("../outside/x.safetensors", str(tmp_path / "outside" / "x.safetensors")):
        index["weight_map"]["transformer.wte.weight"] = target
        index_path.write_text(json.dumps(index))
        with pytest.raises(WeightsError, match="not a file inside the model's directory: refused"):
            load_huggingface(str(tmp_path / "m"))
        assert main(["check", "softmax", str(tmp_path / "m")]) == 2
        repo = HubRepo.single("org/escape", COMMIT, files_of(tmp_path / "m"))
        with env.serve(LocalHub({repo.id: repo})), pytest.raises(WeightsError, match="not a shard inside"):
            load_huggingface("org/escape")


def test_a_directory_check_records_the_files_it_read(tmp_path, capsys):
    """The table's .meta.json hashes the files the check read (config, checkpoint, vocabulary), not the directory."""
    saved("gpt2", tmp_path / "m")
    vocab(tmp_path / "m", 53)
    (tmp_path / "m" / "unrelated.txt").write_text("not read")
    out = tmp_path / "t.csv"
    assert main(["check", "softmax", str(tmp_path / "m"), "--patience", "50", "--out", str(out)]) == 0
    inputs = json.loads(Path(f"{out}.meta.json").read_text())["inputs"]
    assert sorted(Path(p).name for p in inputs) == ["config.json", "model.safetensors", "vocab.json"]
    assert inputs[str(tmp_path / "m" / "model.safetensors")] == hashlib.sha256(
        (tmp_path / "m" / "model.safetensors").read_bytes()).hexdigest()


@pytest.mark.parametrize("model_type", ["gpt2", "evil"])
def test_a_config_naming_custom_code_is_refused(tmp_path, model_type, capsys):
    """config.json with auto_map made transformers offer to run the directory's Python (or,
    for a known model type, load it quietly); now one line, exit 2, and the code never runs."""
    saved("gpt2", tmp_path / "m")
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    config |= {"model_type": model_type, "auto_map": {"AutoConfig": "evil.EvilConfig",
                                                      "AutoModelForCausalLM": "evil.EvilModel"}}
    (tmp_path / "m" / "config.json").write_text(json.dumps(config))
    marker = tmp_path / "ran"
    (tmp_path / "m" / "evil.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    capsys.readouterr()
    assert main(["check", "softmax", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "names custom code (auto_map: AutoConfig, AutoModelForCausalLM)" in err
    assert not marker.exists()


def test_an_offline_revision_cannot_leave_the_cache_and_hub_runs_record_their_inputs(tmp_path, env, gpt2, capsys):
    """`--revision ../../x` under HF_HUB_OFFLINE took any local directory as the snapshot; now
    refused. A hub-id run offline reads the cached commit and records the files it read."""
    _, _, hub = gpt2
    with env.serve(hub):
        assert main(["check", "softmax", "openai-community/gpt2", "--patience", "50"]) == 0
    env.offline()
    assert main(["check", "softmax", "openai-community/gpt2", "--revision", "../../x"]) == 2
    assert "'../../x' is not a revision" in capsys.readouterr().err
    out = tmp_path / "t.csv"
    assert main(["check", "softmax", "openai-community/gpt2", "--patience", "50", "--out", str(out)]) == 0
    inputs = json.loads(Path(f"{out}.meta.json").read_text())["inputs"]
    assert len(inputs) == 3 and all(COMMIT in p for p in inputs)
    assert main(["check", "softmax", "org/never-fetched"]) == 2
    assert "HF_HUB_OFFLINE is set" in capsys.readouterr().err


def test_pin_writes_the_hubs_commits_into_the_configs(env, tmp_path, capsys):
    """`argmaxable config pin` against the local hub: every hub model's `revision: main` becomes the commit main
    names there, nothing else in the files changes, the tree still composes, a second run changes nothing, and
    a repo the hub lacks is one line while the others are pinned."""
    from argmaxable.config import CONFIG_DIR
    from argmaxable.detect.pins import declarations

    config = tmp_path / "config"
    shutil.copytree(CONFIG_DIR, config)
    declared = declarations(config)
    assert len(declared) == len(PAPER) - 106 and {d.revision for d in declared} == {"main"}  # 47 hub models
    missing = declared[0]
    commits = {d.repo: hashlib.sha1(d.repo.encode()).hexdigest() for d in declared}
    hub = LocalHub({d.repo: HubRepo.single(d.repo, commits[d.repo], {"config.json": "{}"}) for d in declared[1:]})
    before = {d.key: d.path.read_text() for d in declared}
    with env.serve(hub):
        assert main(["config", "pin", "--config-dir", str(config), "--dry-run"]) == 1
        assert {d.key: d.path.read_text() for d in declared} == before
        assert main(["config", "pin", "--config-dir", str(config)]) == 1
        out = capsys.readouterr().out
        assert f"{missing.key}: {missing.repo} main -> ? failed: " in out and "no such repo" in out
        assert f"{len(declared) - 1} pinned, 0 unchanged, 1 failed" in out
        after = {d.key: d for d in declarations(config)}
        for d in declared[1:]:
            assert after[d.key].revision == commits[d.repo]
            old, new = before[d.key].splitlines(), d.path.read_text().splitlines()
            changed = [(a, b) for a, b in zip(old, new, strict=True) if a != b]
            assert len(changed) == 1 and changed[0][1].strip().startswith(f"revision: {commits[d.repo]}")
        assert load_config(["experiment=paper"], config).model[declared[1].key].download.revision == \
            commits[declared[1].repo]
        assert main(["config", "pin", "--config-dir", str(config), "--models", *(d.key for d in declared[1:])]) == 0
        assert f"0 pinned, {len(declared) - 1} unchanged, 0 failed" in capsys.readouterr().out


def test_a_gguf_repo_is_read_head_only(env, tmp_path, capsys):
    """`check softmax owner/name:file.gguf`: of a GGUF file with 4 MB of other tensors, the header and the head
    (output.weight, the final norm) are read, written back as a GGUF file that the GGUF reader reads as the
    original: the same head, tokens, token types and norm."""
    import gguf
    from test_detect_gguf import TYPE_CODES, vocabulary

    from argmaxable.detect.gguf import read_gguf_head

    rng = np.random.default_rng(0)
    W = rng.standard_normal((300, 32)).astype(np.float32)
    writer = gguf.GGUFWriter(str(tmp_path / "m.Q8_0.gguf"), "llama")
    stored, _, types = vocabulary(300)
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(stored)
    writer.add_token_types([TYPE_CODES[t] for t in types])
    writer.add_tensor("token_embd.weight", rng.standard_normal((300, 32)).astype(np.float32))
    writer.add_tensor("blk.0.ffn_up.weight", np.zeros((1000, 1000), np.float32))
    kind = gguf.GGMLQuantizationType.Q8_0
    writer.add_tensor("output.weight", gguf.quants.quantize(W, kind), raw_dtype=kind)
    writer.add_tensor("output_norm.weight", np.linspace(0.5, 1.5, 32, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    data = (tmp_path / "m.Q8_0.gguf").read_bytes()
    repo = HubRepo.single("org/tiny-GGUF", COMMIT, {"m.Q8_0.gguf": data, "m.F32.gguf": data, "README.md": "x"})
    with env.serve(LocalHub({repo.id: repo})) as hub:
        assert main(["check", "softmax", "org/tiny-GGUF"]) == 2
        assert "GGUF files: m.F32.gguf, m.Q8_0.gguf; pick one with org/tiny-GGUF:FILE" in capsys.readouterr().err
        assert main(["check", "softmax", "org/tiny-GGUF:m.Q8_0.gguf", "--patience", "50"]) == 0
        sent = hub.bytes_sent("/lfs/")
    assert "head: huggingface:org/tiny-GGUF:m.Q8_0.gguf@" in capsys.readouterr().out
    (extract,) = (env.root / "cache" / "hub").rglob("m.Q8_0.gguf")
    original, read = read_gguf_head(tmp_path / "m.Q8_0.gguf"), read_gguf_head(extract)
    np.testing.assert_array_equal(read.W, original.W)
    np.testing.assert_array_equal(read.norm, original.norm)
    assert (read.tokens, read.token_types, read.tied, read.stored_type) == (original.tokens, original.token_types,
                                                                          False, "Q8_0")
    assert sent < len(data) // 8 and extract.stat().st_size < len(data) // 8
