"""The result of a check: one row per item (category or label assignment), with its evidence."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

ARGMAXABLE, UNARGMAXABLE, UNDECIDED = "argmaxable", "unargmaxable", "undecided"
STATUSES = (ARGMAXABLE, UNARGMAXABLE, UNDECIDED)


def answer_column(threshold: str) -> str:
    """The table column of the answers at a threshold: eps_argmaxable, one_argmaxable (radius > 1), or
    ``argmaxable_at_<threshold>`` for any other (never shown as one of the two)."""
    return {"eps": "eps_argmaxable", "1": "one_argmaxable"}.get(threshold, f"argmaxable_at_{threshold}")


@dataclass
class CheckResult:
    """Verdicts aligned with the items checked.

    Attributes
    ----------
    kind : {"categories", "assignments"}
    items : ndarray of int, shape (k,)
        Category indices (categories) or row numbers of Y (assignments).
    status : ndarray of str, shape (k,)
        "argmaxable", "unargmaxable" or "undecided" (numerical trouble; the message says why).
    radius : ndarray of float, shape (k,)
        A certified lower bound on the Chebyshev radius (a witness's margin, or the LP's best point), the same
        meaning for every kind; NaN where none was measured (e.g. a category proven at its start point, an item
        proven unargmaxable by its dual certificate alone); -inf for a duplicate row.
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
        bound certifies radius <= eps; for argmaxable items answered "no" at a threshold (label sets: radius >
        1), the weights that bound the radius by it; empty arrays elsewhere. Re-checked by
        :func:`verify_certificate`.
    settings : dict
        bound, lower, upper (the box), eps, patience, solver, exact_radius, numeric_path, blas, tolerances.
    radius_upper : ndarray of float, shape (k,)
        A certified upper bound on the radius (a dual certificate's), NaN where none.
    answers : dict of str -> ndarray of str
        For each threshold asked ("eps"; and "1" for label sets): "yes", "no" or "undecided" for radius >
        threshold, from the certified bounds.
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

    def __post_init__(self):
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
        message, and one column per threshold answered (eps_argmaxable, one_argmaxable: yes/no/undecided)."""
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
        })

    def save(self, path) -> None:
        """Write the whole result, evidence included, to one ``.npz`` (atomically; read back by :meth:`load`).

        Arrays as they are; ``settings`` as JSON; certificates as ``cert_rows`` and ``cert_weights``
        concatenated, with ``cert_offsets`` (k + 1) marking each item's slice.
        """
        from argmaxable.provenance import atomic_path

        with atomic_path(path) as tmp:
            self.write_npz(tmp)

    def write_npz(self, path) -> None:
        """Write the ``.npz`` of :meth:`save` to ``path`` as it is (no temporary name of its own)."""
        import json

        sizes = [len(r) for r, _ in self.certificates]
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        rows = np.concatenate([np.asarray(r, dtype=np.int64) for r, _ in self.certificates]) if sizes else []
        weights = np.concatenate([np.asarray(w, dtype=np.float64) for _, w in self.certificates]) if sizes else []
        with open(path, "wb") as fh:
            np.savez(fh, kind=self.kind, items=self.items, status=self.status.astype(str), radius=self.radius,
                     radius_exact=self.radius_exact, steps=self.steps, lp_rounds=self.lp_rounds,
                     witness=self.witness, message=self.message.astype(str), settings=json.dumps(self.settings),
                     cert_rows=np.asarray(rows, dtype=np.int64), cert_weights=np.asarray(weights, dtype=np.float64),
                     cert_offsets=offsets, radius_upper=self.radius_upper,
                     **{f"answer_{k}": np.asarray(v).astype(str) for k, v in self.answers.items()})

    @classmethod
    def load(cls, path) -> CheckResult:
        """Read a result written by :meth:`save` (no pickles); anything else (a truncated, empty or corrupt file,
        a member too large for memory, settings that are not a JSON object) is one ValueError."""
        import json

        try:
            with np.load(path, allow_pickle=False) as z:
                f = {k: z[k] for k in z.files}
            o, rows, weights = f["cert_offsets"], f["cert_rows"], f["cert_weights"]
            settings = json.loads(str(f["settings"]))
        except Exception as err:  # zipfile.BadZipFile, EOFError, MemoryError, KeyError, JSONDecodeError...
            text = str(err).strip()
            why = text.splitlines()[0] if text else type(err).__name__
            raise ValueError(f"{path}: not a readable evidence file ({why})") from None
        if not isinstance(settings, dict):
            raise ValueError(f"{path}: its settings are a JSON {type(settings).__name__}, not an object")
        if o.ndim != 1 or len(o) != len(f["items"]) + 1 or (np.diff(o) < 0).any() or o[0] != 0 or o[-1] != len(rows):
            raise ValueError(f"{path}: its certificate offsets do not match its {len(f['items'])} items")
        certs = [(rows[o[i] : o[i + 1]], weights[o[i] : o[i + 1]]) for i in range(len(o) - 1)]
        answers = {k[len("answer_"):]: f[k] for k in f if k.startswith("answer_")}
        return cls(str(f["kind"]), f["items"], f["status"], f["radius"], f["radius_exact"], f["steps"],
                   f["lp_rounds"], f["witness"], f["message"], certs, settings,
                   radius_upper=f.get("radius_upper"), answers=answers)

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
