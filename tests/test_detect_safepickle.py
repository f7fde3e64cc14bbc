"""Pickled vocabularies read as plain data: the classes a model config names become inert records, and any
other global (the way a pickle runs code) is refused before it is looked up."""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest
from safetensors.numpy import save_file

from argmaxable.detect.loaders import load_model
from argmaxable.detect.safepickle import Record, load_plain
from argmaxable.detect.weights import WeightsError


class Lang:  # pickled under this module's name, like cn2en's __main__.Lang
    def __init__(self, words):
        self.index2word = dict(enumerate(["SOS", "EOS", *words]))
        self.n_words = len(self.index2word)


class Evil:
    def __reduce__(self):
        return os.system, ("echo pwned > never-written",)


def test_a_named_class_is_read_as_a_record_of_its_attributes(tmp_path):
    f = tmp_path / "lang.pkl"
    f.write_bytes(pickle.dumps(Lang(["who", "are"]), protocol=4))
    obj = load_plain(f, [f"{__name__}.Lang"])
    assert type(obj) is Record and obj.index2word == {0: "SOS", 1: "EOS", 2: "who", 3: "are"} and obj.n_words == 4


def test_os_system_is_refused_and_never_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    f = tmp_path / "evil.pkl"
    f.write_bytes(pickle.dumps({"words": ["a"], "payload": Evil()}))
    with pytest.raises(WeightsError, match=r"refused to unpickle global (posix|os|nt)\.system"):
        load_plain(f, [f"{__name__}.Lang"])
    assert not (tmp_path / "never-written").exists()


def test_a_class_not_named_is_refused(tmp_path):
    f = tmp_path / "lang.pkl"
    f.write_bytes(pickle.dumps(Lang(["who"])))
    with pytest.raises(WeightsError, match=rf"refused to unpickle global {__name__}\.Lang .*plain records: none"):
        load_plain(f)


def test_a_truncated_pickle_is_one_line_error(tmp_path):
    f = tmp_path / "cut.pkl"
    f.write_bytes(pickle.dumps(list(range(100)))[:20])
    with pytest.raises(WeightsError, match=r"cannot read .* as plain pickled data"):
        load_plain(f)


def test_a_file_layer_names_its_rows_from_a_pickled_vocabulary(tmp_path):
    save_file({"decoder.out.weight": np.eye(4, 2, dtype=np.float32), "decoder.out.bias": np.zeros(4, np.float32)},
              tmp_path / "model.safetensors")
    (tmp_path / "lang.pkl").write_bytes(pickle.dumps(Lang(["who", "are"])))
    spec = {"name": "gru", "source": "file", "params": {
        "path": "model.safetensors", "weight_key": "decoder.out.weight", "bias_key": "decoder.out.bias",
        "tokens": {"pickle": "lang.pkl", "classes": [f"{__name__}.Lang"], "attribute": "index2word"}}}
    layer = load_model(spec, root=tmp_path)
    assert layer.tokens == ["SOS", "EOS", "who", "are"] and layer.files[-1] == tmp_path / "lang.pkl"
    assert layer.tied is None  # no other tensor of the head's shape in the file: it cannot tell
    spec["params"]["tokens"]["attribute"] = "word2index"
    with pytest.raises(WeightsError, match="no 'word2index' in the pickled Record; found: index2word, n_words"):
        load_model(spec, root=tmp_path)


# A pickle cannot change the shared Record class; protocols 0 and 1 of an allowed class are read.

def test_a_pickle_cannot_build_state_onto_the_record_class(tmp_path):
    """BUILD with slot state on the class itself set Record.__setstate__, and every later
    load in the process failed."""
    f = tmp_path / "poison.pkl"
    f.write_bytes(b"c__main__\nLang\nq\x00N}S'__setstate__'\nh\x00s\x86b.")
    with pytest.raises(WeightsError, match="refused to set '__setstate__' on the class Record"):
        load_plain(f, ["__main__.Lang"])
    assert "__setstate__" not in vars(Record)
    good = tmp_path / "lang.pkl"
    good.write_bytes(pickle.dumps(Lang(["who"]), protocol=4))
    assert load_plain(good, [f"{__name__}.Lang"]).index2word == {0: "SOS", 1: "EOS", 2: "who"}


@pytest.mark.parametrize("protocol", [0, 1, 2, 5])
def test_every_protocol_of_an_allowed_class_is_read(tmp_path, protocol):
    """Low finding: protocols 0 and 1 write copyreg._reconstructor(cls, object, None), which was refused."""
    f = tmp_path / "lang.pkl"
    f.write_bytes(pickle.dumps(Lang(["who", "are"]), protocol=protocol))
    obj = load_plain(f, [f"{__name__}.Lang"])
    assert type(obj) is Record and obj.index2word == {0: "SOS", 1: "EOS", 2: "who", 3: "are"}
    with pytest.raises(WeightsError, match="refused to unpickle global"):  # not when no class is allowed
        load_plain(f)


def test_the_reconstructor_builds_nothing_but_a_record(tmp_path):
    f = tmp_path / "other.pkl"
    f.write_bytes(b"ccopy_reg\n_reconstructor\n(c__builtin__\nobject\nc__builtin__\nobject\nNtR.")
    with pytest.raises(WeightsError, match=r"copyreg\._reconstructor other than for an allowed class"):
        load_plain(f, [f"{__name__}.Lang"])


def test_a_count_past_the_pickles_bytes_is_refused_before_it_is_allocated(tmp_path):
    """A BINBYTES8 claiming 2^40 bytes: the unpickler allocates what a count claims before reading it; the scan
    refuses it first, naming the count."""
    import struct
    import tracemalloc

    f = tmp_path / "tokens.pkl"
    f.write_bytes(b"\x80\x04\x8e" + struct.pack("<Q", 1 << 40) + b"x" * 64 + b".")
    tracemalloc.start()
    try:
        with pytest.raises(WeightsError, match=r"expected 1099511627776 bytes in a bytes8"):
            load_plain(f)
        assert tracemalloc.get_traced_memory()[1] < 1 << 20
    finally:
        tracemalloc.stop()
