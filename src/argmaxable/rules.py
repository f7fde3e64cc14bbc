"""Value rules for config keys, declared as data next to each schema (``RULES`` in the schema modules).

A rule is ``(description, predicate)``; a schema's ``RULES`` maps a dotted key pattern to a rule, where ``*``
matches any key of a mapping or any element of a list (``multilabel.runs.*.d.*``: every width of every run).
:func:`argmaxable.config.validate` applies them all before any job runs and names the first broken one in a line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

Rule = tuple[str, Callable[[Any], bool]]


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


POSITIVE: Rule = ("a number > 0", lambda v: _number(v) and v > 0 and v != float("inf"))
NON_NEGATIVE: Rule = ("a number >= 0", lambda v: _number(v) and 0 <= v < float("inf"))
AT_LEAST_ONE: Rule = ("an integer >= 1", lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1)
NON_EMPTY: Rule = ("a non-empty string", lambda v: isinstance(v, str) and v.strip() != "")


def one_of(options: Iterable[str]) -> Rule:
    options = tuple(options)
    return (f"one of {', '.join(options)}", lambda v: v in options)


def matches(tree: Any, pattern: str) -> list[tuple[str, Any]]:
    """(dotted key, value) of every entry of ``tree`` (plain dicts and lists) that ``pattern`` names."""
    out = [("", tree)]
    for part in pattern.split("."):
        nxt = []
        for key, node in out:
            if isinstance(node, dict):
                items = node.items() if part == "*" else ([(part, node[part])] if part in node else [])
            elif isinstance(node, list) and part == "*":
                items = enumerate(node)
            else:
                items = []
            nxt += [(f"{key}.{k}" if key else str(k), v) for k, v in items]
        out = nxt
    return out


def broken(tree: Any, rules: dict[str, Rule]) -> str | None:
    """The first broken rule as one line (``key = value: must be ...``), or None."""
    for pattern, (text, ok) in rules.items():
        for key, value in matches(tree, pattern):
            if value is not None and not ok(value):
                return f"invalid config value {key}={value!r}: must be {text}"
    return None
