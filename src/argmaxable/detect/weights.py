"""Read a softmax output layer (W, b) from a weights file: .npz, .npy, .pt/.pth/.bin, .safetensors.

Each format is read by its parser in :mod:`argmaxable.detect.formats`, the one the head-only fetch uses too: it runs
no code a file names and bounds every size, stride and span before it reads.

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
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from argmaxable.detect.formats import Tensor, as_float, list_tensors, stored_values
from argmaxable.detect.source import Local, Source, WeightsError, first_line

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


class Checkpoint(Mapping):
    """A weights file's tensors by name, located by its format's parser (:mod:`argmaxable.detect.formats`) and
    read only when asked for; :meth:`shape` tells a tensor's shape without reading it."""

    def __init__(self, source: Source, tensors: Mapping[str, Tensor]):
        self.source, self._tensors = source, dict(tensors)

    def __getitem__(self, key: str) -> np.ndarray:
        tensor = self._tensors[key]
        return as_float(stored_values(self.source, tensor), tensor.dtype)

    def __iter__(self):
        return iter(self._tensors)

    def __len__(self) -> int:
        return len(self._tensors)

    def shape(self, key: str) -> tuple[int, ...]:
        return self._tensors[key].shape


@contextlib.contextmanager
def open_tensors(path: str | os.PathLike) -> Iterator[Checkpoint]:
    """Open a weights file as a read-only mapping name -> array (half precision read as float32), each read
    only when asked for. A bare array (.npy, or a .pt holding one tensor) is named ``"W"``.

    Raises
    ------
    WeightsError
        When the file is missing or is not a readable file of the format its suffix names (one line, the same
        whether the file lies here or a hub serves it).
    """
    file_format(path)
    source = Local(path)
    yield Checkpoint(source, list_tensors(str(path), source))


def read_member(tensors: Mapping, key: str, path) -> Any:
    """``tensors[key]``, read now: a member that is truncated, or declares a shape no memory holds, is one
    WeightsError naming it."""
    try:
        return to_numpy(tensors[key])
    except WeightsError:
        raise
    except (ValueError, MemoryError, OSError) as err:
        raise WeightsError(f"cannot read {key!r} from {str(path)!r}: {first_line(err)}") from None


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


def _with_shapes(tensors: Checkpoint, keys) -> str:
    return ", ".join(f"{k} ({' x '.join(map(str, tensors.shape(k))) or 'scalar'})" for k in keys)


def choose_keys(tensors: Checkpoint, weight_key: str | None, bias_key: str | None, no_bias: bool, path
                ) -> tuple[str, str | None]:
    """The names of the weights and the bias to read: those asked for (which must exist), else the first of
    :data:`WEIGHT_KEYS` / :data:`BIAS_KEYS` present; a file naming neither is read only when it holds one 2-D
    array besides a bias the defaults name, and refused, naming its arrays and ``--weight-key``, when several
    could be the weights."""
    wkey = _pick(tensors, weight_key, [k for k, _ in WEIGHT_KEYS], "weight", path)
    if wkey is None:
        others = [k for k in tensors if k not in BIAS_KEYS]
        if len(others) != 1 or len(tensors.shape(others[0])) != 2:
            what = "several arrays could be its weights" if len(others) > 1 else "no 2-D array"
            raise WeightsError(f"{str(path)!r} names no known output layer ({', '.join(k for k, _ in WEIGHT_KEYS)}) "
                               f"and {what}: {_with_shapes(tensors, others[:40]) or 'none'}; pass --weight-key "
                               "(and --bias-key, or --no-bias)")
        wkey = others[0]
    return wkey, None if no_bias else _pick(tensors, bias_key, BIAS_KEYS, "bias", path)


def read_layer(path: str | os.PathLike, weight_key: str | None = None, bias_key: str | None = None,
               no_bias: bool = False) -> tuple[np.ndarray, np.ndarray | None, str, str | None]:
    """:func:`load_layer`, and the names of the weights and the bias read (None: no bias)."""
    with open_tensors(path) as tensors:
        wkey, bkey = choose_keys(tensors, weight_key, bias_key, no_bias, path)
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
    return np.ascontiguousarray(W), b, wkey, bkey


def load_layer(path: str | os.PathLike, weight_key: str | None = None, bias_key: str | None = None,
               no_bias: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
    """Read the softmax output layer (W, b) from a weights file.

    Parameters
    ----------
    path : path
        A .npz, .npy, .pt/.pth/.bin (PyTorch's zip format, or its format before 1.6) or .safetensors file, read
        by the format's own parser (:mod:`argmaxable.detect.formats`), which runs no code a file names.
    weight_key, bias_key : str, optional
        Names of the weight matrix and bias vector; default: the first of :data:`WEIGHT_KEYS` /
        :data:`BIAS_KEYS` present (:func:`choose_keys`). No bias is used when none of the default names is
        present.
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
        Unreadable file, or a missing key (the message lists the keys found), several arrays that could be the
        weights, or inconsistent shapes.

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> f = os.path.join(tempfile.mkdtemp(), "layer.npz")
    >>> np.savez(f, W=np.eye(3, 2), b=np.zeros(3))
    >>> W, b = load_layer(f)
    >>> W.shape, b.shape
    ((3, 2), (3,))
    """
    return read_layer(path, weight_key, bias_key, no_bias)[:2]
