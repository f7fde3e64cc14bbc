"""The identity harness (scripts/identity.py): a rerun is identical, a changed array is named with its rows."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import numpy as np

spec = importlib.util.spec_from_file_location("identity", Path(__file__).resolve().parents[1] / "scripts/identity.py")
identity = sys.modules["identity"] = importlib.util.module_from_spec(spec)  # dataclasses look it up
spec.loader.exec_module(identity)


def test_identity_rerun_is_identical_and_a_changed_row_is_reported(tmp_path, capsys):
    old, new = tmp_path / "old", tmp_path / "new"
    assert identity.main(["save", str(old), "--only", "masked_bias"]) == 0
    assert "masked_bias: saved" in capsys.readouterr().out
    assert identity.main(["compare", str(old), "--only", "masked_bias"]) == 0
    assert "masked_bias: identical" in capsys.readouterr().out
    shutil.copytree(old, new)
    with np.load(new / "masked_bias.npz") as z:
        arrays = {k: z[k] for k in z.files}
    assert np.isnan(arrays["paper:witness"]).any()  # so the rerun above found NaN rows equal to themselves
    row = np.flatnonzero(arrays["paper:status"] == "argmaxable")[0]
    arrays["paper:witness"][row, 0] = np.nextafter(arrays["paper:witness"][row, 0], np.inf)  # one ulp in one row
    arrays["paper:steps"] = arrays["paper:steps"].astype(np.int32)  # same values, another dtype
    np.savez(new / "masked_bias.npz", **arrays)
    assert identity.main(["compare", str(old), str(new)]) == 1
    assert ("masked_bias: DIFFERS: paper:steps int64(3000,) -> int32(3000,), paper:witness (1 of 3000 rows)"
            in capsys.readouterr().out)
