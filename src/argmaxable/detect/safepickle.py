"""Read plain data from a pickle without running any code it names.

A pickle runs code through every global it names (``os.system``, a class's ``__reduce__``, ...), so a model's
pickled files are never unpickled as they are. :func:`load_plain` reads one with an unpickler whose
``find_class`` refuses every global except the classes the caller names, and those become :class:`Record`,
an inert attribute bag of ours: building one only fills its ``__dict__`` with the pickled state (plain data:
dict, list, tuple, str, bytes, int, float, bool, None, which the pickle opcodes make without any global), and
nothing can change the class itself. Protocols 0 and 1 make such an instance through
``copyreg._reconstructor(cls, object, None)``, which is read as exactly that and nothing else. Persistent ids (how
torch files point at tensor storage) are refused too.
"""

from __future__ import annotations

import io
import os
import pickle
import pickletools
from collections.abc import Iterable
from pathlib import Path

from argmaxable.detect.weights import WeightsError


class _Inert(type):
    """The class of :class:`Record`: nothing may set or delete an attribute of the class itself (a pickle's BUILD
    on the class, not on an instance, would change it for every later load in the process)."""

    def __setattr__(cls, name, value):
        raise TypeError(f"refused to set {name!r} on the class {cls.__name__} (a pickle fills instances only)")

    def __delattr__(cls, name):
        raise TypeError(f"refused to delete {name!r} from the class {cls.__name__}")


class Record(metaclass=_Inert):
    """An object a pickle names by class: its pickled attributes and nothing else (no methods of its own)."""


# How protocols 0 and 1 pickle a plain instance: copyreg._reconstructor(cls, object, None), spelled either way.
_RECONSTRUCTOR = {("copyreg", "_reconstructor"), ("copy_reg", "_reconstructor")}
_OBJECT = {("builtins", "object"), ("__builtin__", "object")}


def _reconstruct(cls, base, state):
    """``copyreg._reconstructor`` for what protocols 0 and 1 write for a plain instance: an empty Record."""
    if cls is not Record or base is not object or state is not None:
        raise TypeError("refused copyreg._reconstructor other than for an allowed class over object")
    return Record.__new__(Record)


class _Restricted(pickle.Unpickler):
    def __init__(self, file, path: str, classes: frozenset[str]):
        super().__init__(file)
        self._path, self._classes = path, classes

    def find_class(self, module: str, name: str):
        if f"{module}.{name}" in self._classes:
            return Record
        if self._classes and (module, name) in _RECONSTRUCTOR:
            return _reconstruct
        if self._classes and (module, name) in _OBJECT:
            return object  # immutable and inert: only _reconstruct's second argument
        allowed = ", ".join(sorted(self._classes)) or "none"
        raise WeightsError(f"{self._path}: refused to unpickle global {module}.{name} (a pickle runs the code its "
                           f"globals name; classes read as plain records: {allowed})")

    def persistent_load(self, pid):
        raise WeightsError(f"{self._path}: refused a persistent id in the pickle (only plain data is read)")


def load_plain(path: str | os.PathLike, classes: Iterable[str] = ()) -> object:
    """The plain data in a pickle file; each object of a class in ``classes`` (``"module.Name"``) as a
    :class:`Record` holding its attributes.

    Raises
    ------
    WeightsError
        A missing file, a pickle naming any other global (``os.system``, ``builtins.eval``, a class not in
        ``classes``), a persistent id, or a file that is not a readable pickle (a count it claims beyond its
        bytes included: refused before anything is allocated for it).

    Examples
    --------
    >>> import pickle, tempfile, os
    >>> f = os.path.join(tempfile.mkdtemp(), "plain.pkl")
    >>> with open(f, "wb") as out:
    ...     pickle.dump({0: "SOS", 1: "EOS", 2: "who"}, out)
    >>> load_plain(f)
    {0: 'SOS', 1: 'EOS', 2: 'who'}
    """
    path = Path(path)
    if not path.is_file():
        raise WeightsError(f"pickle file {str(path)!r} does not exist")
    data = path.read_bytes()
    try:
        for _ in pickletools.genops(data):  # every count checked against the bytes there before the unpickler
            pass                            # allocates what it claims (a BINBYTES8 of 2^40)
        return _Restricted(io.BytesIO(data), str(path), frozenset(classes)).load()
    except WeightsError:
        raise
    except Exception as err:  # truncated or corrupt data, or a Record built with arguments
        msg = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise WeightsError(f"cannot read {str(path)!r} as plain pickled data: {msg}") from None


def attribute(obj: object, dotted: str, path: str | os.PathLike) -> object:
    """``obj.a.b`` (or ``obj["a"]["b"]`` through dicts) for ``dotted = "a.b"``; a one-line error if absent."""
    for part in [p for p in dotted.split(".") if p]:
        if isinstance(obj, dict) and part in obj:
            obj = obj[part]
        elif isinstance(obj, Record) and part in vars(obj):
            obj = vars(obj)[part]
        else:
            found = sorted(map(str, obj)) if isinstance(obj, dict) else (
                sorted(vars(obj)) if isinstance(obj, Record) else [])
            raise WeightsError(f"{str(path)!r}: no {part!r} in the pickled {type(obj).__name__}; found: "
                               f"{', '.join(found[:20]) or 'nothing'}")
    return obj
