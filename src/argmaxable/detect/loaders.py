"""Obtain the softmax output layer of a model config: synthetic, Hugging Face, released .npz, or any file.

Each source is one function whose keyword arguments are the config's ``params``:

- ``random``: W, b ~ U(-1, 1) (ACL 2022 appendix, Fig. 10) or N(0, 1), seeded;
- ``huggingface``: a hub id or a local ``save_pretrained`` directory. Only the output-layer tensors are read
  from the checkpoint (never the whole model): the model class is built on the ``meta`` device (no memory)
  to find which parameter produces the logits and which stored names it is tied to;
- ``npz``: a Marian/Nematus .npz (Bergamot, Edinburgh WMT'17);
- ``file``: any file :func:`argmaxable.detect.weights.load_layer` reads;
- ``onnx``: the head of an ONNX graph (:mod:`argmaxable.detect.onnx`), with its tokens from the model's
  metadata or a file beside it;
- ``gguf``: the head of a GGUF model (:mod:`argmaxable.detect.gguf`), with its tokens and token types from the
  file's metadata.

:func:`load_head` (``argmaxable.load_head``) reads any head the CLI takes, by path or hub id, through these
loaders: a weights file, a GGUF or ONNX model, a model directory, or a hub id whose head is fetched alone.

Loaders read local files only: :mod:`argmaxable.detect.download` fetches a model's files into its directory first,
and :func:`load_model` resolves relative paths (``path``, ``repo``, ``vocab``) inside that directory. Each
row's token comes from the model's own vocabulary files (:mod:`argmaxable.detect.vocab`), shown as the text it
stands for where the vocabulary is byte-level BPE (the stored name kept in ``Layer.raw_tokens``).
"""

from __future__ import annotations

import inspect
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from argmaxable.core.box import activation_bounds, activation_dtype
from argmaxable.core.settings import BOUND
from argmaxable.detect.gguf import read_gguf_head
from argmaxable.detect.hub import check_revision, hub_dir, is_hub_id
from argmaxable.detect.logits import choose, logits_names, read_config
from argmaxable.detect.onnx import metadata_tokens, read_onnx_head, read_tokens
from argmaxable.detect.source import first_line
from argmaxable.detect.vocab import read_vocab, readable_tokens
from argmaxable.detect.weights import FORMATS, WeightsError, open_tensors, read_layer, read_member
from argmaxable.fetch import MANIFEST, DownloadError


@dataclass
class Layer:
    """A softmax output layer and where it came from."""

    W: np.ndarray  # (n, d)
    b: np.ndarray | None  # (n,)
    origin: str  # human-readable source, recorded in provenance
    files: list[Path] = field(default_factory=list)  # files read, hashed into provenance
    tokens: list[str] | None = None  # (n,) each row's token ("" where the vocabulary has no such id)
    activation: str | None = None  # what feeds the head (silu, relu, ...), for the activation-aware box
    raw_tokens: list[str] | None = None  # (n,) tokens as stored, where ``tokens`` shows them readable
    token_types: list[str] | None = None  # (n,) GGUF token types: normal, control, user_defined, unused, byte, ...
    info: dict = field(default_factory=dict)  # what the file says about the head: tied, stored_type, norm, ...
    precision: str | None = None  # the stored weights' type, when the loader knows it (e.g. float32, float16)
    tied: bool | None = None  # whether the head shares its weights with an input embedding, when the loader knows

    def box(self, bound: float = BOUND, dtype: str | None = None) -> tuple[float, float]:
        """The box ``(lower, upper)`` the head's inputs lie in: the range of :attr:`activation` (the paper's box
        ``|x_j| <= bound`` where none is known) as the model computes it, in ``dtype`` (default: the stored
        weights' type, :func:`argmaxable.core.box.activation_dtype`); :func:`argmaxable.core.activation_bounds`."""
        return activation_bounds(self.activation, bound, dtype or activation_dtype(self.precision))

    def record(self) -> dict:
        """Where the head came from: its origin, the files read, and what the file says about the head (the
        weight and bias keys chosen, the stored type, whether it is tied; the final norm's weights left out)."""
        return {"origin": self.origin, "files": [str(f) for f in self.files], "precision": self.precision,
                "tied": self.tied, **{k: v for k, v in self.info.items() if k != "output_norm"}}


# ---------------------------------------------------------------------------------------------- random


def load_random(n: int, d: int, dist: str = "uniform", bias: bool = True, seed: int = 0) -> Layer:
    """A random layer: W (n, d) and b (n,) drawn i.i.d. from U(-1, 1) (ACL 2022 Fig. 10) or N(0, 1)."""
    draws = {"uniform": lambda rng, size: rng.uniform(-1.0, 1.0, size),
             "gaussian": lambda rng, size: rng.standard_normal(size)}
    if dist not in draws:
        raise WeightsError(f"random layer: 'dist' must be one of {sorted(draws)}; got {dist!r}")
    if int(n) < 1 or int(d) < 1:
        raise WeightsError(f"random layer: 'n' and 'd' must be positive; got n={n!r}, d={d!r}")
    rng = np.random.default_rng(seed)
    W = draws[dist](rng, (int(n), int(d)))
    b = draws[dist](rng, int(n)) if bias else None
    return Layer(W, b, f"random:{dist} n={n} d={d} bias={bool(bias)} seed={seed}")


# ----------------------------------------------------------------------------------------- huggingface

_CHECKPOINTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")


def _local_fetcher(directory: str) -> Callable[[str], Path | None]:
    """A function returning the path of one file of a model directory (None if the model lacks it), refusing a
    name (from a checkpoint index) that leads out of the directory: ``../x``, an absolute path, a symlink out."""
    root = Path(directory).resolve()

    def fetch(name: str) -> Path | None:
        path = Path(directory) / name
        if Path(name).is_absolute() or not path.resolve().is_relative_to(root):
            raise WeightsError(f"{directory!r}: {name!r} (named by a checkpoint index) is not a file inside the "
                               "model's directory: refused")
        return path if path.is_file() else None

    return fetch


def _read_head(fetch, candidates: list[list[str]], repo: str) -> tuple[list[np.ndarray], list[Path]]:
    """Read the chosen tensors from a single or sharded checkpoint, opening each needed file once."""
    for name in _CHECKPOINTS:
        path = fetch(name)
        if path is None:
            continue
        if not name.endswith(".index.json"):
            with open_tensors(path) as tensors:
                return [read_member(tensors, k, path) for k in choose(tensors, candidates, repo)], [path]
        try:
            weight_map = json.loads(path.read_text())["weight_map"]
            if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
                raise TypeError("its weight_map is not a map of tensor names to file names")
            keys = choose(weight_map, candidates, repo)
        except (ValueError, KeyError, TypeError, RecursionError) as err:  # a WeightsError keeps its own message
            raise (err if isinstance(err, WeightsError) else
                   WeightsError(f"{str(path)!r}: not a checkpoint index ({first_line(err)})")) from None
        values, files = {}, []
        for shard in sorted({weight_map[k] for k in keys}):
            shard_path = fetch(shard)
            if shard_path is None:
                raise WeightsError(f"{repo!r}: shard {shard!r} named in {name} is missing")
            files.append(shard_path)
            with open_tensors(shard_path) as tensors:
                values |= {k: read_member(tensors, k, shard_path) for k in keys if weight_map[k] == shard}
        return [values[k] for k in keys], files
    raise WeightsError(f"{repo!r}: no checkpoint found (looked for {', '.join(_CHECKPOINTS)})")


def _head_candidates(directory: Path) -> list[list[str]]:
    """The names the head's weight and bias terms may be stored under: those the download found and recorded in
    the directory's manifest (``head_keys``), else from the config's model class built on the meta device (about
    4 CPU-seconds of transformers' import and construction, which a pipeline would pay again in every job)."""
    try:
        recorded = json.loads((directory / MANIFEST).read_text()).get("head_keys")
    except (OSError, ValueError, AttributeError, RecursionError):
        recorded = None
    if isinstance(recorded, list) and recorded and all(isinstance(k, str) for k in recorded):
        return [[k] for k in recorded]
    weight_names, bias_names = logits_names(read_config(directory))
    return [weight_names, *bias_names]


def load_huggingface(repo: str, revision: str | None = None) -> Layer:
    """The logits layer of a Hugging Face model (local directory, or hub id: only its head is fetched, through
    :func:`argmaxable.detect.hub.hub_dir`), reading only its tensors.

    BERT/RoBERTa's MLM head applies a transform before its decoder: the softmax layer is the decoder
    (weight + bias, the bias stored as ``cls.predictions.bias`` / ``lm_head.bias``). Marian adds
    ``final_logits_bias``; GPT-2 and FSMT have no output bias. A config naming custom code (``auto_map``) and a
    checkpoint index naming files outside the directory are refused.
    """
    origin = f"huggingface:{repo}"
    if not Path(repo).is_dir():
        if not is_hub_id(repo):
            raise WeightsError(f"{repo!r} is neither a model directory nor a hub id (owner/name)")
        try:
            directory = hub_dir(repo, revision)
        except DownloadError as err:
            raise WeightsError(str(err)) from None
        origin += f"@{directory.name}"
    elif revision:
        raise WeightsError(f"{repo!r} is a local directory: a revision applies to hub ids only")
    else:
        directory = Path(repo)
    fetch = _local_fetcher(str(directory))
    if fetch("config.json") is None:
        raise WeightsError(f"{repo!r} has no config.json: not a Hugging Face model (directory or hub id)")
    (W, *terms), files = _read_head(fetch, _head_candidates(directory), repo)
    b = sum(t.reshape(-1).astype(np.float32) for t in terms) if terms else None  # e.g. decoder bias + extra
    if W.ndim != 2 or (b is not None and b.shape != (W.shape[0],)):
        raise WeightsError(f"{repo!r}: output weights {W.shape} and bias {None if b is None else b.shape} "
                           "do not form a layer")
    return Layer(np.ascontiguousarray(W), b, origin, [directory / "config.json", *files])


# ------------------------------------------------------------------------------------------ files, npz


def load_file(path: str, weight_key: str | None = None, bias_key: str | None = None,
              no_bias: bool = False, tokens: Mapping | None = None) -> Layer:
    """A layer from a local weights file: the arguments of :func:`argmaxable.detect.weights.load_layer`, and
    optionally where each row's token is (``tokens``: :func:`argmaxable.detect.onnx.read_tokens`, files
    relative to the weights file's directory)."""
    local = Path(path).expanduser()
    W, b, wkey, bkey = read_layer(local, weight_key=weight_key, bias_key=bias_key, no_bias=no_bias)
    origin = f"{path} (weights {wkey!r}, {f'bias {bkey!r}' if bkey is not None else 'no bias'})"
    return Layer(W, b, origin, [local, *_token_files(tokens, local)], tokens=_tokens(tokens, local, W.shape[0]),
                 tied=_tied(local, weight_key, W), info={"weight_key": wkey, "bias_key": bkey})


def _tied(path: Path, weight_key: str | None, W: np.ndarray) -> bool | None:
    """Whether another tensor of the file (an input embedding) holds the head's weights: None when the weight
    key is not named or no other tensor has the head's shape (the file cannot tell)."""
    if weight_key is None:
        return None
    with open_tensors(path) as tensors:
        same = [k for k in tensors if k != weight_key and tensors.shape(k) == W.shape]
        return any(np.array_equal(tensors[k], W) for k in same) if same else None


def _tokens(spec: Mapping | None, local: Path, n: int, metadata: Mapping | None = None) -> list[str] | None:
    """The tokens a ``tokens`` setting names, checked to be one per row."""
    if not spec:
        return None
    names = read_tokens(spec, local.parent, metadata)
    if len(names) != n:
        raise WeightsError(f"{str(local)!r}: {len(names)} tokens for {n} output rows; fix the model's 'tokens' "
                           "setting (prepend/append what the model adds, e.g. a CTC blank)")
    return names


def load_npz(path: str, weight_key: str | None = None, bias_key: str | None = None,
             no_bias: bool = False) -> Layer:
    """A local Marian/Nematus .npz release (Bergamot, Edinburgh WMT'17): see :func:`load_file`."""
    if not path.endswith(".npz"):
        raise WeightsError(f"npz source: {path!r} is not a .npz file (use source 'file' for others)")
    return load_file(path, weight_key, bias_key, no_bias)


def _token_files(spec: Mapping | None, local: Path) -> list[Path]:
    """The files a ``tokens`` setting reads (for provenance)."""
    return [local.parent / spec[k] for k in ("file", "pickle") if spec and k in spec]


def load_onnx(path: str, output: str | None = None, tokens: Mapping | None = None) -> Layer:
    """The softmax head of a local ONNX model (:func:`argmaxable.detect.onnx.read_onnx_head`).

    ``output`` names the logits tensor (default: found from the Softmax or the graph output); ``tokens`` says
    where each row's token is (:func:`argmaxable.detect.onnx.read_tokens`; files relative to the .onnx file's
    directory); without it, the model's own dictionary names them where its metadata has one
    (:func:`argmaxable.detect.onnx.metadata_tokens`; ``info["tokens"]`` says which). The activation found feeding
    the head is kept in ``Layer.activation`` and the origin.
    """
    local = Path(path).expanduser()
    head = read_onnx_head(local, output)
    if tokens:
        names, how = _tokens(tokens, local, head.W.shape[0], head.metadata), "the model's tokens setting"
    else:
        names, how = metadata_tokens(head.metadata, head.W.shape[0])
    origin = f"onnx:{local.name} {head.node} (fed by {head.feeding})"
    return Layer(head.W, head.b, origin, [local, *_token_files(tokens, local)], tokens=names,
                 activation=head.activation, precision=head.precision, tied=head.tied, info={"tokens": how})


def load_gguf(path: str | list[str]) -> Layer:
    """The head of a local GGUF model (:func:`argmaxable.detect.gguf.read_gguf_head`): one file, or the files of a
    ``gguf-split`` model in order. Tokens and token types come from the metadata, shown readable (byte-level BPE
    for llama.cpp's ``gpt2`` tokenizer, ``▁`` as the space for ``llama``); ``info`` keeps the head's tensor name,
    whether it is tied to the embeddings, its stored type and the final norm's weights (``output_norm``)."""
    paths = [Path(p).expanduser() for p in ([path] if isinstance(path, str) else path)]
    head = read_gguf_head(paths)
    tokens = raw = head.tokens
    if tokens is not None:
        scheme = {"gpt2": "byte_level", "llama": "sentencepiece"}.get(head.tokenizer, "auto")
        tokens = readable_tokens(raw, scheme) or raw
    info = {"tensor": head.tensor, "tied": head.tied, "stored_type": head.stored_type, "tokenizer": head.tokenizer,
            "architecture": head.architecture,
            "output_norm": None if head.norm is None else [float(v) for v in head.norm]}
    origin = f"gguf:{paths[0].name} {head.tensor} ({head.stored_type}{', tied' if head.tied else ''})"
    return Layer(head.W, None, origin, paths, tokens=tokens, raw_tokens=raw if tokens is not raw else None,
                 token_types=head.token_types, info=info, precision=head.stored_type, tied=head.tied)


SOURCES: dict[str, Callable[..., Layer]] = {
    "random": load_random,
    "huggingface": load_huggingface,
    "npz": load_npz,
    "file": load_file,
    "onnx": load_onnx,
    "gguf": load_gguf,
}


PATH_PARAMS = ("path", "repo", "vocab")  # params naming files, read inside the model's directory


def load_model(model: Mapping, root: str | os.PathLike | None = None) -> Layer:
    """Load the output layer a model config (``source`` + ``params``) describes, from local files.

    Parameters
    ----------
    model : mapping
        A model config (:class:`argmaxable.detect.schema.ModelConfig`): ``source``, ``params``, and
        optionally ``activation`` (default: the one an ONNX graph shows feeding the head).
        ``params["vocab"]`` names the vocabulary file; without it, unless the loader found the tokens
        itself, the vocabulary is looked for in the weights' directory (:func:`argmaxable.detect.vocab.read_vocab`).
    root : path, optional
        The model's downloaded directory (``data/models/<key>``): relative ``path``/``repo``/``vocab``
        params are read inside it.

    Raises
    ------
    WeightsError
        Unknown source, unknown or missing parameters (the message lists the accepted ones), or a loader
        failure.

    Examples
    --------
    >>> layer = load_model({"name": "toy", "source": "random", "params": {"n": 5, "d": 2, "seed": 1}})
    >>> layer.W.shape, layer.b.shape, layer.tokens
    ((5, 2), (5,), None)
    """
    source, params = model["source"], dict(model.get("params") or {})
    if root is not None:
        params |= {k: str(Path(root) / v) for k, v in params.items()
                   if k in PATH_PARAMS and isinstance(v, str) and not Path(v).expanduser().is_absolute()}
    if root is not None and isinstance(params.get("path"), list):  # the files of a split model, in order
        params["path"] = [str(Path(root) / v) for v in params["path"]]
    vocab = params.pop("vocab", None)
    loader = SOURCES.get(source)
    if loader is None:
        raise WeightsError(f"model {model.get('name')!r}: unknown source {source!r}; use one of {sorted(SOURCES)}")
    sig = inspect.signature(loader)
    try:
        sig.bind(**params)
    except TypeError as err:
        accepted = ", ".join([*sig.parameters, "vocab"])
        raise WeightsError(f"model {model.get('name')!r}: bad params for source {source!r} ({err}); "
                           f"accepted: {accepted}") from None
    layer = loader(**params)
    if vocab is not None or (layer.tokens is None and layer.files):  # an explicit file, else the model's own
        where = Path(vocab) if vocab is not None else layer.files[0].parent
        tokens, vocab_files = read_vocab(where, layer.W.shape[0])
        name_rows(layer, tokens)
        layer.files += vocab_files
    layer.activation = model.get("activation") or layer.activation  # the config's word, else what a graph shows
    return layer


# ------------------------------------------------------------------------------------------- any head

SUFFIX_SOURCES = {".gguf": "gguf", ".onnx": "onnx", **dict.fromkeys(FORMATS, "file")}
READABLE = ("a weights file (.npz, .npy, .safetensors, .pt/.pth/.bin), a GGUF model (.gguf), an ONNX model (.onnx), "
            "a Hugging Face model directory (save_pretrained), or a hub id (owner/name, a bare name such as gpt2, "
            "owner/name:file.gguf)")


def name_rows(layer: Layer, tokens: list[str] | None) -> None:
    """Give the layer's rows their tokens, shown readable where the vocabulary is byte-level BPE (the stored
    names kept as ``raw_tokens``)."""
    if tokens is not None:
        readable = readable_tokens(tokens)
        layer.tokens, layer.raw_tokens = (readable, tokens) if readable is not None else (tokens, None)


def load_head(path_or_hub_id: str | os.PathLike, *, weight_key: str | None = None, bias_key: str | None = None,
              no_bias: bool = False, revision: str | None = None, vocab: str | os.PathLike | None = None) -> Layer:
    """The softmax head of any model ``argmaxable check`` reads: a weights file, a GGUF or ONNX model, a Hugging
    Face model directory, or a hub id (only the files holding the head and the tokens fetched).

    Parameters
    ----------
    path_or_hub_id : str or path
        A weights file (``.npz``, ``.npy``, ``.safetensors``, ``.pt``/``.pth``/``.bin``), a GGUF model
        (``.gguf``), an ONNX model (``.onnx``), a ``save_pretrained`` directory, or a hub id (``owner/name``, a
        bare name such as ``gpt2``, ``owner/name:file.gguf`` for one GGUF file of a repo), fetched from
        ``HF_ENDPOINT`` into ``$ARGMAXABLE_CACHE`` (:func:`argmaxable.detect.hub.hub_dir`).
    weight_key, bias_key : str, optional
        The tensors of a weights file (default: the first known names present, :func:`~argmaxable.detect.weights.
        choose_keys`: a file holding several arrays that could be the weights is refused, naming them); for ONNX,
        ``weight_key`` names the logits tensor.
    no_bias : bool, default False
        Ignore any bias the model has.
    revision : str, optional
        Branch, tag or commit of a hub id (default: main); the commit it names is recorded in ``origin``.
    vocab : path, optional
        A vocabulary naming each row (vocab.json, vocab.txt, one token per line, ...), for models that name no
        tokens themselves.

    Returns
    -------
    Layer
        ``W`` (n, d) and ``b`` (n,) or None; ``tokens`` (readable), ``raw_tokens`` (as stored) and
        ``token_types`` where the model names them; ``activation`` (what feeds the head, where the model shows
        it) and :meth:`Layer.box`, the box its inputs lie in; ``origin``, ``files`` and ``info`` (the weight and
        bias keys chosen, the stored type, ...), gathered by :meth:`Layer.record`.

    Raises
    ------
    WeightsError
        One line: a file argmaxable cannot read (naming every readable kind), a hostile or damaged file, a
        missing or ambiguous key, options that do not apply to the model's kind, a hub that cannot serve it.

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> f = os.path.join(tempfile.mkdtemp(), "head.npz")
    >>> np.savez(f, W=np.eye(3, 2), b=np.zeros(3))
    >>> head = load_head(f)
    >>> head.W.shape, head.b.shape, head.record()["weight_key"], head.box()
    ((3, 2), (3,), 'W', (-100.0, 100.0))
    """
    text = str(path_or_hub_id)
    path = Path(text)
    hub = not path.is_dir() and is_hub_id(text)
    if revision and not hub:
        raise WeightsError("--revision applies to a Hugging Face hub id (owner/name, or a bare name such as gpt2), "
                           "not to a local path")
    if path.is_dir() or hub:
        if weight_key or bias_key:
            raise WeightsError("--weight-key/--bias-key apply to weights files, not to a Hugging Face model")
        try:
            local = hub_dir(text, check_revision(revision)) if hub else path
        except DownloadError as err:
            raise WeightsError(f"cannot fetch {text!r} from the Hugging Face hub: {err}") from None
        gguf = sorted(local.glob("*.gguf")) if hub else []
        layer = load_gguf(str(gguf[0])) if gguf else load_huggingface(str(local))
        if hub:
            layer.origin = f"huggingface:{text}@{local.name}"
            layer.info["revision"] = revision or "main"
        tokens, vocab_files = read_vocab(local, layer.W.shape[0])
        name_rows(layer, tokens)
        layer.files += vocab_files
    else:
        source = SUFFIX_SOURCES.get(path.suffix.lower())
        if source is None:
            raise WeightsError(f"{text!r} is not a model argmaxable reads{' (no such file)' * (not path.exists())}: "
                               f"give {READABLE}")
        if source == "gguf" and (weight_key or bias_key):
            raise WeightsError("--weight-key/--bias-key do not apply to a GGUF model (its head is output.weight, "
                               "or token_embd.weight when tied)")
        if source == "onnx" and bias_key:
            raise WeightsError("--bias-key does not apply to an ONNX model (its head's bias is read from the graph)")
        params = {"gguf": {}, "onnx": {"output": weight_key},
                  "file": {"weight_key": weight_key, "bias_key": bias_key, "no_bias": no_bias}}[source]
        layer = SOURCES[source](text, **params)
    if no_bias:
        layer.b = None
    if vocab is not None:
        if layer.tokens is not None:
            raise WeightsError(f"{text} names its {len(layer.tokens)} tokens itself"
                               f"{' (with their types)' if layer.token_types is not None else ''}: --vocab would "
                               "replace them; leave it out")
        tokens, vocab_files = read_vocab(vocab, layer.W.shape[0], exact=True)
        name_rows(layer, tokens)
        layer.files += vocab_files
    return layer
