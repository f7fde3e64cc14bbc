"""The audit's token lists in the forms the generation stacks take them (:func:`export`): the tokens the prompting
test verified under-trained, and the tie members greedy decoding never emits (their group's lowest id emits for
them), for a user who wants them never sampled.

- ``transformers``: ``generate(suppress_tokens=[...])`` (their logits set to -inf at every step) and the same ids
  as ``bad_words_ids=[[id], ...]``, as JSON;
- ``llama.cpp``: one ``--logit-bias ID-inf`` argument per id, for ``llama-cli`` / ``llama-server``;
- ``vllm``: ``SamplingParams(logit_bias={id: -100.0})`` (-100 is the bound of the OpenAI-compatible API) and
  ``allowed_token_ids``, every other id of the vocabulary, as JSON.
"""

from __future__ import annotations

import json

STACKS = ("transformers", "llama.cpp", "vllm")
LISTS = ("under_trained_verified", "tie_never_emitted")  # the card's id lists an export carries
VLLM_BIAS = -100.0  # the most negative logit bias vLLM's OpenAI-compatible server accepts


def export_ids(card: dict) -> list[int]:
    """The ids an export suppresses: the verified under-trained tokens and the tie members greedy decoding never
    emits, in id order."""
    ids = card.get("ids") or {}
    return sorted({int(i) for key in LISTS for i in ids.get(key, [])})


def export(card: dict, stack: str) -> str:
    """The card's suppressed ids (:func:`export_ids`) in the form ``stack`` (:data:`STACKS`) takes them, with the
    lists they come from named (JSON forms) or commented (llama.cpp)."""
    if stack not in STACKS:
        raise ValueError(f"--export must be one of {', '.join(STACKS)}; got {stack!r}")
    ids = export_ids(card)
    lists = {key: [int(i) for i in (card.get("ids") or {}).get(key, [])] for key in LISTS}
    if stack == "transformers":
        return json.dumps({"model": card["model"], **lists, "suppress_tokens": ids,
                           "bad_words_ids": [[i] for i in ids]}, indent=1)
    if stack == "llama.cpp":
        head = (f"# {card['model']!r}: {len(lists['under_trained_verified'])} verified under-trained tokens, "
                f"{len(lists['tie_never_emitted'])} tie members greedy decoding never emits; one argument a line")
        return "\n".join([head.replace("\n", "\\n"), *(f"--logit-bias {i}-inf" for i in ids)])
    allowed = sorted(set(range(int(card["n"]))) - set(ids))
    return json.dumps({"model": card["model"], **lists, "logit_bias": {str(i): VLLM_BIAS for i in ids},
                       "allowed_token_ids": allowed})
