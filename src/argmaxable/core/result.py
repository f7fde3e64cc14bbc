"""The result of a check: one row per item (category or label assignment), with its evidence."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from argmaxable.witness_paths import WitnessPaths, from_members, matching, replay

ARGMAXABLE, UNARGMAXABLE, UNDECIDED = "argmaxable", "unargmaxable", "undecided"
STATUSES = (ARGMAXABLE, UNARGMAXABLE, UNDECIDED)


def _kinds() -> tuple[str, ...]:
    """The result kinds, the questions' (imported when first needed: the questions' modules import this one)."""
    from argmaxable.core.questions import KINDS

    return KINDS


def answer_column(threshold: str) -> str:
    """The table column of the answers at a threshold: eps_argmaxable, one_argmaxable (radius > 1), or
    ``argmaxable_at_<threshold>`` for any other (never shown as one of the two)."""
    return {"eps": "eps_argmaxable", "1": "one_argmaxable"}.get(threshold, f"argmaxable_at_{threshold}")


class ExactRecord(NamedTuple):
    """The rational evidence of one item the exact stage settled (:mod:`argmaxable.core.exact`); every rational is
    a string "p/q" (or "p") of decimal integers, as :class:`fractions.Fraction` reads it.

    decided : "radius" or "region"
        Which questions it decided: "radius", the item's status and answers (radius > eps, > each threshold) and
        its region; "region", its region alone (the status stands on the float stages' evidence, or is
        undecided).
    region : "yes", "no" or ""
        Whether ``{x in box : A x + c < 0}`` is non-empty (radius > 0, the norm-free question); "" where the
        stage decided the status within its budget but not the region (``decided == "radius"`` only).
    witness : tuple of str, or None
        A rational point (one value per column of the item's system) inside the region, where it is non-empty.
    rows : tuple of int
        Rows of the dual weights, named as the result's certificates name theirs.
    weights : tuple of str
        Non-negative dual weights over ``rows``.
    """

    decided: str
    region: str
    witness: tuple | None
    rows: tuple
    weights: tuple


@dataclass
class CheckResult:
    """Verdicts aligned with the items checked.

    Attributes
    ----------
    kind : str
        The question (:data:`argmaxable.core.questions.KINDS`): "categories", "assignments", "top-m sets",
        "top-k rankings" or "prescribed probabilities".
    items : ndarray of int, shape (k,)
        Category indices (categories) or row numbers of Y (assignments).
    status : ndarray of str, shape (k,)
        "argmaxable", "unargmaxable" or "undecided" (numerical trouble; the message says why).
    radius : ndarray of float, shape (k,)
        A certified lower bound on the Chebyshev radius, the same meaning for every kind: for an argmaxable item its
        witness's certified margin (reflection's, over ||a_i|| bounded by the largest row norms where the products
        were in low precision; the LP's best point where the LP ran); NaN where none was measured (an item proven
        unargmaxable by its dual certificate alone); -inf for a duplicate row.
    radius_exact : ndarray of bool
        Whether the LP ran to its optimum (then ``radius`` equals the Chebyshev radius up to rounding).
    steps : ndarray of int
        Argmax evaluations the approximate stage needed (1 = the start point already wins), -1 where it did
        not prove the item.
    lp_rounds : ndarray of int
        Constraint-generation rounds of the exact stage (0 where it did not run).
    witness : ndarray, shape (k, d)
        A point in the box where the item wins by more than eps (float64; NaN rows where there is none).
    message : ndarray of str
        Evidence or reason in words (duplicate rows, solver status of undecided items, ...).
    certificates : list of (rows, weights)
        For unargmaxable items: dual weights over constraint rows (category indices / label indices) whose
        bound certifies radius <= eps; for argmaxable items whose LP bounded the radius from above, the weights
        that bound it by ``radius_upper`` (and so answer "no" at a threshold above it: label sets' radius > 1);
        empty arrays elsewhere. Re-checked by :func:`verify_certificate`.
    settings : dict
        bound, lower, upper (the box), eps, patience, solver, exact_radius, numeric_path, blas, tolerances.
    radius_upper : ndarray of float, shape (k,)
        A certified upper bound on the radius (a dual certificate's, kept in ``certificates``), NaN where none.
    answers : dict of str -> ndarray of str
        For each threshold asked ("eps"; and "1" for label sets): "yes", "no" or "undecided" for radius >
        threshold, from the certified bounds.
    exact : dict of int -> ExactRecord
        Position -> rational evidence, for the items the exact stage settled (:mod:`argmaxable.core.exact`),
        re-checked in rational arithmetic (:mod:`argmaxable.verify_exact`): the region of each, and the status and
        answers of those it decided (``decided == "radius"``), whose float ``witness`` and ``certificates`` are
        then the rationals rounded, for display.
    paths : WitnessPaths, optional
        The steps by which reflection reached some witnesses (:mod:`argmaxable.witness_paths`): what
        :meth:`write_npz` stores in their place where they make the same points again. Not evidence by itself.
    """

    kind: str
    items: np.ndarray
    status: np.ndarray
    radius: np.ndarray
    radius_exact: np.ndarray
    steps: np.ndarray
    lp_rounds: np.ndarray
    witness: np.ndarray
    message: np.ndarray
    certificates: list = field(repr=False)
    settings: dict = field(default_factory=dict)
    radius_upper: np.ndarray | None = None
    answers: dict = field(default_factory=dict)
    exact: dict = field(default_factory=dict, repr=False)
    paths: WitnessPaths | None = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        if self.kind not in _kinds():
            raise ValueError(f"CheckResult: unknown kind {self.kind!r} (one of {', '.join(_kinds())}: a question is a "
                             "module of argmaxable.core.questions).")
        if self.radius_upper is None:
            self.radius_upper = np.full(len(self.items), np.nan)

    def __len__(self) -> int:
        return len(self.items)

    def counts(self) -> dict[str, int]:
        """Number of items per status."""
        return {s: int(np.sum(self.status == s)) for s in STATUSES}

    @property
    def unargmaxable(self) -> np.ndarray:
        """Items proven unargmaxable."""
        return self.items[self.status == UNARGMAXABLE]

    def one_argmaxable(self) -> np.ndarray:
        """Items proven to hold a ball of radius > 1 (thesis §4.2's 1-argmaxable): ``answers["1"] == "yes"``."""
        if "1" in self.answers:
            return np.asarray(self.answers["1"]) == "yes"
        with np.errstate(invalid="ignore"):
            return (self.status == ARGMAXABLE) & (self.radius > 1.0)

    def to_frame(self):
        """One row per item: item, status, radius, radius_upper, radius_exact, steps, lp_rounds, witness_norm,
        message, and one column per threshold answered (eps_argmaxable, one_argmaxable: yes/no/undecided); where
        the exact stage settled items, ``exact`` (what it decided: "radius", "region" or "") and ``region``
        ("yes" / "no": whether the region is non-empty, "" where the exact stage did not run or left it open)."""
        import pandas as pd

        with np.errstate(invalid="ignore"):
            wnorm = np.linalg.norm(self.witness, axis=1) if self.witness.size else np.full(len(self), np.nan)
        return pd.DataFrame({
            "item": self.items,
            "status": self.status,
            "radius": self.radius,
            "radius_upper": self.radius_upper,
            "radius_exact": self.radius_exact,
            "steps": self.steps,
            "lp_rounds": self.lp_rounds,
            "witness_norm": wnorm,
            "message": self.message,
            **{answer_column(k): v for k, v in self.answers.items()},
            **self._exact_columns(),
        })

    def _exact_columns(self) -> dict:
        """``exact`` and ``region`` for :meth:`to_frame`, only where the exact stage settled items."""
        if not self.exact:
            return {}
        exact, region = np.full(len(self), "", dtype=object), np.full(len(self), "", dtype=object)
        for pos, rec in self.exact.items():
            exact[pos], region[pos] = rec.decided, rec.region
        return {"exact": exact.astype(str), "region": region.astype(str)}

    def save(self, path) -> None:
        """Write the whole result, evidence included, to one ``.npz`` (atomically; read back by :meth:`load`).

        Arrays as they are; ``settings`` as JSON; certificates as ``cert_rows`` and ``cert_weights``
        concatenated, with ``cert_offsets`` (k + 1) marking each item's slice. Where the exact stage settled
        items (:attr:`exact`), their rational evidence, rationals as strings "p/q": ``exact_items`` (e,) positions,
        ``exact_decided`` and ``exact_region`` (e,), ``exact_witness`` (e, dim; "" in every column of an item
        without one), ``exact_rows`` (int64) and ``exact_weights`` concatenated, with ``exact_offsets`` (e + 1)
        marking each item's slice; without such items these members are absent.
        """
        from argmaxable.provenance import atomic_path

        with atomic_path(path) as tmp:
            self.write_npz(tmp)

    def write_npz(self, path, W=None) -> None:
        """Write the ``.npz`` of :meth:`save` to ``path`` as it is (no temporary name of its own). With the layer
        ``W`` (categories), the compact form, which :meth:`load` makes whole again from the layer: a witness that
        is its category's own row times a power of two (a start point) is stored as that power alone; one that
        reflection's steps (:attr:`paths`) make again from ``W`` bit for bit, as those steps (``path_*``: a row id
        and a number each); the other witnesses as they are; and only the messages that say
        something."""
        import json

        sizes = [len(r) for r, _ in self.certificates]
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        rows = np.concatenate([np.asarray(r, dtype=np.int64) for r, _ in self.certificates]) if sizes else []
        weights = np.concatenate([np.asarray(w, dtype=np.float64) for _, w in self.certificates]) if sizes else []
        witness = {"witness": self.witness, "message": self.message.astype(str)}
        if W is not None:  # and the messages as {position: text} where there is one (most are empty)
            own = own_row_exponents(self.witness, W, self.items)
            stored = own == NOT_OWN
            paths = matching(W, np.asarray(self.items), self.witness, self.paths)
            if paths is not None:  # (an own row is cheaper still)
                paths = paths.subset(stored[paths.positions])
                stored[paths.positions] = False
            said = np.flatnonzero(self.message.astype(str) != "")
            witness = {"witness": self.witness[stored], "witness_own": own,
                       **({} if paths is None else paths.members()),
                       "messages": json.dumps({int(p): str(self.message[p]) for p in said})}
        with open(path, "wb") as fh:
            np.savez(fh, kind=self.kind, items=self.items, status=self.status.astype(str), radius=self.radius,
                     radius_exact=self.radius_exact, steps=self.steps, lp_rounds=self.lp_rounds,
                     settings=json.dumps(self.settings),
                     cert_rows=np.asarray(rows, dtype=np.int64), cert_weights=np.asarray(weights, dtype=np.float64),
                     cert_offsets=offsets, radius_upper=self.radius_upper, **witness,
                     **{f"answer_{k}": np.asarray(v).astype(str) for k, v in self.answers.items()},
                     **self._exact_arrays())

    def _exact_arrays(self) -> dict:
        """The npz members of :attr:`exact` (none without it)."""
        if not self.exact:
            return {}
        pos = sorted(self.exact)
        recs = [self.exact[p] for p in pos]
        dim = self.witness.shape[1]
        witness = np.array([rec.witness or ("",) * dim for rec in recs], dtype=str).reshape(len(recs), dim)
        sizes = [len(rec.weights) for rec in recs]
        return {"exact_items": np.asarray(pos, dtype=np.int64), "exact_decided": np.array([r.decided for r in recs]),
                "exact_region": np.array([r.region for r in recs]), "exact_witness": witness,
                "exact_rows": np.array([i for r in recs for i in r.rows], dtype=np.int64),
                "exact_weights": np.array([w for r in recs for w in r.weights], dtype=str),
                "exact_offsets": np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)}

    @classmethod
    def load(cls, path, W=None) -> CheckResult:
        """Read a result written by :meth:`save` (no pickles); anything else (a truncated, empty or corrupt file,
        a member too large for memory, settings that are not a JSON object) is one ValueError. A compact file
        (:meth:`write_npz` with the layer) needs the layer ``W`` to make its start-point witnesses again."""
        import json

        try:
            f = _read_members(path, W)
            o, rows, weights = f["cert_offsets"], f["cert_rows"], f["cert_weights"]
            settings = json.loads(str(f["settings"]))
            if "witness_own" in f:
                paths = from_members(f, len(f["items"]), len(W)) if "path_positions" in f and W is not None else None
                f["witness"] = _own_rows(f["witness"], f["witness_own"], W, f["items"], paths)
                f["message"] = np.full(len(f["items"]), "", dtype=object)
                for p, text in json.loads(str(f["messages"])).items():
                    f["message"][int(p)] = text
                f["message"] = f["message"].astype(str)
        except Exception as err:  # zipfile.BadZipFile, EOFError, MemoryError, KeyError, JSONDecodeError, ours...
            text = str(err).strip()
            why = text.splitlines()[0] if text else type(err).__name__
            raise ValueError(f"{path}: not a readable evidence file ({why})") from None
        if not isinstance(settings, dict):
            raise ValueError(f"{path}: its settings are a JSON {type(settings).__name__}, not an object")
        if o.ndim != 1 or len(o) != len(f["items"]) + 1 or (np.diff(o) < 0).any() or o[0] != 0 or o[-1] != len(rows):
            raise ValueError(f"{path}: its certificate offsets do not match its {len(f['items'])} items")
        certs = [(rows[o[i] : o[i + 1]], weights[o[i] : o[i + 1]]) for i in range(len(o) - 1)]
        answers = {k[len("answer_"):]: f[k] for k in f if k.startswith("answer_")}
        if str(f["kind"]) not in _kinds():
            raise ValueError(f"{path}: not a result of a known question (kind {str(f['kind'])!r}; the kinds: "
                             f"{', '.join(_kinds())})")
        return cls(str(f["kind"]), f["items"], f["status"], f["radius"], f["radius_exact"], f["steps"],
                   f["lp_rounds"], f["witness"], f["message"], certs, settings,
                   radius_upper=f.get("radius_upper"), answers=answers, exact=_read_exact(f, path))

    def summary(self) -> str:
        """A short human-readable account."""
        c = self.counts()
        line = ", ".join(f"{v} {k}" for k, v in c.items())
        text = f"{len(self)} {self.kind} checked: {line}"
        if c[UNARGMAXABLE]:
            shown = ", ".join(map(str, self.unargmaxable[:20]))
            more = " ..." if c[UNARGMAXABLE] > 20 else ""
            text += f"\nunargmaxable: {shown}{more}"
        return text


NOT_OWN = np.iinfo(np.int16).min  # a witness stored as it is, not as its own row times a power of two


def own_row_exponents(X: np.ndarray, W, items: np.ndarray, block: int = 8192) -> np.ndarray:
    """Per item, the k with ``X[p] == W[items[p]] * 2**k`` exactly (in X's dtype), or :data:`NOT_OWN`."""
    out = np.full(len(items), NOT_OWN, dtype=np.int16)
    for s in range(0, len(items), block):
        x = X[s : s + block]
        w = np.asarray(W[items[s : s + block]]).astype(X.dtype)
        with np.errstate(divide="ignore", invalid="ignore"):
            k = np.frexp(np.abs(x).max(axis=1))[1] - np.frexp(np.abs(w).max(axis=1))[1]
        k = np.clip(k, -1000, 1000)
        same = (np.ldexp(w, k[:, None]).astype(X.dtype) == x).all(axis=1) & np.isfinite(x).all(axis=1)
        out[s : s + block][same] = k[same]
    return out


def _own_rows(kept: np.ndarray, own: np.ndarray, W, items: np.ndarray, paths: WitnessPaths | None) -> np.ndarray:
    """The witnesses of a compact file: the points its ``paths`` make from ``W`` at their positions, the item's own
    row of ``W`` times 2**own where ``own`` is not :data:`NOT_OWN`, else its stored rows in order."""
    if W is None:
        raise ValueError("compact evidence: its start-point witnesses are made again from the layer (give W)")
    mine = own != NOT_OWN
    walked = np.zeros(len(own), dtype=bool)
    if paths is not None and len(paths.positions) and paths.positions.max() < len(own):
        walked[paths.positions] = True
    stored = ~mine & ~walked
    if len(own) != len(items) or len(kept) != stored.sum() or W.shape[1] != kept.shape[1] or (
            items[mine | walked] >= len(W)).any() or (mine & walked).any():
        raise ValueError("compact evidence does not match the layer or its own items")
    X = np.empty((len(own), kept.shape[1]), dtype=kept.dtype if paths is None else np.result_type(kept, paths.dtype))
    X[stored] = kept
    if paths is not None:
        X[paths.positions] = replay(W, items[paths.positions], paths)
    at = np.flatnonzero(mine)
    for s in range(0, len(at), 8192):
        p = at[s : s + 8192]
        X[p] = np.ldexp(np.asarray(W[items[p]]).astype(kept.dtype), own[p, None].astype(np.int64))
    return X


# The members a result's .npz holds (:meth:`CheckResult.write_npz`); any other is never read. ``answer_<threshold>``
# members too, one per threshold.
MEMBERS = ("kind", "items", "status", "radius", "radius_exact", "steps", "lp_rounds", "settings", "cert_rows",
           "cert_weights", "cert_offsets", "radius_upper", "witness", "message", "witness_own", "messages",
           "exact_items", "exact_decided", "exact_region", "exact_witness", "exact_rows", "exact_weights",
           "exact_offsets", "path_positions", "path_offsets", "path_rows", "path_values", "path_dtypes")
# The most characters of one string member's entry (a message, a rational of the exact stage, the settings' JSON).
MEMBER_CHARS = 1 << 20


def _read_members(path, W=None) -> dict:
    """The known members of a result's .npz (:data:`MEMBERS`), each read only after its header: one array of
    ``items``' length per item (the witnesses as wide as the layer ``W`` where given, plus one), the certificates'
    and the exact evidence's at most the layer's rows per item, strings of at most :data:`MEMBER_CHARS`; anything
    else is a ValueError before its data is read (a small file that would expand to gigabytes)."""
    import zipfile

    with zipfile.ZipFile(path) as z:
        names = {n[: -len(".npy")] for n in z.namelist() if n.endswith(".npy")}
        wanted = [n for n in names if n in MEMBERS or n.startswith("answer_")]
        if "items" not in wanted:
            raise ValueError("no items")
        headers = {n: _header(z, n) for n in wanted}
        k = int(np.prod(headers["items"][0]))
        n_rows = None if W is None else W.shape[0]
        width = None if W is None else W.shape[1] + 1
        for name, (shape, dtype) in headers.items():
            if dtype.kind == "U" and dtype.itemsize // 4 > MEMBER_CHARS:
                raise ValueError(f"member {name!r} holds strings of {dtype.itemsize // 4} characters")
            if dtype.hasobject:
                raise ValueError(f"member {name!r} holds objects")
            size = int(np.prod(shape)) if shape else 1
            if name in ("witness", "exact_witness"):
                ok = len(shape) == 2 and shape[0] <= k and (width is None or shape[1] <= width)
            elif name in ("cert_rows", "cert_weights", "exact_rows", "exact_weights"):
                ok = len(shape) == 1 and (n_rows is None or size <= k * n_rows + 1)
            elif name in ("cert_offsets", "exact_offsets", "path_offsets"):
                ok = len(shape) == 1 and size <= k + 1
            elif name in ("path_rows", "path_values"):  # the compact form never outgrows the points
                ok = len(shape) == 1 and (width is None or size <= k * width)
            elif name == "path_dtypes":
                ok = shape == (3,)
            elif name in ("kind", "settings", "messages"):
                ok = size == 1
            else:
                ok = len(shape) == 1 and size <= k
            if not ok:
                raise ValueError(f"member {name!r} has shape {shape} beside {k} items")
        with np.load(path, allow_pickle=False) as z:
            return {n: z[n] for n in wanted}


def _header(z, name: str) -> tuple[tuple, np.dtype]:
    """Shape and dtype of one .npy member of the open zip ``z``, from its header alone."""
    with z.open(name + ".npy") as fh:
        version = np.lib.format.read_magic(fh)
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, _, dtype = read(fh)
    return shape, dtype


def _read_exact(f: dict, path) -> dict:
    """:attr:`CheckResult.exact` from the npz members written by :meth:`CheckResult.save` (empty without them);
    members that are missing or do not fit together are one ValueError."""
    if "exact_items" not in f:
        return {}
    try:
        pos, decided, region, witness = f["exact_items"], f["exact_decided"], f["exact_region"], f["exact_witness"]
        rows, weights, o = f["exact_rows"], f["exact_weights"], f["exact_offsets"]
    except KeyError as err:
        raise ValueError(f"{path}: its exact evidence lacks {err}") from None
    e = len(pos)
    if not (pos.dtype.kind in "iu" and decided.shape == region.shape == (e,) and witness.ndim == 2
            and len(witness) == e and rows.dtype.kind in "iu" and rows.shape == weights.shape
            and o.shape == (e + 1,) and o[0] == 0 and o[-1] == len(rows) and (np.diff(o) >= 0).all()):
        raise ValueError(f"{path}: its exact evidence's members do not fit together")
    return {int(p): ExactRecord(str(decided[j]), str(region[j]),
                                None if (witness[j] == "").all() else tuple(map(str, witness[j])),
                                tuple(int(i) for i in rows[o[j] : o[j + 1]]), tuple(map(str, weights[o[j] : o[j + 1]])))
            for j, p in enumerate(pos)}
