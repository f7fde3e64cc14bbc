"""Text helpers (no torch): the words of the text datasets, and token names shown safely.

The multi-label CNN encoder (:mod:`argmaxable.multilabel.encoders`) and the language model's corpus
(:mod:`argmaxable.lm.corpus`) split descriptions into the same words (:func:`tokenize`). Token names come from
model files and may hold anything: :func:`markdown_cell` escapes them for Markdown, :func:`shown` for a terminal.
"""

from __future__ import annotations

import re

_WORD = re.compile(r"[a-z0-9]+(?:[-_.+][a-z0-9]+)*")  # words, keeping package-style names like lib-foo2.0


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens (CAML lower-cases and keeps alphanumeric tokens).

    Examples
    --------
    >>> tokenize("Python bindings for libfoo2.0")
    ['python', 'bindings', 'for', 'libfoo2.0']
    """
    return _WORD.findall(text.lower())


_MARKDOWN = re.compile(r"([\\`*_\[\]<>|#&])")


def markdown_cell(text: str) -> str:
    r"""``text`` safe inside a Markdown paragraph or table cell: markup characters backslash-escaped (``<`` and ``&``
    as entities, so no HTML passes through), line breaks and other control characters written as escapes.

    Examples
    --------
    >>> print(markdown_cell("a|b <script>\nx_1"))
    a\|b &lt;script&gt;\\nx\_1
    """
    text = "".join(ch if ch.isprintable() or ch == " " else ch.encode("unicode_escape").decode() for ch in text)
    return _MARKDOWN.sub(lambda m: {"<": "&lt;", ">": "&gt;", "&": "&amp;"}.get(m.group(1), "\\" + m.group(1)), text)


def shown(token: str) -> str:
    r"""A token as a card or a terminal shows it: as is, or quoted with escapes where it is empty, has leading or
    trailing white space, or holds characters that print nothing.

    Examples
    --------
    >>> print(shown("<file_sep>"), shown(" with"), shown("a\nb"))
    <file_sep> ' with' 'a\nb'
    """
    plain = token != "" and token == token.strip() and all(ch.isprintable() for ch in token)
    return token if plain else repr(token)
