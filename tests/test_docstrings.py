"""Every example in a docstring runs and prints what it shows."""

import doctest
import importlib
import pkgutil
from pathlib import Path

import pytest

import argmaxable


def _with_examples() -> list[str]:
    names = []
    for info in pkgutil.walk_packages(argmaxable.__path__, "argmaxable."):
        path = Path(info.module_finder.path, info.name.rsplit(".", 1)[-1])
        source = path / "__init__.py" if info.ispkg else path.with_suffix(".py")
        if ">>>" in source.read_text():
            names.append(info.name)
    return sorted(names)


MODULES = _with_examples()


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_hold(name):
    module = importlib.import_module(name)
    failed, attempted = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    assert attempted > 0 and failed == 0
