"""The token audit verified by the model itself (argmaxable.audit.roundtrip, .prompting, .export) and a card a
person can read: the round trip on tokenizers built here (a token that encodes back to other ids is found), the
prompting test on a tiny transformers model built here (a planted row inside the hull is certified unargmaxable,
never the greedy argmax, and under 0.01; its probabilities match a plain forward pass without the shared cache),
the contradiction check on a loader made to lie, the exports against transformers' own ``generate``, and the
Markdown card of a head with a tie group of 2,000 rows."""

from __future__ import annotations

import json
import re
import shlex

import numpy as np
import pandas as pd
import pytest
import torch

from argmaxable.audit import audit_layer, write_audit
from argmaxable.audit.card import html_page, markdown, md
from argmaxable.audit.export import export
from argmaxable.audit.prompting import Contradiction, forbidden_tokens, prompt_test, select_candidates
from argmaxable.audit.roundtrip import BYTE_LEVEL, round_trip
from argmaxable.detect.loaders import Layer

# The prompting test passes its key-value cache under the name the installed transformers takes (its 5.x releases
# warn on every forward pass given the older one, into the user's terminal).
pytestmark = pytest.mark.filterwarnings("error:`past_key_values` is deprecated:FutureWarning")


def fast_tokenizer(vocab: dict, merges: list, byte_level: bool = False, special=()):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    if byte_level:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok)
    if special:
        fast.add_special_tokens({"additional_special_tokens": list(special)})
    return fast


def test_round_trip_finds_a_token_no_text_encodes_to():
    """'ba' is in the vocabulary but no merge makes it: decoded, it encodes back to 'b' 'a' (ids 1 0); the merged
    'ab' and the letters round-trip; a special token is special."""
    vocab = {"a": 0, "b": 1, "ab": 2, "ba": 3, "c": 4}
    tok = fast_tokenizer(vocab, [("a", "b")], special=["<ctl>"])
    trip = round_trip(tok, len(tok))
    cls = dict(zip(trip["category"], trip["round_trip"], strict=True))
    assert cls == {0: "round-trips", 1: "round-trips", 2: "round-trips", 3: "unreachable", 4: "round-trips",
                   5: "special/control"}
    assert trip.loc[3, "returned"] == "1 0" and trip.loc[2, "returned"] == ""


def test_round_trip_tells_single_bytes_and_partial_utf8_in_byte_level_bpe():
    """Byte-level BPE (every byte a character of GPT-2's alphabet): the lone byte 0xC3 is a single byte, the pair
    0xE2 0x82 (two thirds of '€') a partial UTF-8 sequence, 'ab' round-trips; GPT-2's alphabet is the one
    transformers' own byte-level tables use."""
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    assert {v: k for k, v in bytes_to_unicode().items()} == BYTE_LEVEL
    alphabet = sorted(BYTE_LEVEL, key=BYTE_LEVEL.get)
    euro = "".join(alphabet[b] for b in "€".encode()[:2])
    vocab = {c: i for i, c in enumerate(alphabet)}
    vocab |= {"ab": 256, euro: 257}
    tok = fast_tokenizer(vocab, [("a", "b"), (euro[0], euro[1])], byte_level=True)
    trip = round_trip(tok, 258)
    cls = trip.set_index("category")["round_trip"]
    assert cls[256] == "round-trips" and cls[257] == "partial UTF-8" and cls[0xC3] == "single byte"
    assert cls[ord("a")] == "round-trips"


def tiny_lm(n=64, d=16, seed=0, scale=2.0):
    """A one-layer Llama model of n tokens, untied head rows N(0, scale)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=n, hidden_size=d, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2, tie_word_embeddings=False,
                         max_position_embeddings=64)
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():
        model.lm_head.weight.normal_(0, scale)
    return model


def head(model) -> np.ndarray:
    return model.lm_head.weight.detach().double().numpy().copy()


def plant_centroid(model, t: int) -> None:
    """Row t set to the mean of the others (float32): strictly inside their hull."""
    with torch.no_grad():
        W = model.lm_head.weight
        others = torch.cat([W[:t], W[t + 1 :]])
        W[t] = others.mean(dim=0)


PROMPTS = {"copy": [[1, 2, 3], [5, 6], [5, 7]], "plain": [[4, 4], [9]]}


def plain_max_prob(model, parts, token: int, steps: int) -> float:
    """The candidate's largest probability over the greedy steps, by whole forward passes without any cache."""
    seq = [*parts[0], *[i for p in parts[1:] for i in (token, *p)]]
    best = 0.0
    with torch.no_grad():
        for _ in range(steps):
            logits = model(input_ids=torch.tensor([seq]), use_cache=False).logits[0, -1].double()
            best = max(best, float(torch.softmax(logits, -1)[token]))
            seq.append(int(logits.argmax()))
    return best


def test_a_planted_row_is_certified_never_the_greedy_argmax_and_under_trained():
    """Row 13 of a tiny model's head is the mean of the others: the audit certifies it unargmaxable, the model never
    makes it the greedy argmax (the check at every position raises otherwise), and its largest probability stays
    below 0.01: under-trained (verified); the probabilities from the shared cache equal plain forward passes."""
    model = tiny_lm()
    plant_centroid(model, 13)
    layer = Layer(head(model), None, "tiny", tokens=[f"t{i}" for i in range(64)], token_types=["normal"] * 64,
                  precision="float32")
    audit = audit_layer(layer, hardest=2, refine=8, workers=1)
    status = audit.result.status
    assert status[13] == "unargmaxable" and (np.delete(status, 13) == "argmaxable").all()
    forbidden = forbidden_tokens(status, [])
    candidates = pd.DataFrame({"category": [13, 20, 40], "reason": ["unargmaxable", "control", "control"]})
    run = prompt_test(model, PROMPTS, candidates, forbidden, steps=3, batch=2, W=layer.W)
    table = run.table.set_index("category")
    assert bool(table.loc[13, "under_trained"]) and table.loc[13, "max_prob"] < 0.01
    assert not table.loc[13, "greedy_emitted"]
    assert run.positions == 5 + 3 * (6 + 2 + 2 + 2) and run.rounding == 0 and run.head_difference == 0
    for t in (13, 20, 40):
        want = max(plain_max_prob(model, parts, t, 3) for parts in PROMPTS.values())
        assert table.loc[t, "max_prob"] == pytest.approx(want, rel=1e-5, abs=1e-12)


def test_the_contradiction_check_fires_on_a_loader_that_lies():
    """The audited head has row 7 at the others' mean (certified unargmaxable), the model's own row 7 is 6 times
    its largest row (it wins everywhere): the prompting test stops with the token, the prompt and both logits."""
    model = tiny_lm(seed=1)
    honest = head(model)
    lie = honest.copy()
    lie[7] = np.delete(honest, 7, axis=0).mean(axis=0)
    audit = audit_layer(Layer(lie, None, "lying loader", precision="float64"), hardest=1, refine=4, workers=1)
    assert audit.result.status[7] == "unargmaxable"
    with torch.no_grad():
        model.lm_head.weight[7] = 6 * model.lm_head.weight[int(np.linalg.norm(honest, axis=1).argmax())]
    candidates = pd.DataFrame({"category": [3], "reason": ["control"]})
    with pytest.raises(Contradiction, match=r"token 7 .*certified unargmaxable.*greedy argmax at position \d+ of the "
                                            r"'copy' prompt.*its logit [-\d.e]+ \(float64 .*best other, token \d+"):
        prompt_test(model, PROMPTS, candidates, forbidden_tokens(audit.result.status, []), steps=2)


def test_a_tie_is_never_a_contradiction():
    """Rows 5 and 9 equal and far out: greedy decoding emits 5 on their tie (allowed: no position counted); with 5
    forbidden too, it comes first at some positions, yet row 9 is as high there: counted as a tie, never a
    contradiction (no row of a tie wins strictly)."""
    model = tiny_lm(seed=2)
    with torch.no_grad():
        W = model.lm_head.weight
        W[5] = 4 * W[int(W.norm(dim=1).argmax())]
        W[9] = W[5]
    status = np.full(64, "argmaxable", dtype=object)
    status[[5, 9]] = "unargmaxable"
    candidates = pd.DataFrame({"category": [3], "reason": ["control"]})
    run = prompt_test(model, PROMPTS, candidates, forbidden_tokens(status, [5]), steps=2)
    assert run.rounding == 0 and bool(run.table["greedy_emitted"].iloc[0]) is False
    strict = prompt_test(model, PROMPTS, candidates, forbidden_tokens(status, []), steps=2)
    assert 0 < strict.rounding <= strict.positions


def test_the_prompting_test_resumes_from_its_state(tmp_path):
    model = tiny_lm(seed=3)
    candidates = pd.DataFrame({"category": [1, 2, 3, 4], "reason": "control"})
    state = tmp_path / "state.parquet"
    first = prompt_test(model, PROMPTS, candidates.iloc[:2], np.zeros(64, bool), state=state, steps=2)
    again = prompt_test(model, PROMPTS, candidates, np.zeros(64, bool), state=state, steps=2)
    assert first.resumed == 0 and again.resumed == 2 and again.runs == 2 * len(PROMPTS)
    fresh = prompt_test(model, PROMPTS, candidates, np.zeros(64, bool), steps=2)
    assert again.positions == fresh.positions and again.summary()["seconds_per_token"] > 0
    # the resumed run scores its new prompts in batches of another size than the fresh one: torch's kernels may
    # change the last bits; the rows read back from the state are the first run's exactly
    np.testing.assert_allclose(again.table["max_prob"], fresh.table["max_prob"], rtol=1e-4)
    np.testing.assert_array_equal(again.table["max_prob"].to_numpy()[:2], first.table["max_prob"].to_numpy())
    other = prompt_test(model, PROMPTS, candidates, np.zeros(64, bool), state=state, steps=3)
    assert other.resumed == 0  # other steps: nothing read back


def test_candidates_are_each_signals_share_the_unargmaxable_outside_ties_and_controls():
    n = 100
    tokens = pd.DataFrame({"category": np.arange(n), "token_type": "normal", "tie_group": -1,
                           "flag_indicator": False, "flag_norm": False, "flag_radius": False,
                           "flag_unargmaxable": False, "flag_tie": False})
    tokens.loc[[1, 2], "flag_norm"] = True
    tokens.loc[[2, 3], "flag_radius"] = True
    tokens.loc[[4, 5], "flag_unargmaxable"] = True
    tokens.loc[5, "tie_group"] = 5
    tokens.loc[5, "flag_tie"] = True
    got = select_candidates(tokens, controls=10, seed=0)
    reasons = dict(zip(got["category"], got["reason"], strict=True))
    assert reasons[1] == "norm" and reasons[2] == "norm,radius" and reasons[3] == "radius"
    assert reasons[4] == "unargmaxable" and 5 not in reasons
    assert sum(r == "control" for r in reasons.values()) == 10
    assert not {1, 2, 3, 4, 5} & {c for c, r in reasons.items() if r == "control"}


def test_exports_suppress_the_tokens_in_transformers_generate():
    """Token 11 dominates a tiny model's head (greedy decoding emits it at every step); the transformers export's
    suppress_tokens and bad_words_ids, given to transformers' own generate, keep it out; the llama.cpp and vLLM
    forms carry the same ids."""
    model = tiny_lm(seed=4)
    with torch.no_grad():
        W = model.lm_head.weight
        W[11] = 5 * W[int(W.norm(dim=1).argmax())]
    card = {"model": "tiny", "n": 64, "ids": {"under_trained_verified": [11], "tie_never_emitted": [30, 31]}}
    form = json.loads(export(card, "transformers"))
    assert form["suppress_tokens"] == [11, 30, 31] and form["bad_words_ids"] == [[11], [30], [31]]
    prompt = torch.tensor([[1, 2, 3]])
    plain = model.generate(prompt, max_new_tokens=6, do_sample=False, pad_token_id=0)[0, 3:].tolist()
    assert 11 in plain
    for kwargs in ({"suppress_tokens": form["suppress_tokens"]}, {"bad_words_ids": form["bad_words_ids"]}):
        out = model.generate(prompt, max_new_tokens=6, do_sample=False, pad_token_id=0, **kwargs)[0, 3:].tolist()
        assert not {11, 30, 31} & set(out)
    lines = export(card, "llama.cpp").splitlines()
    assert lines[0].startswith("#") and lines[1:] == ["--logit-bias 11-inf", "--logit-bias 30-inf",
                                                      "--logit-bias 31-inf"]
    vllm = json.loads(export(card, "vllm"))
    assert vllm["logit_bias"] == {"11": -100.0, "30": -100.0, "31": -100.0}
    assert vllm["allowed_token_ids"] == sorted(set(range(64)) - {11, 30, 31})
    with pytest.raises(ValueError, match=r"--export must be one of transformers, llama\.cpp, vllm"):
        export(card, "onnx")


def test_a_tie_group_of_2000_rows_keeps_every_markdown_line_short(tmp_path):
    """2,000 equal rows (names long and full of Markdown), a few more rows: the Markdown card summarises the group
    (its size, a sample by name, what greedy decoding emits), no line over 400 characters; the JSON lists every
    member; the HTML card pages them."""
    rng = np.random.default_rng(5)
    W = rng.normal(size=(2040, 3))
    W[:2000] = W[2000:].mean(axis=0)  # strictly inside the hull of the other 40
    tokens = [f"{'|**x**' * 40}{i}" for i in range(2040)]
    layer = Layer(W, None, "big tie", tokens=tokens, token_types=["normal"] * 2040, precision="float64")
    audit = audit_layer(layer, hardest=2, refine=8, workers=1)
    card = audit.card
    text = markdown(card)
    assert max(len(line) for line in text.splitlines()) <= 400
    group = card["tie_groups"][0]
    assert group["size"] == 2000 and [m["id"] for m in group["members"]] == list(range(2000))
    assert "| 1 | 2000 | 0 " in text and "and 1995 more" in text
    page = html_page(card)
    assert page.count("<details") >= 10 and "rows 1-200 of 2000" in page


def test_the_markdown_card_escapes_names_and_quotes_its_commands(tmp_path):
    """A model path with a newline, a fence and an <img onerror> (and a $(...) the shell would run), tokens that
    would be a bare-URL autolink and bold: the .md card shows each as text, its code fences hold, and the verify
    commands split back into the path as it is."""
    rng = np.random.default_rng(9)
    W = rng.normal(size=(30, 3))
    W[4] = W[3]
    tokens = [f"t{i}" for i in range(30)]
    tokens[3], tokens[4] = "http://evil.example/x", "**bold** _it_"
    layer = Layer(W, None, "hostile", tokens=tokens, token_types=["normal"] * 30, precision="float64")
    audit = audit_layer(layer, name="m\n```\n<img src=x onerror=alert(1)>", hardest=1, refine=4, workers=1)
    model = "dir/$(touch pwned)\n```\n<img src=x onerror=alert(1)>.gguf"
    paths = write_audit(audit, tmp_path / "card", W, model=model)
    text = paths["md"].read_text()
    outside, code, fence = [], [], None  # the lines outside code fences, as CommonMark reads them, and inside
    for line in text.splitlines():
        if fence is None and line.startswith("```"):
            fence = re.match("`+", line).group()
        elif fence is not None and re.fullmatch(f"{fence}`*", line):
            fence = None
        else:
            (code if fence else outside).append(line)
    assert fence is None and len(code) >= 3
    rendered = "\n".join(outside)
    assert "<img" not in rendered and "http://evil" not in rendered and "**bold**" not in rendered
    assert "http:&#47;&#47;evil" in rendered and "&#42;&#42;bold&#42;&#42;" in rendered
    assert [line for line in code if line.startswith("argmaxable verify")] == code[-2:]
    card = json.loads(paths["json"].read_text())
    for command in card["evidence"].values():
        words = shlex.split(command.replace("$'", "'"))  # $'...' is bash's; shlex reads its plain quoting
        assert len(words) == 4 and "\n" not in command
    assert shlex.split(f"argmaxable verify {shlex.quote('a b$(x)')}") == ["argmaxable", "verify", "a b$(x)"]
    assert md("x_j **y** a@b.c www.z") == "x&#95;j &#42;&#42;y&#42;&#42; a&#64;b.c www&#46;z"
    headings = [line for line in text.splitlines() if line.startswith("#")]
    assert headings[0].startswith("# Token audit: m\\x0a&#96;&#96;&#96;\\x0a&lt;img")
    assert all(re.fullmatch(r"## [A-Z][\w -]+", line) for line in headings[1:])


def char_tokenizer():
    """A BPE tokenizer of the 95 printable ASCII characters (ids 0-94), the merge 'ab' (95), and 'ba' (96), which
    no merge makes; 100 ids with the head's padding rows."""
    chars = [chr(c) for c in range(32, 127)]
    vocab = {c: i for i, c in enumerate(chars)} | {"ab": 95, "ba": 96}
    return fast_tokenizer(vocab, [("a", "b")])


def test_the_audit_runs_the_model_and_its_card_carries_every_verified_field(tmp_path):
    """audit_layer with the model and its tokenizer: the round trip finds 'ba' unreachable, the prompting test finds
    the planted row under-trained, the card names it in every form (flagged rows by name, precision and recall of
    each signal, the ids the exports carry), no Markdown line over 400 characters."""
    tok = char_tokenizer()
    model = tiny_lm(n=100, seed=6)
    plant_centroid(model, 60)
    names = [*tok.convert_ids_to_tokens(list(range(97))), "", "", ""]
    layer = Layer(head(model), None, "tiny char model", tokens=names, token_types=["normal"] * 100,
                  precision="float32")
    audit = audit_layer(layer, hardest=2, refine=8, workers=1, tokenizer=tok, model=model, controls=5, steps=2,
                        state=tmp_path / "state.parquet")
    card = audit.card
    assert card["round_trip"]["classes"]["unreachable"]["tokens"] == 1
    b, a = tok.convert_tokens_to_ids(["b", "a"])
    assert card["round_trip"]["examples"]["unreachable"][0] == {"id": 96, "token": "ba", "returned": f"{b} {a}"}
    assert card["round_trip"]["classes"]["special/control"]["tokens"] == 3  # the padding rows
    p = card["prompting"]
    assert p["controls"]["tested"] == 5 and p["candidates"]["tested"] >= 3 and p["head_difference"] == 0
    assert 60 in card["ids"]["under_trained_verified"] and card["ids"]["unargmaxable"] == [60]
    row = next(r for r in card["flagged"] if r["id"] == 60)
    assert row["verdict"] == "unargmaxable" and row["under_trained"] is True and row["max_prob"] < 0.01
    assert {"radius_at_least", "radius_at_most", "tie_group", "signals", "round_trip", "max_prob"} <= set(row)
    assert [s["signal"] for s in p["signals_at_share"]] == ["certified radius", "row norm", "indicator"]
    assert audit.tokens.loc[60, "round_trip"] == "round-trips" and audit.tokens.loc[96, "round_trip"] == "unreachable"
    text = markdown(card)
    assert "## Prompting test" in text and "## Tokenizer round trip" in text and "## Flagged tokens" in text
    assert max(len(line) for line in text.splitlines()) <= 400
    assert json.loads(export(card, "transformers"))["under_trained_verified"] == card["ids"]["under_trained_verified"]


def test_cli_audit_prompt_refuses_an_architecture_transformers_does_not_run(tmp_path, capsys):
    import gguf

    from argmaxable.cli import main

    W = np.random.default_rng(0).normal(size=(40, 8)).astype(np.float32)
    writer = gguf.GGUFWriter(str(tmp_path / "m.gguf"), "rwkv6")
    writer.add_tensor("token_embd.weight", W)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    argv = ["audit", str(tmp_path / "m.gguf"), "--prompt", "--out", str(tmp_path / "card"), "--workers", "1"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "transformers cannot run a GGUF model of architecture 'rwkv6'" in err[0]
    assert not list(tmp_path.glob("card*"))


def write_llama_gguf(path, model, tokens: list[str], types: list[int], merges: list[str]):
    """A whole llama-architecture GGUF file (F32) of a transformers Llama model: its metadata, a byte-level BPE
    tokenizer and every tensor under llama.cpp's names."""
    import gguf

    config = model.config
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    writer.add_rope_dimension_count(config.hidden_size // config.num_attention_heads)
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_bos_token_id(len(tokens) - 1)
    writer.add_eos_token_id(len(tokens) - 1)
    names = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
             "lm_head.weight": "output.weight"}
    parts = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
             "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output", "post_attention_layernorm": "ffn_norm",
             "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
    for key, value in model.state_dict().items():
        name = names.get(key)
        if name is None:
            layer, rest = key.removeprefix("model.layers.").split(".", 1)
            name = f"blk.{layer}.{parts[rest.removesuffix('.weight')]}.weight"
        writer.add_tensor(name, value.detach().numpy().astype(np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_cli_audit_prompt_runs_a_whole_gguf_model(tmp_path, capsys):
    """`argmaxable audit MODEL.gguf --prompt` on a whole GGUF file written here (byte-level BPE, one layer): the
    head transformers runs is the one the audit read (difference 0), the planted row comes out unargmaxable and
    under-trained (verified) with no contradiction, the exports carry it, every Markdown line stays short."""
    from argmaxable.cli import main

    alphabet = sorted(BYTE_LEVEL, key=BYTE_LEVEL.get)
    tokens = [*alphabet, "ab", "<|endoftext|>"]
    types = [1] * 257 + [3]  # normal, and one control token
    model = tiny_lm(n=len(tokens), seed=7)
    plant_centroid(model, 200)
    path = write_llama_gguf(tmp_path / "tiny.gguf", model, tokens, types, ["a b"])
    prefix = tmp_path / "card"
    argv = ["audit", str(path), "--prompt", "--out", str(prefix), "--controls", "5", "--workers", "1",
            "--hardest", "2", "--no-progress", "--export", "transformers", "--export", "llama.cpp"]
    assert main(argv) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "prompting test: " in out and "0 contradictions" in out and "greedy decoding never emits it" in out
    card = json.loads((tmp_path / "card.json").read_text())
    p = card["prompting"]
    assert p["head_difference"] == 0 and p["controls"]["tested"] == 5 and p["positions_checked"] > 0
    assert card["ids"]["unargmaxable"] == [200] and 200 in card["ids"]["under_trained_verified"]
    assert card["round_trip"]["classes"]["special/control"]["tokens"] == 1
    assert card["round_trip"]["classes"]["single byte"]["tokens"] == 128  # the bytes 0x80-0xFF alone
    assert json.loads((tmp_path / "card.transformers.json").read_text())["suppress_tokens"] == \
        card["ids"]["under_trained_verified"]
    assert "--logit-bias 200-inf" in (tmp_path / "card.llama.cpp.txt").read_text().splitlines()
    assert max(len(line) for line in (tmp_path / "card.md").read_text().splitlines()) <= 400
