"""Replicas of the papers' released models, from one manifest, served by the local hub.

:func:`manifest` makes one :class:`Entry` per model of ``experiment=paper`` from where the configs say its files
are (a hub repo or a URL) and the table of true shapes below: the family (its real file layout), n, d, bias,
stored dtype, the vocabulary (with the count of target-script tokens a translation model's check counts), a pinned
commit, and the rows planted unargmaxable. :func:`repo_files` makes a replica's files in that layout, its
checkpoint a :class:`~argmaxable.rehearsal.blobs.Blob` made on request (seeded Gaussian head, zeros elsewhere), so
the 149 replicas cost no disk; :func:`local_hub` serves them all.

What is true and what is assumed (the hubs cannot be asked from here):

- d, bias and tying come from the papers (ACL 2022 §4, thesis §4.2) and the families' configurations; the transformer
  hyperparameters (layers, heads, FFN widths) are the public ones of each architecture, so the checkpoints have
  their true tensor names, shapes and sizes; the LMs' n are their configs' (BERT 28996/30522, RoBERTa 50265, XLM-R
  250002, GPT-2 50257, T5 32128, Llama 32000).
- n of the OPUS-MT, FAIR WMT'19, Bergamot and WMT'17 models is in each repo's config or vocabulary, not known
  here: the replicas use one estimate per family (``n_source: estimate`` in the manifest), as does WMT'17's d
  (the paper says 500 or 512 per model).
- Which OPUS-MT repos hold a ``model.safetensors`` beside ``pytorch_model.bin`` is not known here either: the
  replicas alternate, in config order, a legacy (torch < 1.6) ``pytorch_model.bin`` alone and a zip one with a
  ``model.safetensors``, so both paths run. FAIR's models ship a zip ``pytorch_model.bin``; the LMs
  ``model.safetensors`` (Llama-2-7b in two shards with an index). Framework duplicates (TF, Flax, Rust, ONNX) are
  not replicated, so "repo size" below means the checkpoint and the files a check reads.
- Planted rows (:data:`PLANTED`): "inside" rows are a tenth of the rows' spread from the origin, which lies deep
  inside the hull of the other rows (n >> d Gaussian rows), with a bias below every other (no strict win
  anywhere in the box, certified); "ties" copy a row (weights and bias) to the rows after it (none wins
  strictly). Nothing else of a Gaussian replica is unargmaxable.
- Structure a trained head has and a Gaussian one lacks, so that a replica costs what its model would: each
  biased translation model has as many *thin* rows as the ACL 2022 tables print potentially unargmaxable tokens
  for it (Tables 5-8: the tokens its approximate stage could not prove, 366 for the WMT'17 zh-en l2r ensemble's
  third member), each a copy of another row lengthened by a thousandth, its bias lowered so that it wins only in a
  slab at the box's corner (:func:`head_arrays`): argmaxable, past reflection, proved by an exact LP; and every
  replica has near-duplicate clusters (:data:`CLUSTER_ROWS`: a row and three copies moved by 2^-7 of its norm,
  its bias kept, as case and spacing variants of one word are), which the bfloat16 products cannot tell apart.
  Both are argmaxable by construction; their rows are in the manifest.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import lru_cache

import numpy as np

from argmaxable.rehearsal.blobs import (
    Array,
    Blob,
    Bytes,
    RawBytes,
    npz_blob,
    safetensors_blob,
    torch_legacy_blob,
    torch_zip_blob,
)
from argmaxable.rehearsal.server import HubRepo, LocalHub

TOKEN = "hf_rehearsal"  # what the gated replica (Llama-2-7b) asks for, as HF_TOKEN
STATMT = "https://data.statmt.org/"  # the URL prefix of the Bergamot and WMT'17 downloads, served as /statmt/
SHARD_BYTES = 10_000_000_000  # Llama-2-7b's safetensors shards: the first holds 9.98 GB, the second the rest
TINY = {"n": 300, "d": 32}  # --scale tiny (the CI slice): every family at this size, one layer deep
BOX = 100.0  # the box the paper's check uses (ACL 2022 §4, config/detect's bound): thin rows win in its corner
# A thin row: its base row lengthened by THIN_STEP of its norm, its bias lowered so that it beats the base only
# where u.x exceeds THIN_DEPTH of its largest value in the box (u: the base's direction), a slab at the corner.
# The base wins at its corner B sign(w) by about 0.8 B sigma d against the others' 4.5 B sigma sqrt(d) (the
# largest of n Gaussians): from THIN_D columns on (every biased translation head) by far, at the CI slice's 32 not.
THIN_STEP, THIN_DEPTH, THIN_D = 1e-3, 0.98, 256
CLUSTER_ROWS, CLUSTER_EVERY, CLUSTER_MOVE = 4, 1600, 2.0**-7  # rows per cluster, rows per cluster, the copies' move

# family -> transformers class, config.json settings (true hyperparameters), stored dtype, tokenizer style
FAMILIES: dict[str, dict] = {
    "bert": {"arch": "BertForMaskedLM", "dtype": "float32", "tokens": "wordpiece",
             "config": {"model_type": "bert", "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
                        "intermediate_size": 3072, "max_position_embeddings": 512, "type_vocab_size": 2}},
    "roberta": {"arch": "RobertaForMaskedLM", "dtype": "float32", "tokens": "bytebpe",
                "config": {"model_type": "roberta", "max_position_embeddings": 514, "type_vocab_size": 1,
                           "pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2}},
    "xlm-roberta": {"arch": "XLMRobertaForMaskedLM", "dtype": "float32", "tokens": "unigram",
                    "config": {"model_type": "xlm-roberta", "max_position_embeddings": 514, "type_vocab_size": 1,
                               "pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2}},
    "gpt2": {"arch": "GPT2LMHeadModel", "dtype": "float32", "tokens": "bytebpe",
             "config": {"model_type": "gpt2", "n_positions": 1024, "bos_token_id": 50256, "eos_token_id": 50256}},
    "t5": {"arch": "T5ForConditionalGeneration", "dtype": "float32", "tokens": "unigram",
           "config": {"model_type": "t5", "d_model": 1024, "d_ff": 4096, "num_layers": 24, "num_heads": 16,
                      "d_kv": 64}},
    "llama": {"arch": "LlamaForCausalLM", "dtype": "float16", "tokens": "sentencepiece",
              "config": {"model_type": "llama", "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2}},
    "marian": {"arch": "MarianMTModel", "dtype": "float32", "tokens": "marian",
               "config": {"model_type": "marian", "d_model": 512, "encoder_layers": 6, "decoder_layers": 6,
                          "encoder_attention_heads": 8, "decoder_attention_heads": 8, "encoder_ffn_dim": 2048,
                          "decoder_ffn_dim": 2048, "max_position_embeddings": 512, "eos_token_id": 0}},
    "fsmt": {"arch": "FSMTForConditionalGeneration", "dtype": "float32", "tokens": "fsmt",
             "config": {"model_type": "fsmt", "d_model": 1024, "encoder_layers": 6, "decoder_layers": 6,
                        "encoder_attention_heads": 16, "decoder_attention_heads": 16, "encoder_ffn_dim": 8192,
                        "decoder_ffn_dim": 8192, "max_position_embeddings": 1024, "tie_word_embeddings": False}},
    "bergamot": {"arch": "", "dtype": "float32", "tokens": "none", "config": {}},
    "wmt17": {"arch": "", "dtype": "float32", "tokens": "nematus", "config": {}},
}
# the LMs and top-m models: family, n (their configs'), and what sizes the architecture
LM_SHAPES: dict[str, tuple[str, int, dict]] = {
    "bert_base_cased": ("bert", 28996, {}),
    "bert_base_uncased": ("bert", 30522, {}),
    "roberta_base": ("roberta", 50265, {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
                                        "intermediate_size": 3072}),
    "roberta_large": ("roberta", 50265, {"hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16,
                                         "intermediate_size": 4096}),
    "xlm_roberta_base": ("xlm-roberta", 250002, {"hidden_size": 768, "num_hidden_layers": 12,
                                                 "num_attention_heads": 12, "intermediate_size": 3072}),
    "xlm_roberta_large": ("xlm-roberta", 250002, {"hidden_size": 1024, "num_hidden_layers": 24,
                                                  "num_attention_heads": 16, "intermediate_size": 4096}),
    "gpt2": ("gpt2", 50257, {"n_embd": 768, "n_layer": 12, "n_head": 12}),
    "gpt2_xl": ("gpt2", 50257, {"n_embd": 1600, "n_layer": 48, "n_head": 25}),
    "t5_large": ("t5", 32128, {}),
    "tinyllama": ("llama", 32000, {"hidden_size": 2048, "intermediate_size": 5632, "num_hidden_layers": 22,
                                   "num_attention_heads": 32, "num_key_value_heads": 4, "_dtype": "bfloat16"}),
    "llama2_7b": ("llama", 32000, {"hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
                                   "num_attention_heads": 32, "num_key_value_heads": 32}),
}
# estimates (see the module's docstring): n per family, WMT'17 d, and the sizes of FAIR's vocabularies
N_ESTIMATE = {"marian": 62000, "bergamot": 32000}
WMT17_N = {"en": 85000, "de": 85000, "cs": 85000, "ru": 85000, "tr": 40000, "lv": 40000, "zh": 60000}
WMT19_N = {"en-ru": (31232, 31232), "ru-en": (31232, 31232), "en-de": (42024, 42024), "de-en": (42024, 42024)}
BERGAMOT_D = {"tiny11": 256, "base": 512, "bigx2": 1024}

# Rows planted unargmaxable, as fractions of n: "inside" rows, and tie groups (first row, size).
PLANTED: dict[str, dict] = {
    "opus_mt_en_ru": {"inside": [0.1, 0.45, 0.9], "ties": [[0.3, 3]]},
    "gpt2": {"inside": [0.2, 0.8], "ties": [[0.6, 2]]},
    "wmt19_en_de": {"inside": [0.25, 0.75], "ties": []},
    "bergamot_en_de_student_tiny11": {"inside": [0.05, 0.95], "ties": [[0.5, 2]]},
    "wmt17_zh_en_l2r_1": {"inside": [0.33], "ties": [[0.66, 3]]},
    "xlm_roberta_base": {"inside": [], "ties": [[0.4, 3]]},
}
SCRIPTS = {"ar": "ARABIC", "he": "HEBREW", "el": "GREEK", "ru": "CYRILLIC", "bg": "CYRILLIC", "ja": "HIRAGANA",
           "ko": "HANGUL"}  # others: LATIN
ALPHABETS = {"ARABIC": (0x0627, 0x064A), "HEBREW": (0x05D0, 0x05EA), "GREEK": (0x03B1, 0x03C9),
             "CYRILLIC": (0x0430, 0x044F), "LATIN": (0x61, 0x7A), "HIRAGANA": (0x3041, 0x3093),
             "HANGUL": (0xAC00, 0xAC60), "CJK": (0x4E00, 0x4F00)}


@dataclass
class Entry:
    """One model's replica: where the config says its files are and what they hold."""

    key: str
    family: str
    repo: str  # hub repo id, or "" for a URL download
    url: str  # the URL the config names, or ""
    commit: str  # the replica repo's commit (pinned into the configs by `config pin` against the local hub)
    n: int
    d: int
    bias: bool
    dtype: str
    layout: list[str]  # checkpoint files, e.g. ["pytorch_model.bin:legacy"] or ["model.safetensors"]
    n_source: str  # "config" (the real n) or "estimate"
    languages: list[str] = field(default_factory=list)  # [source, target] of a translation model
    script: str = ""  # the target script the check counts (ACL 2022 §4.2), from the model's config
    counted: int = 0  # tokens the check counts: the target script's and the specials (all, without a script)
    inside: list[int] = field(default_factory=list)  # planted rows strictly inside the hull
    ties: list[list[int]] = field(default_factory=list)  # planted groups of equal rows
    thin: list[list[int]] = field(default_factory=list)  # [row, base]: argmaxable in a slab at the box's corner
    clusters: list[list[int]] = field(default_factory=list)  # near-duplicates: a base row, then its copies
    seed: int = 0
    config: dict = field(default_factory=dict)  # transformers settings besides the family's
    tokens_named: bool = True  # whether the pipeline reads the vocabulary (npz downloads fetch only the npz)

    @property
    def planted(self) -> list[int]:
        return sorted({*self.inside, *(i for group in self.ties for i in group)})


def _seed(key: str) -> int:
    return int(hashlib.sha1(key.encode()).hexdigest()[:8], 16)


def _family(key: str, model) -> str:
    if key in LM_SHAPES:
        return LM_SHAPES[key][0]
    if key.startswith("opus_mt"):
        return "marian"
    if key.startswith("wmt19"):
        return "fsmt"
    if key.startswith("bergamot"):
        return "bergamot"
    if key.startswith("wmt17"):
        return "wmt17"
    raise ValueError(f"no replica family for model {key!r} (source {model.source})")


def manifest(models: Mapping, scale: str = "true") -> list[Entry]:
    """The replica manifest of the configured models (the composed config's ``model`` mapping), in its order;
    ``scale="tiny"`` shrinks every replica to n = 300, d = 32 (the CI slice)."""
    entries, opus = [], 0
    for key, model in models.items():
        family = _family(key, model)
        spec, dl = FAMILIES[family], model.download
        languages = key.split("_")[-2:] if family in ("marian", "fsmt") else []
        if family == "wmt17":
            languages = key.split("_")[1:3]
        entry = Entry(key, family, dl.repo if dl.kind == "huggingface" else "", dl.url if dl.kind == "url" else "",
                      hashlib.sha1(f"replica:{dl.repo or dl.url}".encode()).hexdigest(), 0, 0, True, spec["dtype"],
                      [], "config", languages, model.script or "", seed=_seed(key))
        if family in ("bert", "roberta", "xlm-roberta", "gpt2", "t5", "llama"):
            _, entry.n, sizes = LM_SHAPES[key]
            entry.config = {k: v for k, v in sizes.items() if not k.startswith("_")}
            entry.dtype = sizes.get("_dtype", spec["dtype"])
            merged = {**spec["config"], **entry.config}
            entry.d = merged.get("hidden_size") or merged.get("n_embd") or merged["d_model"]
            entry.bias = family in ("bert", "roberta", "xlm-roberta")
            entry.layout = ["model.safetensors"] if key != "llama2_7b" else ["model.safetensors.index.json"]
        elif family == "marian":
            entry.n, entry.d, entry.n_source = N_ESTIMATE["marian"], 512, "estimate"
            entry.layout = ["pytorch_model.bin:legacy"] if opus % 2 == 0 else ["pytorch_model.bin:zip",
                                                                              "model.safetensors"]
            opus += 1
        elif family == "fsmt":
            entry.n, entry.d, entry.bias, entry.n_source = WMT19_N["-".join(languages)][1], 1024, False, "estimate"
            entry.layout = ["pytorch_model.bin:zip"]
        elif family == "bergamot":
            size = next(s for s in BERGAMOT_D if s in dl.url) if any(s in dl.url for s in BERGAMOT_D) else "base"
            entry.n, entry.d, entry.n_source = N_ESTIMATE["bergamot"], BERGAMOT_D[size], "estimate"
            entry.layout, entry.tokens_named = ["npz"], False
        else:  # wmt17
            entry.n, entry.d, entry.n_source = WMT17_N[languages[1]], 512, "estimate"
            entry.layout, entry.tokens_named = ["npz"], False
        if scale == "tiny":
            entry.n, entry.d = TINY["n"], TINY["d"]
        plant = PLANTED.get(key, {})
        spot = [5 + int(f * (entry.n - 12)) for f, _ in plant.get("ties", [])]  # clear of the specials at each end
        entry.inside = [5 + int(f * (entry.n - 12)) for f in plant.get("inside", [])]
        entry.ties = [list(range(at, at + size)) for at, (_, size) in zip(spot, plant.get("ties", []), strict=True)]
        entry.thin, entry.clusters = _structure(entry, _paper_count(model) if entry.bias and entry.d >= THIN_D else 0)
        entry.counted = len(vocabulary(entry)[1]) if entry.script else entry.n
        entries.append(entry)
    return entries


def _paper_count(model) -> int:
    """The potentially unargmaxable tokens the ACL 2022 tables print for a model ("366", "≤ 2": 2; none: 0)."""
    text = str((model.get("paper") or {}).get("potentially_unargmaxable") or "0")
    digits = "".join(c for c in text if c.isdigit())
    return int(digits) if digits else 0


def _structure(entry: Entry, thin: int) -> tuple[list[list[int]], list[list[int]]]:
    """The thin rows (``thin`` of them, at most a twentieth of the rows) with their bases, and the clusters, on
    seeded rows clear of the planted ones and of the specials at each end."""
    rng = np.random.default_rng(entry.seed + 3)
    free = np.setdiff1d(np.arange(5, entry.n - 7), entry.planted)
    thin = min(thin, entry.n // 20)
    groups = max(1, entry.n // CLUSTER_EVERY)
    rows = rng.choice(free, 2 * thin + CLUSTER_ROWS * groups, replace=False).tolist()
    pairs = [[rows[2 * k], rows[2 * k + 1]] for k in range(thin)]
    rest = rows[2 * thin :]
    return pairs, [rest[k : k + CLUSTER_ROWS] for k in range(0, len(rest), CLUSTER_ROWS)]


def to_json(entries: Sequence[Entry]) -> str:
    return json.dumps([asdict(e) for e in entries], indent=1)


# ------------------------------------------------------------------------------------------- vocabularies


def _words(count: int, script: str, start: int = 0) -> list[str]:
    """``count`` distinct words of a script's letters (base-k numerals over its alphabet, two letters or more)."""
    lo, hi = ALPHABETS[script]
    k = hi - lo + 1
    out = []
    for i in range(start, start + count):
        i += k  # at least two letters
        letters = []
        while i:
            i, r = divmod(i, k)
            letters.append(chr(lo + r))
        out.append("".join(reversed(letters)))
    return out


@lru_cache(maxsize=4)
def _vocabulary(key: str, family: str, n: int, languages: tuple[str, ...], script: str
                ) -> tuple[tuple[str, ...], frozenset[int]]:
    style = FAMILIES[family]["tokens"]
    if style == "wordpiece":
        specials = ["[PAD]", *(f"[unused{i}]" for i in range(min(99, n // 4))), "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        rest = n - len(specials)
        words = _words(rest - rest // 3, "LATIN")
        tokens = specials + words + ["##" + w for w in _words(rest // 3, "LATIN", 7)]
        return tuple(tokens), frozenset()
    if style == "bytebpe":
        specials = ["<s>", "<pad>", "</s>", "<unk>"] if family == "roberta" else []
        tail = ["<mask>"] if family == "roberta" else ["<|endoftext|>"]
        rest = n - len(specials) - len(tail)
        return tuple(specials + ["Ġ" + w for w in _words(rest - rest // 3, "LATIN")]
                     + _words(rest // 3, "LATIN", 11) + tail), frozenset()
    if style in ("unigram", "sentencepiece"):
        specials = {"xlm-roberta": ["<s>", "<pad>", "</s>", "<unk>"], "t5": ["<pad>", "</s>", "<unk>"]}.get(
            family, ["<unk>", "<s>", "</s>"])
        tail = ["<mask>"] if family == "xlm-roberta" else []
        rest = n - len(specials) - len(tail)
        script_words = _words(rest // 4, "CJK") + ["▁" + w for w in _words(rest - rest // 4, "LATIN")]
        return tuple(specials + script_words + tail), frozenset()
    if style == "none":  # Bergamot's vocabulary is a SentencePiece model the downloads do not fetch
        return tuple(f"▁piece{i}" for i in range(n)), frozenset()
    # translation models: the target script's pieces, the source's, digits; <pad> last (Marian)
    source, target = (SCRIPTS.get(lang, "LATIN") for lang in languages)
    marker = (lambda w: w + "</w>") if style == "fsmt" else (lambda w: "▁" + w)
    specials = ["<s>", "<pad>", "</s>", "<unk>"] if style == "fsmt" else ["</s>", "<unk>"]
    tail = [] if style == "fsmt" else ["<pad>"]
    rest = n - len(specials) - len(tail)
    n_digits = rest // 20
    n_target = (rest - n_digits) // 2
    if source == target:  # both Latin: the target's pieces are the same script
        source_words = [marker(w) for w in _words(rest - n_digits - n_target, target, n_target)]
    else:
        source_words = [marker(w) for w in _words(rest - n_digits - n_target, source)]
    target_words = [marker(w) for w in _words(n_target, target)]
    digits = [marker(f"{i}") for i in range(n_digits)]
    tokens = specials + target_words + source_words + digits + tail
    # counted: the specials, the target script's pieces (and the source's, when it is the same script)
    letters = len(specials) + n_target + (len(source_words) if source == target else 0)
    counted = {*range(letters), *range(n - len(tail), n)}
    return tuple(tokens), frozenset(counted) if script else frozenset(range(n))


def vocabulary(entry: Entry) -> tuple[list[str], set[int]]:
    """The replica's tokens by id, and the ids the check counts (target script and specials)."""
    tokens, counted = _vocabulary(entry.key, entry.family, entry.n, tuple(entry.languages), entry.script)
    return list(tokens), set(counted) if entry.script else set(range(entry.n))


def _json(obj) -> Bytes:
    return Bytes(json.dumps(obj, ensure_ascii=False).encode())


def _filler(size: int, seed: int) -> Bytes:
    """A binary file that is not read (a SentencePiece model), of its real size: seeded bytes."""
    return Bytes(np.random.default_rng(seed).integers(0, 256, size, dtype=np.uint8).tobytes())


def _tokenizer_files(entry: Entry, tokens: list[str]) -> dict[str, Blob]:
    style = FAMILIES[entry.family]["tokens"]
    ids = {t: i for i, t in enumerate(tokens)}
    if style == "wordpiece":
        return {"vocab.txt": Bytes(("\n".join(tokens) + "\n").encode()),
                "tokenizer_config.json": _json({"do_lower_case": entry.key.endswith("uncased")}),
                "tokenizer.json": _json({"version": "1.0", "model": {"type": "WordPiece", "vocab": ids}})}
    if style == "bytebpe":
        return {"vocab.json": _json(ids), "merges.txt": Bytes(b"#version: 0.2\n\xc4\xa0 t\n"),
                "tokenizer.json": _json({"version": "1.0", "model": {"type": "BPE", "vocab": ids, "merges": []}})}
    if style in ("unigram", "sentencepiece"):
        model = {"type": "Unigram", "vocab": [[t, -float(i)] for i, t in enumerate(tokens)]} if style == "unigram" \
            else {"type": "BPE", "vocab": ids, "merges": []}
        spm = {"xlm-roberta": "sentencepiece.bpe.model", "t5": "spiece.model"}.get(entry.family, "tokenizer.model")
        return {"tokenizer.json": _json({"version": "1.0", "model": model}), "tokenizer_config.json": _json({}),
                spm: _filler(min(5_000_000, 20 * entry.n), entry.seed)}
    if style == "marian":
        source, target = entry.languages
        return {"vocab.json": _json(ids), "source.spm": _filler(min(800_000, 12 * entry.n), entry.seed),
                "target.spm": _filler(min(800_000, 12 * entry.n), entry.seed + 1),
                "tokenizer_config.json": _json({"source_lang": source, "target_lang": target})}
    if style == "fsmt":
        source_tokens = [t for t in tokens if not any(0x0400 <= ord(c) < 0x0500 for c in t)]
        return {"vocab-tgt.json": _json(ids), "vocab-src.json": _json({t: i for i, t in enumerate(source_tokens)}),
                "merges.txt": Bytes(b"t h</w> 1\n"), "tokenizer_config.json": _json({"langs": entry.languages})}
    return {}


# --------------------------------------------------------------------------------------------- the heads


def head_arrays(entry: Entry, weight_shape: tuple[int, ...], bias_shape: tuple[int, ...] | None
                ) -> tuple[Array, Array | None]:
    """The head's weight (Gaussian, sigma 0.05) and bias (sigma 0.5), with the planted rows, the thin rows and the
    clusters written over them (module doc)."""
    n, d = entry.n, weight_shape[-1]
    W = Array(weight_shape, entry.dtype, seed=entry.seed, scale=0.05)
    b = Array(bias_shape, entry.dtype, seed=entry.seed + 1, scale=0.5) if bias_shape is not None else None
    rng = np.random.default_rng(entry.seed + 2)
    w_patch, b_patch = {}, {}
    b_values = b.values(0, n) if b is not None else None
    for row in entry.inside:  # a tenth of the rows' spread from the origin, the lowest bias of all
        u = rng.standard_normal(d)
        w_patch[row * d] = 0.005 * u / np.linalg.norm(u)
        if b_values is not None:
            b_patch[row] = np.float32(b_values.min() - 1.0)
    for group in entry.ties:  # copies of the group's first row, weights and bias
        for row in group[1:]:
            w_patch[row * d] = W.row(group[0])
            if b_values is not None:
                b_patch[row] = b_values[group[0]]
    for row, base in entry.thin:  # v = w + step u beats w only where u.x > depth max_box u.x
        w = W.row(base).astype(np.float64)
        u, step = w / np.linalg.norm(w), THIN_STEP * np.linalg.norm(w)
        w_patch[row * d] = w + step * u
        b_patch[row] = np.float32(b_values[base] - step * THIN_DEPTH * BOX * np.abs(u).sum())
    for group in entry.clusters:
        w = W.row(group[0]).astype(np.float64)
        for row in group[1:]:
            u = rng.standard_normal(d)
            w_patch[row * d] = w + CLUSTER_MOVE * np.linalg.norm(w) * u / np.linalg.norm(u)
            if b_values is not None:
                b_patch[row] = b_values[group[0]]
    W = Array(weight_shape, entry.dtype, seed=entry.seed, scale=0.05, patches=w_patch)
    if b is not None:
        b = Array(bias_shape, entry.dtype, seed=entry.seed + 1, scale=0.5, patches=b_patch)
    return W, b


def _transformers_config(entry: Entry, scale: str) -> dict:
    spec = FAMILIES[entry.family]
    config = {**spec["config"], **entry.config, "architectures": [spec["arch"]]}
    if entry.family == "fsmt":
        n_src = WMT19_N["-".join(entry.languages)][0] if scale != "tiny" else entry.n
        config |= {"langs": entry.languages, "src_vocab_size": n_src, "tgt_vocab_size": entry.n}
    else:
        config["vocab_size"] = entry.n
    if entry.family == "marian":
        config |= {"pad_token_id": entry.n - 1, "decoder_start_token_id": entry.n - 1}
    if scale == "tiny":  # one layer, d = 32
        d = entry.d
        for key in ("hidden_size", "n_embd", "d_model"):
            if key in config or (key == "d_model" and entry.family in ("marian", "fsmt", "t5")):
                config[key] = d
        for key in ("num_hidden_layers", "n_layer", "encoder_layers", "decoder_layers", "num_layers"):
            if key in config or entry.family in ("bert", "roberta", "xlm-roberta", "llama"):
                config[key] = 1
        for key in ("num_attention_heads", "n_head", "encoder_attention_heads", "decoder_attention_heads",
                    "num_heads", "num_key_value_heads"):
            if key in config or entry.family in ("bert", "roberta", "xlm-roberta", "llama"):
                config[key] = 2
        for key in ("intermediate_size", "encoder_ffn_dim", "decoder_ffn_dim", "d_ff"):
            if key in config or entry.family in ("bert", "roberta", "xlm-roberta", "llama"):
                config[key] = 64
        if entry.family == "t5":
            config["d_kv"] = 16
        if entry.family == "gpt2":
            config["n_positions"] = 64
    return config


def _layout(config: dict) -> tuple[list[tuple[str, tuple[int, ...]]], list[str], list[list[str]]]:
    """The checkpoint's tensors (name, shape) as save_pretrained stores them (tied weights once), and the head's
    candidate names (weight, then biases), from the model class built on the meta device."""
    import torch
    import transformers

    from argmaxable.detect.loaders import logits_names

    cfg = transformers.AutoConfig.for_model(**config)
    with torch.device("meta"):
        model = getattr(transformers, config["architectures"][0])(cfg)
    every = {name for name, _ in model.named_parameters(remove_duplicate=False)}
    tensors = [(name, tuple(p.shape)) for name, p in model.named_parameters()]
    state = model.state_dict()
    tensors += [(name, tuple(state[name].shape)) for name in state if name not in every]
    weight, biases = logits_names(cfg)
    return tensors, weight, biases


def _checkpoint_tensors(entry: Entry, config: dict) -> list[tuple[str, Array]]:
    tensors, weight, biases = _layout(config)
    names = [n for n, _ in tensors]
    wkey = next(k for k in weight if k in names)
    bkeys = [next(k for k in b if k in names) for b in biases]
    shapes = dict(tensors)
    W, b = head_arrays(entry, shapes[wkey], shapes[bkeys[0]] if bkeys else None)
    out = []
    for name, shape in tensors:
        if name == wkey:
            out.append((name, W))
        elif bkeys and name == bkeys[0]:
            out.append((name, b))
        else:
            out.append((name, Array(shape, entry.dtype)))  # zeros: never read
    return out


def repo_files(entry: Entry, scale: str = "true", crcs: dict | None = None) -> dict[str, Blob]:
    """A hub replica's files: config.json, the tokenizer files, and the checkpoint in the entry's layout."""
    config = _transformers_config(entry, scale)
    tokens, _ = vocabulary(entry)
    files: dict[str, Blob] = {"config.json": _json({**config, "torch_dtype": entry.dtype}),
                              **_tokenizer_files(entry, tokens)}
    tensors = _checkpoint_tensors(entry, config)
    for layout in entry.layout:
        name, _, kind = layout.partition(":")
        if name == "model.safetensors":
            files[name] = safetensors_blob(tensors)
        elif name == "model.safetensors.index.json":  # shards of at most SHARD_BYTES, in order
            # tiny: everything but the last tensor (the head) in the first shard, as at the true size
            limit = SHARD_BYTES if scale != "tiny" else sum(a.size for _, a in tensors[:-1])
            shards, current, size = [], [], 0
            for name_, array in tensors:
                if current and size + array.size > limit:
                    shards.append(current)
                    current, size = [], 0
                current.append((name_, array))
                size += array.size
            shards.append(current)
            weight_map = {}
            for i, shard in enumerate(shards, start=1):
                shard_name = f"model-{i:05d}-of-{len(shards):05d}.safetensors"
                files[shard_name] = safetensors_blob(shard)
                weight_map |= {k: shard_name for k, _ in shard}
            files[name] = _json({"metadata": {"total_size": sum(a.size for _, a in tensors)},
                                 "weight_map": weight_map})
        elif kind == "legacy":
            files[name] = torch_legacy_blob(tensors)
        else:
            files[name] = torch_zip_blob(tensors, crcs=crcs)
    return files


def _marian_npz(entry: Entry, scale: str, crcs: dict | None) -> Blob:
    """A Bergamot (Marian) .npz: tied embeddings ``Wemb``, the output bias, the layers' matrices, the model's
    YAML config as a uint8 member."""
    n, d = entry.n, entry.d
    W, b = head_arrays(entry, (n, d), (1, n))
    big = d >= 1024
    ffn, enc, dec = (4 * d, 6, 6) if big or "teacher" in entry.key else ((1536, 6, 2) if d == 256 else (2048, 6, 2))
    if scale == "tiny":
        ffn, enc, dec = 64, 1, 1
    arrays = [("Wemb", W), ("decoder_ff_logit_out_b", b)]
    for side, layers in (("encoder", enc), ("decoder", dec)):
        for i in range(1, layers + 1):
            attention = ["self"] + (["context"] if side == "decoder" else [])
            for att in attention:
                arrays += [(f"{side}_l{i}_{att}_W{m}", Array((d, d))) for m in ("q", "k", "v", "o")]
            arrays += [(f"{side}_l{i}_ffn_W1", Array((d, ffn))), (f"{side}_l{i}_ffn_W2", Array((ffn, d)))]
    yml = f"type: transformer\ndim-emb: {d}\ndim-vocabs:\n  - {n}\n  - {n}\ntied-embeddings-all: true\n"
    arrays.append(("special:model.yml", RawBytes(yml.encode())))
    return npz_blob(arrays, crcs=crcs)


def _nematus_npz(entry: Entry, scale: str, crcs: dict | None) -> Blob:
    """An Edinburgh WMT'17 (Nematus) .npz: source and tied decoder embeddings, the output bias, the GRU layers."""
    n, d = entry.n, entry.d
    W, b = head_arrays(entry, (n, d), (n,))
    h = 1024 if scale != "tiny" else 64
    n_src = WMT17_N[entry.languages[0]] if scale != "tiny" else n
    arrays = [("Wemb", Array((n_src, d))), ("Wemb_dec", W), ("ff_logit_b", b)]
    for side, width in (("encoder", d), ("encoder_r", d), ("decoder", d)):
        arrays += [(f"{side}_W", Array((width, 2 * h))), (f"{side}_U", Array((h, 2 * h))),
                   (f"{side}_Wx", Array((width, h))), (f"{side}_Ux", Array((h, h)))]
    arrays += [("ff_logit_lstm_W", Array((h, d))), ("ff_logit_prev_W", Array((d, d))),
               ("ff_logit_ctx_W", Array((2 * h, d)))]
    return npz_blob(arrays, crcs=crcs)


def url_files(entry: Entry, scale: str = "true", crcs: dict | None = None) -> dict[str, Blob]:
    """A URL replica's files, by their path after the statmt prefix: the .npz, and for WMT'17 the JSON
    vocabularies beside it (not fetched by the configs, which read the npz only)."""
    path = entry.url.removeprefix(STATMT)
    if entry.family == "bergamot":
        return {path: _marian_npz(entry, scale, crcs)}
    tokens = ["eos", "UNK", *_words(entry.n - 2, "CJK" if entry.languages[1] == "zh" else "LATIN")]
    folder = path.rsplit("/", 1)[0]
    return {path: _nematus_npz(entry, scale, crcs),
            f"{folder}/vocab.{entry.languages[1]}.json": _json({t: i for i, t in enumerate(tokens)})}


class _LazyFiles(Mapping):
    """Files built on first access (a replica's checkpoint layout needs its model class built)."""

    def __init__(self, build: Callable[[], dict[str, Blob]]):
        self._build, self._files = build, None

    @property
    def files(self) -> dict[str, Blob]:
        if self._files is None:
            self._files = self._build()
        return self._files

    def __getitem__(self, key: str) -> Blob:
        return self.files[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.files)

    def __len__(self) -> int:
        return len(self.files)


class _Mirror(Mapping):
    """A mirror's files by path, each model's built when one of its paths is first asked for."""

    def __init__(self, entries: Sequence[Entry], scale: str, crcs: dict):
        self._paths = {}
        for e in entries:
            lazy = _LazyFiles(lambda e=e: url_files(e, scale, crcs))
            path = e.url.removeprefix(STATMT)
            self._paths[path] = lazy
            if e.family == "wmt17":
                self._paths[f"{path.rsplit('/', 1)[0]}/vocab.{e.languages[1]}.json"] = lazy

    def __getitem__(self, path: str) -> Blob:
        return self._paths[path][path]

    def __iter__(self) -> Iterator[str]:
        return iter(self._paths)

    def __len__(self) -> int:
        return len(self._paths)


ALIASES = {"bert-base-cased": "google-bert/bert-base-cased", "bert-base-uncased": "google-bert/bert-base-uncased",
           "roberta-base": "FacebookAI/roberta-base", "roberta-large": "FacebookAI/roberta-large",
           "xlm-roberta-base": "FacebookAI/xlm-roberta-base", "xlm-roberta-large": "FacebookAI/xlm-roberta-large",
           "gpt2": "openai-community/gpt2", "gpt2-xl": "openai-community/gpt2-xl", "t5-large": "google-t5/t5-large"}


def local_hub(entries: Sequence[Entry], scale: str = "true", **kwargs) -> LocalHub:
    """A local hub serving every replica: hub repos at their ids (Llama-2-7b gated behind :data:`TOKEN`; the
    papers' ids without an organisation as redirects), the URL downloads under the mirror prefix ``statmt``."""
    hub = LocalHub(token=TOKEN, **kwargs)
    hub.repos = {e.repo: HubRepo(e.repo, {e.commit: _LazyFiles(lambda e=e: repo_files(e, scale, hub.crcs))},
                                 {"main": e.commit}, gated=e.key == "llama2_7b") for e in entries if e.repo}
    hub.mirrors = {"statmt": _Mirror([e for e in entries if e.url], scale, hub.crcs)}
    hub.aliases = {old: new for old, new in ALIASES.items() if new in hub.repos}
    return hub


def prewarm(entry: Entry, hub: LocalHub) -> None:
    """Compute now what the hub would compute on a client's first request for this replica (the checkpoint's
    sha-256 ETag, its zip members' CRC-32s), so that no request waits on it."""
    if entry.url:
        hub.mirrors["statmt"][entry.url.removeprefix(STATMT)].read(0, 1)
        return
    files = hub.repos[entry.repo].commits[entry.commit]
    name = next((n for n in ("model.safetensors", "pytorch_model.bin") if n in files), None)
    if name is None:  # shards: the last holds the head (lm_head.weight)
        name = sorted(n for n in files if n.endswith(".safetensors"))[-1]
    files[name].read(0, 1)
    hub.etag(entry.repo, entry.commit, name, files[name])


def repo_size(entry: Entry, hub: LocalHub) -> int:
    """Bytes of every file of a replica (its repo, or its URL files)."""
    if entry.repo:
        return sum(b.size for b in hub.repos[entry.repo].commits[entry.commit].values())
    path = entry.url.removeprefix(STATMT)
    return hub.mirrors["statmt"][path].size
