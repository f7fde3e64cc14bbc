"""Hostile checkpoints, read from disk and served by the local hub (argmaxable.rehearsal.server, the real hub
protocol): each format has one parser (argmaxable.detect.formats), so both paths give the same one line, and no
size, depth, stride or span the file claims is allocated or fetched before it is checked.

The files are written byte by byte here (struct, json, pickle, zipfile: not our code), so each holds exactly the
fault named; the oracles are the formats' own readers where they exist (torch.load, safetensors, the gguf package)
for the honest files the faults start from."""

from __future__ import annotations

import io
import json
import pickle
import re
import struct
import subprocess
import sys
import tracemalloc
import zipfile
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest
import torch
from test_detect_hub import COMMIT, env  # noqa: F401  (the fixture)

from argmaxable.cli import main
from argmaxable.detect.gguf import read_gguf_head
from argmaxable.detect.remote import READ_AHEAD, Remote, extract_head
from argmaxable.detect.weights import WeightsError, open_tensors
from argmaxable.fetch import Refused
from argmaxable.rehearsal.server import HubRepo, LocalHub

PAD = 4 << 20  # bytes of other tensors after the head: a fetch of the whole file would show


def reason(message: str) -> str:
    """A message without the file's name (a path on disk, a file name on the hub)."""
    assert "\n" not in message and "Traceback" not in message, message
    return re.sub(r"^'[^']*'", "", message)


def local_line(path: Path, keys) -> str:
    """The local readers' one line for ``path``, under a memory bound: nothing larger than the file allocated."""
    tracemalloc.start()
    try:
        with pytest.raises(WeightsError) as err:
            if path.suffix == ".gguf":
                read_gguf_head(path)
            else:
                with open_tensors(path) as tensors:
                    for key in keys:
                        _ = tensors[key]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < path.stat().st_size + (8 << 20), peak
    return str(err.value)


def hub_line(hub: LocalHub, root: Path, name: str, keys) -> tuple[str, int]:
    """The head-only fetch's one line for the file the hub serves as ``name``, and the bytes the hub sent."""
    hub.log.clear()
    source = Remote(f"{hub.endpoint}/org/m/resolve/main/{name}", commit=COMMIT)
    with pytest.raises(Refused) as err:
        extract_head(name, source, keys, root / "out" / name, root / "parts")
    hub.settle()
    assert not (root / "out" / name).exists()
    return str(err.value), hub.bytes_sent()


def both_paths(env, tmp_path, name: str, data: bytes, keys, expected: str, header: int = 0) -> None:  # noqa: F811
    """The same line from disk and from the hub, naming ``expected``, and of the hub's file no more than a few
    read-aheads sent (and the ``header`` bytes the format says must be read whole)."""
    path = tmp_path / name
    path.write_bytes(data)
    here = local_line(path, keys)
    with env.serve(LocalHub({"org/m": HubRepo.single("org/m", COMMIT, {name: data})})) as hub:
        there, sent = hub_line(hub, tmp_path, name, keys)
    assert expected in here, here
    assert reason(here) == reason(there), (here, there)
    assert sent < 4 * READ_AHEAD + header and (sent < len(data) // 16 or len(data) < PAD), sent


# ---------------------------------------------------------------------------------------------- torch


class _Storage:
    def __init__(self, key: str, numel: int):
        self.key, self.numel = key, numel


class _Tensor:
    """A pickled tensor with the storage offset, shape and strides a test gives it."""

    def __init__(self, storage: _Storage, offset: int, shape: tuple, stride: tuple):
        self.storage, self.offset, self.shape, self.stride = storage, offset, shape, stride

    def __reduce__(self):
        return torch._utils._rebuild_tensor_v2, (self.storage, self.offset, self.shape, self.stride, False,
                                                 OrderedDict())


class _Pickler(pickle.Pickler):
    def persistent_id(self, obj):
        return ("storage", torch.FloatStorage, obj.key, "cpu", obj.numel) if isinstance(obj, _Storage) else None


def torch_zip(shape=(4, 3), stride=(3, 1), offset=0, numel=12) -> bytes:
    """A torch zip checkpoint: ``head.weight`` as given, over a 12-float storage, then PAD bytes of filler."""
    buf = io.BytesIO()
    _Pickler(buf, protocol=2).dump(OrderedDict([("head.weight", _Tensor(_Storage("0", numel), offset, shape, stride)),
                                                ("filler", _Tensor(_Storage("1", PAD // 4), 0, (PAD // 4,), (1,)))]))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr("archive/data.pkl", buf.getvalue())
        zf.writestr("archive/byteorder", "little")
        zf.writestr("archive/data/0", np.arange(12, dtype=np.float32).tobytes())
        zf.writestr("archive/data/1", bytes(PAD))
        zf.writestr("archive/version", "3\n")
    return out.getvalue()


def test_an_honest_torch_zip_reads_as_torch_reads_it(tmp_path):
    """The builder's honest file, and a transposed view of it: the parser's values are torch.load's."""
    for stride, shape in (((3, 1), (4, 3)), ((1, 4), (4, 3))):
        path = tmp_path / "pytorch_model.bin"
        path.write_bytes(torch_zip(shape, stride))
        expected = torch.load(path, weights_only=True)["head.weight"].numpy()
        with open_tensors(path) as tensors:
            np.testing.assert_array_equal(tensors["head.weight"], expected)


@pytest.mark.parametrize(("stride", "offset", "numel", "expected"), [
    ((-4, 1), 0, 12, "offsets and strides must be positive"),
    ((-1099511627776, 1), 0, 12, "offsets and strides must be positive"),
    ((3, 1), -3, 12, "offsets and strides must be positive"),
    ((1, 1), 0, 12, "overlapping strides [1, 1]"),
    ((0, 1), 0, 12, "offsets and strides must be positive"),
    ((3, 1), 100, 12, "spans elements 100..112 of a storage record of 48 bytes"),
    ((3, 1), 0, 1 << 40, "storage record of 48 bytes (1099511627776 float32 declared)"),
    ((1 << 40, 1), 0, 12, "spans elements 0..3298534883331"),
])
def test_torch_strides_and_spans_outside_the_storage_are_refused_before_any_read(env, tmp_path, stride, offset,  # noqa: F811
                                                                                 numel, expected):
    both_paths(env, tmp_path, "pytorch_model.bin", torch_zip(stride=stride, offset=offset, numel=numel),
               ["head.weight"], expected)


def test_a_legacy_pickle_claiming_a_terabyte_is_refused_unallocated(env, tmp_path):  # noqa: F811
    """torch's format before 1.6 with a BINBYTES8 of 2^40 in its system-info pickle: refused by the scan, where
    the unpickler would allocate the terabyte first."""
    data = (pickle.dumps(0x1950A86A20F9469CFC6C, protocol=2) + pickle.dumps(1001, protocol=2)
            + b"\x80\x04\x8e" + struct.pack("<Q", 1 << 40) + b"x" * 64 + bytes(PAD))
    both_paths(env, tmp_path, "pytorch_model.bin", data, ["head.weight"], "claims 1099511627776 bytes")


# ---------------------------------------------------------------------------------------------- safetensors


def safetensors(header, data: bytes = b"") -> bytes:
    text = (header if isinstance(header, str) else json.dumps(header)).encode()
    return struct.pack("<Q", len(text)) + text + data + bytes(PAD)


def _entry(**change):
    return {"dtype": "F32", "shape": [4, 3], "data_offsets": [0, 48], **change}


@pytest.mark.parametrize(("header", "expected"), [
    ('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}", "nests too deep"),
    ({"a": {"__metadata__": {}, "x": [[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]}}, "nests more than 16 deep"),
    ({"head.weight": 5}, "tensor 'head.weight' is described by a JSON int"),
    ([1, 2], "the safetensors header is a JSON list"),
    ({"head.weight": _entry(data_offsets=["0", "48"])}, "has data_offsets ['0', '48']"),
    ({"head.weight": _entry(shape=12)}, "has shape 12"),
    ({"head.weight": _entry(shape=[40.5], data_offsets=[0, 160])}, "has shape [40.5]"),
    ({"head.weight": _entry(dtype=["F32"])}, "has dtype ['F32']"),
    ({"head.weight": _entry(data_offsets=[48, 0])}, "0 <= begin <= end"),
])
def test_a_safetensors_header_that_is_not_one_is_refused_in_one_line(env, tmp_path, header, expected):  # noqa: F811
    data = safetensors(header, bytes(160))
    both_paths(env, tmp_path, "model.safetensors", data, ["head.weight"], expected,
               header=struct.unpack("<Q", data[:8])[0])


def test_a_fractional_shape_is_not_truncated_to_an_integer(tmp_path):
    """The safetensors library itself refuses a shape of 40.5 too (its header's shape is a list of integers)."""
    from safetensors import safe_open

    path = tmp_path / "m.safetensors"
    path.write_bytes(safetensors({"head.weight": _entry(shape=[40.5], data_offsets=[0, 160])}, bytes(160))[:-PAD])
    with pytest.raises(Exception, match=r"floating point `40\.5`, expected usize"), safe_open(str(path), "np"):
        pass
    with pytest.raises(WeightsError, match=r"has shape \[40\.5\]"), open_tensors(path):
        pass


# ------------------------------------------------------------------------------------------------ GGUF


def _string(text: bytes) -> bytes:
    return struct.pack("<Q", len(text)) + text


def gguf_file(kvs: list[bytes], tensors: list[tuple[str, list[int], int, int]], data: bytes, alignment: int = 32
              ) -> bytes:
    """A GGUF v3 file: the metadata entries as given (key, type and value already encoded), tensor infos
    (name, dims, GGML type, offset) and the data, aligned."""
    infos = b"".join(_string(name.encode()) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d)
                     for d in dims) + struct.pack("<IQ", kind, offset) for name, dims, kind, offset in tensors)
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)) + b"".join(kvs) + infos
    return head + bytes(-len(head) % alignment) + data


def kv_string(key: str, value: bytes) -> bytes:
    return _string(key.encode()) + struct.pack("<I", 8) + _string(value)


def kv_u32(key: str, value: int) -> bytes:
    return _string(key.encode()) + struct.pack("<II", 4, value)


def honest_gguf(**change) -> tuple[list[bytes], list, bytes]:
    """An 8 x 32 float32 head with its tokens, then PAD bytes of another tensor."""
    tokens = struct.pack("<IQ", 8, 8) + b"".join(_string(f"t{i}".encode()) for i in range(8))
    kvs = [kv_string("general.architecture", b"llama"), _string(b"tokenizer.ggml.tokens") + struct.pack("<I", 9)
           + tokens]
    head = np.arange(256, dtype=np.float32).tobytes()
    tensors = [("output.weight", [32, 8], 0, 0), ("blk.0.ffn_up.weight", [PAD // 4], 0, 1024)]
    return change.get("kvs", kvs), change.get("tensors", tensors), head + bytes(1024 - len(head)) + bytes(PAD)


def test_the_honest_gguf_reads_as_the_gguf_package_reads_it(tmp_path):
    import gguf

    path = tmp_path / "m.gguf"
    path.write_bytes(gguf_file(*honest_gguf()))
    reader = gguf.GGUFReader(path)
    head = read_gguf_head(path)
    np.testing.assert_array_equal(head.W, next(t for t in reader.tensors if t.name == "output.weight").data)
    assert head.tokens == [f"t{i}" for i in range(8)] and head.architecture == "llama"


def _nested(depth: int) -> bytes:
    return _string(b"deep") + struct.pack("<I", 9) + struct.pack("<IQ", 9, 1) * (depth - 1) + struct.pack("<IQ", 4, 0)


@pytest.mark.parametrize(("case", "expected"), [
    ("alignment 0", "general.alignment is 0: it must be a power of two"),
    ("alignment 48", "general.alignment is 48: it must be a power of two"),
    ("array nested 5000 deep", "nests arrays more than 16 deep"),
    ("string of 2^62 bytes", "claims 4611686018427387904 bytes"),
    ("metadata count of 2^60", "1152921504606846976 metadata entries"),
    ("overlapping tensors", "tensors output.weight and blk.0.ffn_up.weight overlap"),
    ("unknown type", "unknown GGML type 99"),
    ("header cut short", "is truncated: 2 metadata entries and 2 tensor infos at byte 24 claims 74 bytes"),
    ("head cut short", "is truncated: it stops inside tensor output.weight"),
])
def test_a_hostile_gguf_header_is_one_line_on_both_paths(env, tmp_path, case, expected):  # noqa: F811
    kvs, tensors, data = honest_gguf()
    if case.startswith("alignment"):
        kvs = [*kvs, kv_u32("general.alignment", int(case.split()[1]))]
    elif case == "array nested 5000 deep":
        kvs = [*kvs, _nested(5000)]
    elif case == "string of 2^62 bytes":
        kvs = [*kvs, _string(b"general.name") + struct.pack("<I", 8) + struct.pack("<Q", 1 << 62)]
    elif case == "overlapping tensors":
        tensors = [tensors[0], ("blk.0.ffn_up.weight", [PAD // 4], 0, 992)]
    elif case == "unknown type":
        tensors = [("output.weight", [32, 8], 99, 0)]
    blob = gguf_file(kvs, tensors, data)
    if case == "metadata count of 2^60":
        blob = blob[:16] + struct.pack("<Q", 1 << 60) + blob[24:]
    elif case == "header cut short":
        blob = blob[:80]
    elif case == "head cut short":
        blob = blob[:len(blob) - len(data) + 500]
    both_paths(env, tmp_path, "m.gguf", blob, ["output.weight"], expected)


def test_the_cli_gives_the_same_line_for_a_hostile_gguf_here_and_on_the_hub(env, tmp_path, capsys):  # noqa: F811
    """`check softmax m.gguf` and `check softmax org/m:m.gguf`: rc 2, one line each, the same reason; the old
    readers gave a ZeroDivisionError traceback on the hub and a numpy message on disk."""
    kvs, tensors, data = honest_gguf()
    blob = gguf_file([*kvs, kv_u32("general.alignment", 0)], tensors, data)
    (tmp_path / "m.gguf").write_bytes(blob)
    assert main(["check", "softmax", str(tmp_path / "m.gguf")]) == 2
    here = capsys.readouterr()
    with env.serve(LocalHub({"org/m": HubRepo.single("org/m", COMMIT, {"m.gguf": blob})})):
        assert main(["check", "softmax", "org/m:m.gguf"]) == 2
    there = capsys.readouterr()
    assert here.out == there.out == ""
    line = "general.alignment is 0: it must be a power of two"
    assert here.err.count("\n") == there.err.count("\n") == 1 and line in here.err and line in there.err


def test_a_truncated_gguf_is_called_truncated(tmp_path, capsys):
    """A GGUF file cut inside its head: the gguf package's reader said "When changing to a larger dtype, its
    size must be a divisor of the total size in bytes of the last axis of the array"."""
    path = tmp_path / "m.gguf"
    kvs, tensors, data = honest_gguf()
    path.write_bytes(gguf_file(kvs, tensors, data)[:-len(data) + 501])
    assert main(["check", "softmax", str(path)]) == 2
    err = capsys.readouterr().err
    assert "is truncated: it stops inside tensor output.weight" in err and err.count("\n") == 1


# ------------------------------------------------------------------------------------------------ tmp files


def test_sigterm_while_staging_leaves_no_hidden_temporary(tmp_path):
    """A process killed by SIGTERM while its result is staged (between mkstemp and the rename): neither the
    result nor its hidden .tmp stays; the process still dies of the signal."""
    code = ("import os, signal, sys; from argmaxable.provenance import atomic_paths\n"
            "with atomic_paths(sys.argv[1], sys.argv[2]) as tmps:\n"
            "    [open(t, 'w').write('partial') for t in tmps]\n"
            "    os.kill(os.getpid(), signal.SIGTERM)\n")
    child = subprocess.run([sys.executable, "-c", code, str(tmp_path / "a.parquet"), str(tmp_path / "a.meta.json")],
                           capture_output=True, text=True)
    assert child.returncode == -15, child.stderr
    assert list(tmp_path.iterdir()) == []


def test_sigterm_while_a_download_is_staged_leaves_no_hidden_directory(tmp_path):
    code = ("import os, signal, sys; from argmaxable.fetch import staging_dir\n"
            "with staging_dir(sys.argv[1]) as tmp:\n"
            "    (tmp / 'x').write_text('partial')\n"
            "    os.kill(os.getpid(), signal.SIGTERM)\n")
    child = subprocess.run([sys.executable, "-c", code, str(tmp_path / "model")], capture_output=True, text=True)
    assert child.returncode == -15, child.stderr
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------------------------------------ npz


def _compressed_npz(head: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.savez_compressed(buf, W=head, filler=np.random.default_rng(1).integers(0, 255, PAD, dtype=np.uint8))
    return buf.getvalue()


def test_a_compressed_npz_reads_as_numpy_reads_it_on_both_paths(env, tmp_path):  # noqa: F811
    """np.savez_compressed: inflated when read, from disk and from the hub alike (the hub sends the member's
    compressed bytes only)."""
    head = np.random.default_rng(2).standard_normal((300, 7))
    data = _compressed_npz(head)
    (tmp_path / "c.npz").write_bytes(data)
    with open_tensors(tmp_path / "c.npz") as tensors:
        np.testing.assert_array_equal(tensors["W"], np.load(tmp_path / "c.npz")["W"])
    with env.serve(LocalHub({"org/m": HubRepo.single("org/m", COMMIT, {"c.npz": data})})) as hub:
        source = Remote(f"{hub.endpoint}/org/m/resolve/main/c.npz", commit=COMMIT)
        extract_head("c.npz", source, ["W"], tmp_path / "out.npz", tmp_path / "parts")
        hub.settle()
        sent = hub.bytes_sent()
    np.testing.assert_array_equal(np.load(tmp_path / "out.npz")["W"], head)
    assert sent < len(data) // 8


def _central(data: bytes, member: bytes) -> int:
    """Where the zip's central directory entry of ``member`` begins."""
    at = data.index(b"PK\x01\x02")
    while data[at + 46:at + 46 + len(member)] != member:
        at = data.index(b"PK\x01\x02", at + 4)
    return at


@pytest.mark.parametrize(("size", "expected"), [
    ((1 << 32) - 1, "claims to inflate"),
    (None, "fails its zip CRC-32 check"),
])
def test_a_deflated_member_that_claims_more_or_other_bytes_is_refused(env, tmp_path, size, expected):  # noqa: F811
    data = _compressed_npz(np.random.default_rng(2).standard_normal((300, 7)))
    at = _central(data, b"W.npy")
    if size is not None:  # the uncompressed size the directory gives
        data = data[:at + 24] + struct.pack("<I", size) + data[at + 28:]
    else:  # the CRC-32 the directory gives, as if the values had changed
        data = data[:at + 16] + bytes(b ^ 0xFF for b in data[at + 16:at + 20]) + data[at + 20:]
    both_paths(env, tmp_path, "c.npz", data, ["W"], expected)
