"""Read a softmax output layer (W, b) from a weights file: .npz, .npy, .pt/.pth/.bin, .safetensors.

The output layer is the last linear map before the softmax: logits = W x + b with W of shape (n, d), one
row per category. Files name it differently; without explicit keys the first known name present is used:

- Hugging Face checkpoints: ``lm_head.weight`` (+ ``final_logits_bias`` for Marian/BART);
- Marian .npz (Bergamot, OPUS-MT originals): ``decoder_ff_logit_out_W`` (stored d×n) when the output layer is
  untied, else ``decoder_Wemb`` or ``Wemb`` (tied embeddings, n×d); bias ``decoder_ff_logit_out_b`` (1×n);
- Nematus .npz (Edinburgh WMT'17): ``ff_logit_W`` (stored d×n) when untied, else ``Wemb_dec`` (n×d); bias
  ``ff_logit_b``. (Nematus' ``Wemb`` is the *source* embedding, so ``Wemb_dec`` is tried before it.)
- plain arrays: ``W``/``b`` or ``weight``/``bias`` (an ``nn.Linear`` state dict), or a bare 2-D array.
"""

from __future__ import annotations

import contextlib
import os
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np


class WeightsError(ValueError):
    """A weights file that cannot be read or lacks the requested tensor; the message is one line."""


# (name, stored layout) in the order they are tried; "nd" = one row per category, "dn" = transposed.
WEIGHT_KEYS: tuple[tuple[str, str], ...] = (
    ("lm_head.weight", "nd"),  # Hugging Face causal LMs and Marian/BART seq2seq
    ("decoder_ff_logit_out_W", "dn"),  # Marian npz, untied output layer, shape (dim, vocab)
    ("ff_logit_W", "dn"),  # Nematus npz, untied output layer, shape (dim_word, n_words)
    ("decoder_Wemb", "nd"),  # Marian npz, output tied to the decoder embeddings
    ("Wemb_dec", "nd"),  # Nematus npz, output tied to the decoder embeddings (--tie_decoder_embeddings)
    ("Wemb", "nd"),  # Marian npz, all embeddings tied (--tied-embeddings-all)
    ("weight", "nd"),  # an nn.Linear state dict
    ("W", "nd"),
)
BIAS_KEYS: tuple[str, ...] = (
    "lm_head.bias", "final_logits_bias", "decoder_ff_logit_out_b", "ff_logit_b", "bias", "b",
)
FORMATS = {".npz": "npz", ".npy": "npy", ".pt": "torch", ".pth": "torch", ".bin": "torch",
           ".safetensors": "safetensors"}
_LAYOUT = dict(WEIGHT_KEYS)


def file_format(path: str | os.PathLike) -> str:
    """The format of a weights file from its suffix; raise :class:`WeightsError` naming the known ones."""
    fmt = FORMATS.get(Path(path).suffix.lower())
    if fmt is None:
        raise WeightsError(f"unsupported weights file {str(path)!r}: expected one of {', '.join(FORMATS)}")
    return fmt


def to_numpy(t) -> np.ndarray:
    """A tensor or array as numpy; half precision (incl. bfloat16, which numpy lacks) becomes float32."""
    if hasattr(t, "detach"):
        t = t.detach().cpu()
        if t.dtype.is_floating_point and t.element_size() < 4:
            t = t.float()
        return t.numpy()
    a = np.asarray(t)
    return a.astype(np.float32) if a.dtype == np.float16 else a


def _flatten(state: Mapping, prefix: str = "") -> dict:
    """Nested state dicts ({"model": {...}}) as one flat dict with dotted keys; non-tensor entries dropped."""
    flat = {}
    for key, value in state.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(_flatten(value, f"{name}."))
        elif hasattr(value, "shape"):
            flat[name] = value
    return flat


class _SafetensorsMapping(Mapping):
    """Lazy read-only view of a .safetensors file: a tensor is read only when asked for."""

    def __init__(self, handle):
        self._handle = handle
        self._keys = list(handle.keys())

    def __getitem__(self, key):
        if key not in self._keys:
            raise KeyError(key)
        return self._handle.get_tensor(key)

    def __iter__(self):
        return iter(self._keys)

    def __len__(self):
        return len(self._keys)


@contextlib.contextmanager
def open_tensors(path: str | os.PathLike) -> Iterator[Mapping]:
    """Open a weights file as a read-only mapping name -> tensor, reading tensors lazily where the format
    allows it (.npz, .safetensors). A bare array (.npy, or a .pt holding one tensor) is named ``"W"``.

    Raises
    ------
    WeightsError
        When the file is missing or is not a readable file of the format its suffix names.
    """
    path = Path(path)
    fmt = file_format(path)
    if not path.is_file():
        raise WeightsError(f"weights file {str(path)!r} does not exist")
    with contextlib.ExitStack() as stack:
        try:
            if fmt == "npz":
                tensors: Mapping = stack.enter_context(np.load(path, allow_pickle=False))
            elif fmt == "npy":
                tensors = {"W": np.load(path, mmap_mode="r", allow_pickle=False)}
            elif fmt == "safetensors":
                from safetensors import safe_open

                tensors = _SafetensorsMapping(stack.enter_context(safe_open(str(path), framework="pt")))
            else:
                import torch

                # mmap needs the zip format (torch >= 1.6); a legacy torch.save file is read whole instead.
                obj = torch.load(path, map_location="cpu", weights_only=True, mmap=zipfile.is_zipfile(path))
                tensors = _flatten(obj) if isinstance(obj, Mapping) else {"W": obj}
        except Exception as err:  # each reader raises its own types; all of them mean "unreadable"
            hint = " (Marian's binary .bin models are not supported: use the .npz)" if fmt == "torch" else ""
            raise WeightsError(f"cannot read {str(path)!r} as {fmt}: {_first_line(err)}{hint}") from None
        yield tensors


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def read_member(tensors: Mapping, key: str, path) -> Any:
    """``tensors[key]``, read now: a member that is truncated, fails its CRC, or declares a shape no memory holds
    is one WeightsError naming it (the lazy readers raise their own types)."""
    try:
        return to_numpy(tensors[key])
    except Exception as err:  # zipfile.BadZipFile, EOFError, ValueError, MemoryError, NotImplementedError...
        raise WeightsError(f"cannot read {key!r} from {str(path)!r}: {_first_line(err)}") from None


def _key_list(keys) -> str:
    keys = sorted(keys)
    shown = ", ".join(keys[:40])
    return shown + (f", ... ({len(keys)} in all)" if len(keys) > 40 else "")


def _pick(tensors: Mapping, key: str | None, defaults, what: str, path) -> str | None:
    """The key to read: the requested one (which must exist) or the first default present."""
    if key is not None:
        if key not in tensors:
            raise WeightsError(f"no {what} key {key!r} in {str(path)!r}; keys found: {_key_list(tensors)}")
        return key
    return next((k for k in defaults if k in tensors), None)


def orient(W: np.ndarray, b: np.ndarray | None, key: str | None = None) -> np.ndarray:
    """Return W as (n, d): transposed when its key is stored (d, n), or when only its columns match b."""
    if _LAYOUT.get(key or "") == "dn" or (b is not None and W.shape[0] != b.size and W.shape[1] == b.size):
        return W.T
    return W


def load_layer(path: str | os.PathLike, weight_key: str | None = None, bias_key: str | None = None,
               no_bias: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
    """Read the softmax output layer (W, b) from a weights file.

    Parameters
    ----------
    path : path
        A .npz, .npy, .pt/.pth/.bin (PyTorch, read with ``weights_only=True``) or .safetensors file.
    weight_key, bias_key : str, optional
        Names of the weight matrix and bias vector; default: the first of :data:`WEIGHT_KEYS` /
        :data:`BIAS_KEYS` present. No bias is used when none of the default names is present.
    no_bias : bool, default False
        Ignore any bias in the file.

    Returns
    -------
    W : ndarray, shape (n, d)
        One row per category (keys stored transposed, e.g. Nematus' ``ff_logit_W``, are transposed back).
    b : ndarray, shape (n,), or None

    Raises
    ------
    WeightsError
        Unreadable file, or a missing key (the message lists the keys found), or inconsistent shapes.

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> f = os.path.join(tempfile.mkdtemp(), "layer.npz")
    >>> np.savez(f, W=np.eye(3, 2), b=np.zeros(3))
    >>> W, b = load_layer(f)
    >>> W.shape, b.shape
    ((3, 2), (3,))
    """
    with open_tensors(path) as tensors:
        wkey = _pick(tensors, weight_key, [k for k, _ in WEIGHT_KEYS], "weight", path)
        if wkey is None:
            only = [k for k in tensors if np.ndim(read_member(tensors, k, path)) == 2] if len(tensors) <= 2 else []
            if len(only) != 1:
                raise WeightsError(f"no output-layer weights found in {str(path)!r}: pass --weight-key "
                                   f"(keys found: {_key_list(tensors)})")
            wkey = only[0]
        bkey = None if no_bias else _pick(tensors, bias_key, BIAS_KEYS, "bias", path)
        W = read_member(tensors, wkey, path)
        b = None if bkey is None else read_member(tensors, bkey, path)
    if W.ndim != 2:
        raise WeightsError(f"weights {wkey!r} in {str(path)!r} must be 2-D (n, d); got shape {W.shape}")
    if b is not None:
        if b.ndim == 2 and 1 in b.shape:  # Marian stores its bias as (1, n)
            b = b.reshape(-1)
        W = orient(W, b, wkey)
        if b.shape != (W.shape[0],):
            raise WeightsError(f"bias {bkey!r} of shape {b.shape} does not match weights {wkey!r} of shape "
                               f"{W.shape} in {str(path)!r}")
    else:
        W = orient(W, None, wkey)
    return np.ascontiguousarray(W), b
