"""Text, one definition for every family (no torch): the words of the text datasets, and text from models and
files escaped where it is written.

The multi-label CNN encoder (:mod:`argmaxable.multilabel.encoders`) and the language model's corpus
(:mod:`argmaxable.lm.corpus`) split descriptions into the same words. Token, model and node names reach the
terminal through :func:`printable`, Markdown tables through :func:`markdown_table` and CSV files through
:func:`csv_frame` (:func:`argmaxable.provenance.write_table` applies both to every table it writes).
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


# Text from models and files (token names, model names, node names) written into terminals, Markdown and CSV: each
# escaped where it is written, so that it shows as the text it is and never acts (no terminal escape, no HTML, no
# new table cell or row, no spreadsheet formula).
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_MARKDOWN = {"&": "&amp;", "<": "&lt;", ">": "&gt;", "|": "&#124;", "\\": "&#92;", "[": "&#91;", "]": "&#93;",
             "`": "&#96;"}
_MARKUP = re.compile("[" + re.escape("".join(_MARKDOWN)) + "]")
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")  # what makes a spreadsheet read a cell as a formula


def printable(text: str) -> str:
    """``text`` with control characters (terminal escapes, line breaks) shown as ``\\xNN``: one inert line.

    Examples
    --------
    >>> printable("head \\x1b[31mred\\x1b[0m\\n")
    'head \\\\x1b[31mred\\\\x1b[0m\\\\x0a'
    """
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", str(text))


def markdown_cell(text) -> str:
    """``text`` for a Markdown table cell: HTML and the characters that make links, code or cells (``& < > | \\
    [ ] ```) as character references, control characters as ``\\xNN``: it renders as the text it is, in one cell.

    Examples
    --------
    >>> markdown_cell('"><img src=x onerror=alert(1)> | a\\nb')
    '"&gt;&lt;img src=x onerror=alert(1)&gt; &#124; a\\\\x0ab'
    """
    return printable(_MARKUP.sub(lambda m: _MARKDOWN[m.group()], str(text)))


def markdown_table(df, **kwargs) -> str:
    """``df.to_markdown(index=False, **kwargs)`` with every text cell and column name through :func:`markdown_cell`."""
    out = df.copy()
    for col in out.columns:
        if out[col].dtype == object or str(out[col].dtype) in ("string", "str"):
            out[col] = [v if v is None or (isinstance(v, float) and v != v) else markdown_cell(v) for v in out[col]]
    out.columns = [markdown_cell(c) for c in out.columns]
    return out.to_markdown(index=False, **kwargs)


def csv_cell(value):
    """A text cell that a spreadsheet shows as the text it is: one starting with ``= + - @``, a tab or a carriage
    return (a formula to a spreadsheet), or with ``'``, gets a leading ``'`` (:func:`csv_uncell` takes it off).

    Examples
    --------
    >>> csv_cell('=HYPERLINK("http://x")'), csv_cell("-ing"), csv_cell("the")
    ('\\'=HYPERLINK("http://x")', "'-ing", 'the')
    """
    return "'" + value if isinstance(value, str) and value.startswith((*FORMULA_STARTS, "'")) else value


def csv_uncell(value):
    """The text :func:`csv_cell` was given."""
    return value[1:] if isinstance(value, str) and value.startswith("'") and value[1:2] and value[1] in (
        *FORMULA_STARTS, "'") else value


def csv_frame(df, cell=csv_cell):
    """A copy of ``df`` with every text column's cells through ``cell`` (:func:`csv_cell` to write a CSV,
    :func:`csv_uncell` after reading one)."""
    out = df.copy()
    for col in out.columns:
        if out[col].dtype == object or str(out[col].dtype) in ("string", "str"):
            out[col] = out[col].map(cell)
    return out
