"""Value rules for config keys, declared as data next to each schema (``RULES`` in the schema modules).

A rule is ``(description, predicate)``; a schema's ``RULES`` maps a dotted key pattern to a rule, where ``*``
matches any key of a mapping or any element of a list (``multilabel.runs.*.d.*``: every width of every run).
:func:`argmaxable.config.validate` applies them all before any job runs and names the first broken one in a line.

Below every family (which read their settings through :func:`typed`) and below :mod:`argmaxable.config` (which
composes their schemas): the families never import the config module, so no package imports one above it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import PurePosixPath
from typing import Any, TypeVar

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

Rule = tuple[str, Callable[[Any], bool]]
# A check across keys (a value that must name another key of the tree, a list that must hold another's values):
# the plain tree in, one line out where it is broken (None where it holds). Declared beside the value rules
# (``CHECKS`` in the schema modules), run after them by :func:`argmaxable.config.validate`.
Check = Callable[[dict], "str | None"]


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


POSITIVE: Rule = ("a number > 0", lambda v: _number(v) and v > 0 and v != float("inf"))
NON_NEGATIVE: Rule = ("a number >= 0", lambda v: _number(v) and 0 <= v < float("inf"))
AT_LEAST_ONE: Rule = ("an integer >= 1", lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1)
NON_EMPTY: Rule = ("a non-empty string", lambda v: isinstance(v, str) and v.strip() != "")
SHARE: Rule = ("a share in (0, 1]", lambda v: _number(v) and 0 < v <= 1)
PERCENTILE: Rule = ("a percentile in [0, 100]", lambda v: _number(v) and 0 <= v <= 100)


def one_of(options: Iterable[str], fold_case: bool = False) -> Rule:
    options = tuple(options)
    return (f"one of {', '.join(options)}", lambda v: (str(v).lower() if fold_case else v) in options)


def _parts(v) -> tuple[str, ...]:
    return PurePosixPath(v.replace("\\", "/")).parts if isinstance(v, str) else ()


# A key used as one directory name (data/models/<key>, results/.../<key>): no separator, never "." or "..".
NAME: Rule = ("a plain name (letters, digits, '_', '-', '.'; not '.' or '..')",
              lambda v: isinstance(v, str) and re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", v) is not None
              and v not in (".", ".."))
# A file name inside a directory: relative, without '..' (empty: the default).
INSIDE: Rule = ("a relative path without '..' (it names a file inside its directory)",
                lambda v: isinstance(v, str) and not v.startswith(("/", "\\", "~")) and ":" not in v
                and ".." not in _parts(v))
# A directory the pipeline writes into or replaces: not the filesystem root, no '..'.
DIRECTORY: Rule = ("a non-empty directory path other than '/', without '..'",
                   lambda v: isinstance(v, str) and v.strip() != "" and ".." not in _parts(v)
                   and PurePosixPath(v).parts not in (("/",), ("//",)) and v.strip("/") != "")
SHA256: Rule = ("empty or 64 hexadecimal digits (a SHA-256)",
                lambda v: isinstance(v, str) and re.fullmatch(r"([0-9a-fA-F]{64})?", v) is not None)


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


def broken(tree: Any, rules: dict[str, Rule], key_rules: dict[str, Rule] | None = None) -> str | None:
    """The first broken rule as one line (``key = value: must be ...``), or None. ``key_rules`` apply to the keys
    of the mappings their patterns name (``model``: every model's key, a directory name)."""
    for pattern, (text, ok) in (key_rules or {}).items():
        for where, node in matches(tree, pattern):
            bad = next((k for k in node if not ok(k)), None) if isinstance(node, dict) else None
            if bad is not None:
                return f"invalid config key {where}.{bad!r}: must be {text}"
    for pattern, (text, ok) in rules.items():
        for key, value in matches(tree, pattern):
            if value is not None and not ok(value):
                return f"invalid config value {key}={value!r}: must be {text}"
    return None


def first_failed(tree: dict, checks: Iterable[Check]) -> str | None:
    """The first broken cross-key check's line, or None."""
    return next((line for check in checks if (line := check(tree)) is not None), None)


class ConfigError(ValueError):
    """A user-facing configuration error; its message is one line naming the offending key."""


Schema = TypeVar("Schema")


def typed(schema: type[Schema], value: Schema | Mapping) -> Schema:
    """``value`` as the schema's dataclass: an instance as it is, a mapping (a rule's plain params) merged over
    the schema's defaults and type-checked, so that family entry points read attributes, not string keys.

    Examples
    --------
    >>> from argmaxable.theory.schema import RegionsConfig
    >>> typed(RegionsConfig, {"max_n": 4, "bound": 100}).bound
    100.0
    """
    if isinstance(value, schema):
        return value
    try:
        return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(schema), value))  # type: ignore[return-value]
    except OmegaConfBaseException as err:
        key = getattr(err, "full_key", None) or "?"
        raise ConfigError(f"invalid {schema.__name__} key '{key}': {one_line(err)}") from None


def one_line(err: Exception) -> str:
    """Reduce a Hydra/OmegaConf exception to its first meaningful line."""
    text = str(err).strip()
    first = text.splitlines()[0] if text else type(err).__name__
    if "Could not find" in first:
        # Hydra lists the available options on the following lines; keep them on the same line.
        lines = text.splitlines()[1:]
        end = next((i for i, ln in enumerate(lines) if ln.startswith("Config search path")), len(lines))
        options = [ln.strip() for ln in lines[:end] if ln.startswith("\t")]
        if options:
            first += f" (available: {', '.join(options)})"
    return first
