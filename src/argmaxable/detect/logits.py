"""Which stored tensors make a transformers model's softmax head: its config read without running code, the model
built on the ``meta`` device (no memory) to find the parameter that produces the logits and every name it is
stored under (tied to the input embeddings, with or without the base model's prefix), and the bias terms added to
the logits. Shared by the local loader (:func:`argmaxable.detect.loaders.load_huggingface`) and the head-only fetch
(:func:`argmaxable.detect.hub.fetch_model`), which reads only those tensors.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from argmaxable.detect.source import WeightsError, first_line

# Model types whose logits do not come from get_output_embeddings(): FSMT returns the decoder input
# embeddings there, while its logits come from a separate output projection.
_LOGITS_MODULE = {"fsmt": "model.decoder.output_projection"}
_EXTRA_BIAS = ("final_logits_bias",)  # Marian/BART add this buffer to the logits


def read_config(directory: str | os.PathLike):
    """A model directory's ``config.json`` as a transformers config, refusing one that names custom code
    (``auto_map``: transformers would offer to run the directory's Python files; nothing read from a model may
    run code), and never trusting remote code."""
    from transformers import AutoConfig

    path = Path(directory) / "config.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
        raise WeightsError(f"{str(path)!r}: not a readable config.json ({first_line(err)})") from None
    if not isinstance(data, dict):
        raise WeightsError(f"{str(path)!r}: config.json holds no settings")
    if "auto_map" in data:
        raise WeightsError(f"{str(path)!r} names custom code (auto_map: {', '.join(map(str, data['auto_map']))}), "
                           "which transformers would run; argmaxable never runs a model's code: refused")
    try:
        return AutoConfig.from_pretrained(str(directory), trust_remote_code=False)
    except (ValueError, KeyError, OSError) as err:
        raise WeightsError(f"{str(path)!r}: {first_line(err)}") from None


def logits_names(config) -> tuple[list[str], list[str]]:
    """Candidate stored names of the logits weight and of the bias terms, from a meta-device model."""
    import torch
    import transformers

    arch = (getattr(config, "architectures", None) or [None])[0]
    cls = getattr(transformers, arch, None) if isinstance(arch, str) else None
    if cls is not None and not (isinstance(cls, type) and issubclass(cls, transformers.PreTrainedModel)):
        # only a model class is ever built from a config: never a function (transformers.pipeline) or a tool
        raise WeightsError(f"config.json names architecture {arch!r}, which is not a transformers model class")
    with torch.device("meta"):
        if cls is not None:
            model = cls(config)
        else:
            autos = (transformers.AutoModelForCausalLM, transformers.AutoModelForMaskedLM,
                     transformers.AutoModelForSeq2SeqLM)
            for auto in autos:
                try:
                    model = auto.from_config(config, trust_remote_code=False)
                    break
                except ValueError:
                    continue
            else:
                raise WeightsError(f"no language-model head known for model type {config.model_type!r}")
    modules = dict(model.named_modules())
    name = _LOGITS_MODULE.get(config.model_type)
    if name is None:
        head = model.get_output_embeddings()
        name = next((k for k, m in modules.items() if m is head), None) if head is not None else None
    if name is None or name not in modules:
        raise WeightsError(f"cannot find the output layer of {arch or config.model_type}")
    head = modules[name]
    prefix = f"{model.base_model_prefix}."

    def stored(param) -> list[str]:
        """Every name a (possibly tied) parameter may be stored under, incl. without the base prefix."""
        names = [k for k, p in model.named_parameters(remove_duplicate=False) if p is param]
        return names + [k[len(prefix):] for k in names if k.startswith(prefix)]

    weight = stored(head.weight)
    biases = []
    if getattr(head, "bias", None) is not None:
        biases.append(stored(head.bias))
    buffers = dict(model.named_buffers())
    biases += [[k] for k in _EXTRA_BIAS if k in buffers]
    return weight, biases


def choose(keys, candidates: list[list[str]], repo: str) -> list[str]:
    """For each list of candidate names, the first one the checkpoint holds."""
    chosen = []
    for names in candidates:
        key = next((k for k in names if k in keys), None)
        if key is None:
            raise WeightsError(f"{repo!r}: none of {names} in the checkpoint; keys found: "
                               f"{', '.join(sorted(keys)[:30])} ...")
        chosen.append(key)
    return chosen
