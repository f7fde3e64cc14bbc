"""Words of the text datasets, one definition for the families that read text (no torch).

The multi-label CNN encoder (:mod:`argmaxable.multilabel.encoders`) and the language model's corpus
(:mod:`argmaxable.lm.corpus`) split descriptions into the same words.
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
