"""The independent verifier: re-check every verdict of a result from (W, b), the item definitions and the evidence.

It shares no code with the stages that produced the result (no :mod:`argmaxable.core` import): it parses the
items, builds the box and does every product itself, so a bug in a stage cannot vouch for itself. Every
acceptance is rigorous in floating point:

- every row is scaled by a power of two (exact) so that its largest entry is in [0.5, 1): norms neither overflow
  nor underflow, whatever the magnitude of W (1e-300..1e300);
- every computed quantity carries an explicit rounding bound (Higham's ``gamma_k = k u / (1 - k u)`` times the
  sum of the absolute terms), and a verdict is accepted only when it holds with that bound subtracted.

Evidence checked, per kind of result (``result.kind``):

- "argmaxable": the witness x is finite, inside the box, and every constraint ``a_i.x + c_i < 0`` of the item
  holds with distance > eps, i.e. ``a_i.x + c_i + eps ||a_i|| < 0`` (a zero row needs ``c_i < 0``); with the
  radius the result claims in place of eps where that is larger (to 6 digits), every witness in the same batched
  passes; where the result claims an upper bound (``radius_upper``), the dual weights in its certificate must
  bound the radius by it (to 6 digits), as below.
- "unargmaxable": non-negative weights ``y`` on rows that are constraints of the item (never the item's own
  row) with ``sup_{x in box} (-sum z_i a_i) - sum z_i c_i <= eps sum z_i ||a_i||`` where ``z_i = y_i / ||a_i||``
  (LP duality: the Chebyshev radius is at most eps), or one zero row with ``c_i >= 0`` (a duplicate).
- "undecided" claims nothing and passes; any other status fails.
- answers (``result.answers``): exactly the thresholds the kind answers (every kind "eps", label and top-m sets
  also "1"), any other set of keys is refused; at "eps" the status's own; at a threshold r ("1": radius > 1),
  "yes" needs the witness's margin above r, "no" a certificate bounding the radius by r.
- radii (to 6 digits): a lower bound above eps needs a witness with that margin (an unargmaxable item's cannot
  exceed eps); an upper bound needs the item's certificate to give it, or, where the result keeps none (an LP
  that sized a radius it did not refute), to lie at or above the verified lower bound. :func:`checked_radii`
  names the radii the evidence itself backs: the only ones a table should show.
- items the exact stage settled (``result.exact``): the same questions, and their region (radius > 0), on their
  rational evidence in rational arithmetic (:mod:`argmaxable.verify_exact`).

The box and eps are the caller's (default: the checks' documented ones for the result's kind), never the result's
record: a record that disagrees with them is refused, naming the setting.

Categories (softmax): ``a_i = w_i - w_t``, ``c_i = b_i - b_t``. Label assignments (sigmoid, signs s_i = +1 for an
active label): ``a_i = -s_i w_i``, ``c_i = -s_i b_i``. Top-m sets: the assignments of the layer ``[W, -1]`` over
``(x, tau)`` with tau in ``[-bound, bound]``; a layer whose largest |entry| lies outside [2^-500, 2^500] is
rescaled by the check by a power of two s (down to [2^499, 2^500), or up to [0.5, 1)), which makes tau's column
-1/s. A category whose bias is -inf, or so far below the largest that it loses everywhere in the box by more than
eps (:func:`_masked`), is unargmaxable without evidence and is left out of the other categories' checks.

A whole vocabulary's witnesses are checked in blocks of rows against blocks of W with bfloat16 products where the
CPU has them (float32 otherwise) and a rigorous bound on their error; for the witnesses that bound cannot settle,
only the rows each row's own bound leaves open are re-checked in float64 (:func:`_near_categories`), never the
whole layer per witness. Memory stays within one block of logits and a low-precision copy of W.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from argmaxable.verify_exact import with_exact, with_exact_certificates

STATUSES = ("argmaxable", "unargmaxable", "undecided")
# The forms of evidence this module checks, each with its own arithmetic: a result's kind, for the questions whose
# items are checked as they are; top-k rankings and prescribed probabilities are checked item by item as
# assignments of each item's derived layer (argmaxable.core.derived.verify_layers). Every question of the core
# (argmaxable.core.questions) declares one of these; a test holds them together.
FORMS = ("categories", "assignments", "top-m sets")
# The checks' documented boxes and eps (002 §4: 100; thesis §4.2: 1e4 for label sets, eps 1e-8), the defaults
# the verifier applies where the caller gives none, and the thresholds each kind answers (sets: also 1).
DEFAULT_BOUND = {"categories": 100.0, "assignments": 1e4, "top-m sets": 100.0}
DEFAULT_EPS = 1e-8
THRESHOLDS = {"categories": ("eps",), "assignments": ("eps", "1"), "top-m sets": ("eps", "1")}
DIGITS = 1e-6  # radii a result claims are checked to 6 digits
U64 = 2.0**-53  # unit roundoff of float64
# Rows of W per block of the float64 re-checks and of the low-precision products.
BLOCK = 4096
# The low-precision passes (bfloat16 or float32) run only where every scaled offset lies within this of 1 (the
# scaled rows and points are at most 1): a larger one would be cast beyond the narrow type's range (-inf rules every
# other row out) or carry a bound no witness can meet; such layers are checked in float64 only.
LOWP_RANGE = 2.0**60
# Rows per chunk of a certificate's weighted sum; chunks are added pairwise, so a sum over k rows has a
# rounding bound of gamma_(CHUNK + 2 log2(k / CHUNK)) rather than gamma_k.
CHUNK = 64


def gamma(k: int, u: float = U64) -> float:
    """Higham's gamma_k: relative error bound of a k-term dot product or sum in any order."""
    return k * u / (1.0 - k * u)


def _pow2_scale(A: np.ndarray) -> np.ndarray:
    """Per-row power of two m with max|A_i| / m in [0.5, 1) (in [0.5, 2) above 2^1023, whose m would overflow;
    1 for a zero row): dividing by it is exact, up to entries that underflow (at most 2^-1075 each)."""
    top = np.abs(A).max(axis=-1)
    _, e = np.frexp(top)
    return np.where(top > 0, np.ldexp(1.0, np.minimum(e, 1023)), 1.0)


def _norm_up(A: np.ndarray) -> np.ndarray:
    """Upper bound on the row norms of A, whose entries are at most 1 in magnitude. Each row is first scaled by a
    power of two (exact) to a largest entry in [0.5, 1), so the floor that covers squares lost to underflow
    (1e-150) is relative to the row: a row of entries near 1e-144 keeps its norm to 16 digits, not to 1e-150."""
    d = A.shape[-1]
    k = np.ldexp(1.0, np.frexp(np.abs(A).max(axis=-1, keepdims=True))[1])  # 2^e > largest |entry| (1 for zeros)
    As = A / k
    return k[..., 0] * (np.sqrt(np.einsum("...d,...d->...", As, As)) * (1 + gamma(d + 2)) + 1e-150)


def _as_real(a, name: str, ndim: int, masks: bool = False) -> np.ndarray:
    """A float64 array; finite, or with ``masks`` finite or -inf (a masked category's bias)."""
    if hasattr(a, "detach"):
        a = a.detach().cpu()
        a = a.numpy() if str(a.dtype) == "torch.bool" else a.double().numpy()  # bool: refused as numpy's is
    arr = np.asarray(a)
    if arr.dtype.kind not in "iuf" or arr.ndim != ndim:
        raise ValueError(f"verify_certificate: {name} must be a real {ndim}-D array. Got dtype {arr.dtype}, "
                         f"shape {arr.shape}.")
    arr = arr.astype(np.float64, copy=False)  # no copy of a float64 layer
    if not (np.isfinite(arr) | (masks & (arr == -np.inf))).all():
        raise ValueError(f"verify_certificate: {name} must be finite" + (" or -inf." if masks else "."))
    if masks and arr.size and not np.isfinite(arr).any():
        raise ValueError(f"verify_certificate: {name} is -inf everywhere: no category can win.")
    return arr


def _masked(W: np.ndarray, b: np.ndarray, lo: np.ndarray, hi: np.ndarray, eps: float) -> np.ndarray:
    """Categories whose logit stays below category j's (j: the largest bias) by more than eps ||w_t - w_i|| for
    every t, everywhere in the box: a bias of -inf, or b_j - b_i > |w_j|.r + |w_i|.r + eps (d max|W| + |w_i|_1)
    with r = max(|lo|, |hi|). Such a category never wins, and its row holds at every witness of another by more
    than eps: it is left out of their checks."""
    out = b == -np.inf
    j = int(np.argmax(b))
    r = np.maximum(np.abs(lo), np.abs(hi))
    d = W.shape[1]
    with np.errstate(over="ignore", invalid="ignore"):
        sj = float(np.abs(W[j]) @ r)
        cand = np.flatnonzero(~out & (b < b[j] - sj))  # necessary: the bias alone is that far below
        if cand.size:
            wabs = np.abs(W[cand])
            need = (sj + wabs @ r + eps * (d * _abs_max(W) + wabs.sum(axis=1))) * (1 + 4 * gamma(d + 8)) + (
                d + 2) * 2.0**-1074 * (r.sum() + 1)
            out[cand] = (b[j] - b[cand]) * (1 - U64) > need
    return out


def _signs(items, n: int) -> np.ndarray:
    """Label sets as an (m, n) bool matrix: a 2-D bool/0-1 array, or a list of distinct label-index lists."""
    if hasattr(items, "detach"):
        items = items.detach().cpu().numpy()
    if isinstance(items, np.ndarray):
        if items.ndim != 2 or items.shape[1] != n or not np.isin(items, (0, 1)).all():
            raise ValueError(f"verify_certificate: label sets as an array must be (m, {n}) with 0/1 entries.")
        return items.astype(bool)
    out = np.zeros((len(items), n), dtype=bool)
    for r, row in enumerate(items):
        vals = list(row)
        if not all(isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) for v in vals):
            raise ValueError(f"verify_certificate: label set {r} must hold integer label indices.")
        if not all(0 <= v < n for v in vals) or len(set(vals)) != len(vals):  # Python ints: no overflow
            raise ValueError(f"verify_certificate: label set {r} must hold distinct indices in [0, {n}).")
        out[r, np.asarray(vals, dtype=np.int64)] = True
    return out


def _settings(result, kind: str, d: int, bound, lower, upper, eps):
    """The box (lo, hi) and eps to verify at: the caller's, else the checks' documented ones for ``kind``; the
    result's record is only compared with them (a record that disagrees is refused)."""
    given = {"bound": bound, "eps": eps, "lower": lower, "upper": upper}
    bound = DEFAULT_BOUND[kind] if bound is None else bound
    eps = DEFAULT_EPS if eps is None else eps
    if not (isinstance(bound, (int, float, np.floating, np.integer)) and np.isfinite(bound) and bound > 0):
        raise ValueError(f"verify_certificate: bound must be a positive number. Got {bound!r}.")
    if not (isinstance(eps, (int, float, np.floating, np.integer)) and np.isfinite(eps) and eps >= 0):
        raise ValueError(f"verify_certificate: eps must be a non-negative number. Got {eps!r}.")
    lo, hi = _box(d, float(bound), lower, upper, "")
    if not (lo < hi).all():
        raise ValueError("verify_certificate: the box is empty or flat (lower must be below upper).")
    _agree(getattr(result, "settings", None) or {}, given, float(bound), lo, hi, float(eps))
    return float(bound), lo, hi, float(eps)


def _box(d: int, bound: float, lower, upper, where: str) -> tuple[np.ndarray, np.ndarray]:
    """The ends (lo, hi), each (d,): ``[lower, upper]`` (scalars or d values, None: the bound) within |x_j| <= bound."""
    ends = []
    for name, value, edge in (("lower", lower, -bound), ("upper", upper, bound)):
        if value is None:
            ends.append(np.full(d, edge))
            continue
        arr = np.asarray(value, dtype=np.float64) if np.asarray(value).dtype.kind in "iuf" else None
        if arr is None or arr.ndim > 1 or arr.size not in (1, d) or np.isnan(arr).any():
            raise ValueError(f"verify_certificate: {where}{name} must be a number or {d} numbers. Got "
                             f"{_shown(value)}.")
        ends.append(np.maximum(np.broadcast_to(arr, (d,)), edge) if name == "lower" else
                    np.minimum(np.broadcast_to(arr, (d,)), edge))
    return ends[0], ends[1]


def _agree(record: dict, given: dict, bound: float, lo: np.ndarray, hi: np.ndarray, eps: float) -> None:
    """Refuse a record of the check's settings that disagrees with the box and eps verified."""
    def refuse(key, recorded, verified):
        how = "was given" if given[key] is not None else "applies (the default)"
        raise ValueError(f"verify_certificate: the result records {key}={_shown(recorded)} but {key}="
                         f"{_shown(verified)} {how}: verify against the settings the check ran with.")

    for key, verified in (("bound", bound), ("eps", eps)):
        recorded = record.get(key)
        if recorded is not None and not (np.asarray(recorded).dtype.kind in "iuf" and np.ndim(recorded) == 0
                                         and float(recorded) == verified):
            refuse(key, recorded, verified)
    if record.get("lower") is None and record.get("upper") is None:
        return
    try:
        rec_bound = float(record.get("bound", bound))
        rlo, rhi = _box(len(lo), rec_bound, record.get("lower"), record.get("upper"), "the recorded ")
    except (TypeError, ValueError):
        rlo = rhi = None
    for key, recorded, mine in (("lower", rlo, lo), ("upper", rhi, hi)):
        if recorded is None or not np.array_equal(recorded, mine):
            refuse(key, record.get(key), mine)


def _shown(value) -> str:
    """A setting in one short phrase: a number, or an array's size and range (never all its values)."""
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        return repr(value)[:60]
    if arr.ndim == 0:
        return repr(float(arr))
    if arr.size and (arr == arr.flat[0]).all():
        return f"{float(arr.flat[0])!r} (each of {arr.size})"
    return f"{arr.size} values in [{np.nanmin(arr):g}, {np.nanmax(arr):g}]" if arr.size else "[]"


def verify_certificate(result, W, b=None, *, items=None, bound=None, lower=None, upper=None,
                       eps=None) -> np.ndarray:
    """Re-check every verdict of ``result`` against ``W`` and ``b``, without a solver and without the stages' code.

    Parameters
    ----------
    result : CheckResult
        From :func:`argmaxable.check_categories`, :func:`~argmaxable.check_assignments` or
        :func:`~argmaxable.check_top_m` (or :func:`load_result`).
    W : array_like, shape (n, d)
    b : array_like, shape (n,), optional
    items : label sets, optional
        The assignments / token sets the result's rows refer to (2-D 0/1 array or list of index lists); required
        for assignments and top-m sets. Categories name their rows in ``result.items``.
    bound, lower, upper, eps : optional
        The box and eps to verify at. Default: the checks' documented ones for the result's kind (bound 100 for
        categories and top-m sets, 1e4 for label sets; the whole box; eps 1e-8), never the result's record: a
        record that disagrees with the values verified is refused (ValueError), naming the setting.

    Returns
    -------
    ndarray of bool, shape (len(result),)
        True where the evidence holds for the status, the answers and the radii (an "undecided" status claims
        nothing; an unknown status never holds).

    Raises
    ------
    ValueError
        Bad inputs, settings that disagree with the result's record, arrays of the wrong shape (a result of
        another layer), or answers for other thresholds than the kind's.

    Examples
    --------
    >>> import numpy as np
    >>> import argmaxable as am
    >>> W = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0], [0.1, 0.1]])
    >>> verify_certificate(am.check_categories(W), W).tolist()
    [True, True, True, True]
    """
    kind, W, b, witness, (bound, lo, hi, eps) = _inputs(result, W, b, bound, lower, upper, eps)
    masked = None
    if kind == "categories":
        masked = _masked(W, b, lo, hi, eps)
        witnesses, certificates = _category_checks(result, W, b, witness, masked, lo, hi, eps)
    else:
        witnesses, certificates = _assignment_checks(result, W, b, witness, items, kind, lo, hi)
    regions = True
    signs = None if kind == "categories" else _signs(items, W.shape[0])[np.asarray(result.items, dtype=np.int64)]
    certificates = with_exact_certificates(result, W, b, signs, lo, hi, certificates)
    if getattr(result, "exact", None):  # what the exact stage settled: its rational evidence, checked exactly
        witnesses, certificates, regions = with_exact(result, W, b, signs, lo, hi, witnesses, certificates, masked)
    status = np.asarray(result.status).astype(str)
    # An argmaxable item's witness is checked at eps, or at the radius it claims (to 6 digits) where larger
    radius = np.asarray(result.radius, dtype=np.float64)
    if radius.shape != status.shape:
        raise ValueError(f"verify_certificate: the result has {radius.size} radii for {len(status)} items.")
    valid = status == "undecided"
    pos = np.flatnonzero(status == "argmaxable")
    with np.errstate(invalid="ignore"):
        claim = np.isfinite(radius[pos]) & (radius[pos] * (1 - DIGITS) > eps)
    valid[pos[~claim]] = witnesses(pos[~claim], eps)
    if claim.any():
        valid[pos[claim]] = witnesses(pos[claim], radius[pos[claim]] * (1 - DIGITS))
    upper, certified = _upper_claims(result, status)
    pos = np.flatnonzero(status == "unargmaxable")  # at eps, or at the upper bound claimed where smaller
    valid[pos] = certificates(pos, np.fmin(eps, np.where(certified[pos], upper[pos], np.nan)))
    return valid & _answers_hold(result, kind, status, witnesses, certificates, eps) & _radii_hold(
        status, radius, upper, certified, witnesses, certificates, eps) & regions


def _inputs(result, W, b, bound, lower, upper, eps):
    """The result's kind, the layer as verified (top-m sets: with tau's column), its bias, the witnesses in
    float64 and the settings ``(bound, lo, hi, eps)`` (top-m sets: with tau's range), all validated."""
    W = _as_real(W, "W", 2)
    n, d = W.shape
    kind = getattr(result, "kind", None)
    b = np.zeros(n) if b is None else _as_real(b, "b", 1, masks=kind == "categories")
    if b.shape != (n,):
        raise ValueError(f"verify_certificate: b must have shape ({n},). Got {b.shape}.")
    if kind not in FORMS:
        raise ValueError(f"verify_certificate: a result of kind {kind!r} is not checked here (its kinds: "
                         f"{', '.join(FORMS)}); top-k rankings and prescribed probabilities have verify_rankings and "
                         "verify_prescribed.")
    k = len(result.status)
    if kind == "top-m sets":  # tau's coefficient: -1, or -1/s for a layer the check rescaled by s (power of 2)
        W = np.hstack([W, np.full((n, 1), -_tau_scale(max(_abs_max(W), float(np.abs(b).max()))))])
    dim = W.shape[1]
    witness = np.asarray(result.witness, dtype=np.float64)
    if witness.ndim == 2 and witness.shape[1] != dim:
        raise ValueError(f"verify_certificate: the result's witnesses have {witness.shape[1]} coordinates and the "
                         f"layer given {dim}: verify against the layer the check ran on.")
    bound, lo, hi, eps = _settings(result, kind, d, bound, lower, upper, eps)
    if kind == "top-m sets":
        lo, hi = np.append(lo, -bound), np.append(hi, bound)
    if witness.shape != (k, dim) or len(result.items) != k or len(result.certificates) != k:
        raise ValueError(f"verify_certificate: the result's arrays do not match: {k} statuses, witnesses of shape "
                         f"{witness.shape} (expected ({k}, {dim})), {len(result.items)} items.")
    return kind, W, b, witness, (bound, lo, hi, eps)


def _category_checks(result, W, b, witness, masked, lo, hi, eps):
    """``witnesses(pos, e)`` and ``certificates(pos, e)`` of a categories result: whether the evidence of the items
    at positions ``pos`` holds at margin ``e`` (a number, or one per item); ``masked``: :func:`_masked`."""
    n = W.shape[0]
    rows = np.asarray(result.items)
    if rows.dtype.kind not in "iu" or ((rows < 0) | (rows >= n)).any():
        raise ValueError(f"verify_certificate: a categories result's items must be indices in [0, {n}).")
    rows = rows.astype(np.int64)
    # masked categories never win and never bind the others: the others are checked without their rows
    keep = np.flatnonzero(~masked)
    Wk, bk, rk = (W[keep], b[keep], np.searchsorted(keep, rows)) if masked.any() else (W, b, rows)
    bk = _shifted(bk)

    def witnesses(pos, e):
        out = np.zeros(len(pos), dtype=bool)
        live = np.flatnonzero(~masked[rows[pos]])
        e = np.broadcast_to(np.asarray(e, dtype=np.float64), (len(pos),))  # one margin per item, or all alike
        out[live] = _witnesses_categories(Wk, bk, rk, witness, pos[live], lo, hi, e[live])
        return out

    def certificates(pos, e):
        e = np.broadcast_to(np.asarray(e, dtype=np.float64), (len(pos),))  # one margin per item, or all
        return np.array([bool(masked[rows[p]]) or _certificate_categories(W, b, int(rows[p]),
                                                                          result.certificates[p], lo, hi, float(ek))
                         for p, ek in zip(pos, e, strict=True)], dtype=bool)

    return witnesses, certificates


def _assignment_checks(result, W, b, witness, items, kind, lo, hi):
    """``witnesses(pos, e)`` and ``certificates(pos, e)`` of an assignments or top-m result, on its label sets."""
    if items is None:
        raise ValueError(f"verify_certificate: a {kind} result needs its label sets: items=...")
    S = _signs(items, W.shape[0])
    which = np.asarray(result.items)
    if which.dtype.kind not in "iu" or ((which < 0) | (which >= len(S))).any():
        raise ValueError(f"verify_certificate: the result's items must be row numbers of the {len(S)} label "
                         "sets given.")
    S = S[which.astype(np.int64)]

    def witnesses(pos, e):
        return _witnesses_assignments(W, b, S[pos], witness[pos], lo, hi, e)

    def certificates(pos, e):
        e = np.broadcast_to(np.asarray(e, dtype=np.float64), (len(pos),))
        return _certificates_assignments(W, b, S[pos], [result.certificates[p] for p in pos], lo, hi, e)

    return witnesses, certificates


def _answers_hold(result, kind, status, witnesses, certificates, eps) -> np.ndarray:
    """Whether each item's answers hold. The thresholds answered must be the kind's (:data:`THRESHOLDS`): a
    missing or renamed one is refused. At "eps" the answer is the status's; at a threshold r, "yes" needs a
    witness whose margin exceeds r and "no" a certificate bounding the radius by r."""
    answers = getattr(result, "answers", None) or {}
    if sorted(answers) != sorted(THRESHOLDS[kind]):
        want = " and radius > ".join(THRESHOLDS[kind])
        raise ValueError(f"verify_certificate: a {kind} result answers radius > {want}; this one answers "
                         f"{', '.join(map(repr, sorted(answers))) or 'nothing'}.")
    ok = np.ones(len(status), dtype=bool)
    for key, answer in answers.items():
        answer = np.asarray(answer).astype(str)
        if answer.shape != status.shape or not np.isin(answer, ("yes", "no", "undecided")).all():
            ok[:] = False
            continue
        if key == "eps":
            ok &= answer == np.select([status == "argmaxable", status == "unargmaxable"], ["yes", "no"], "undecided")
            continue
        threshold = float(key)
        yes, no = np.flatnonzero(answer == "yes"), np.flatnonzero(answer == "no")
        ok[yes] &= (status[yes] == "argmaxable") & witnesses(yes, max(threshold, eps))
        ok[no] &= certificates(no, threshold)
    return ok


def _upper_claims(result, status) -> tuple[np.ndarray, np.ndarray]:
    """Each item's claimed upper bound on the radius, made 6 digits looser (NaN: none claimed; +inf claims
    nothing, -inf that no point meets the item's rows), and whether the item keeps a certificate to check it with."""
    upper = np.asarray(result.radius_upper, dtype=np.float64)
    if upper.shape != status.shape:
        raise ValueError(f"verify_certificate: the result has {upper.size} upper radii for {len(status)} items.")
    certified = np.array([len(np.atleast_1d(c[0])) > 0 for c in result.certificates], dtype=bool)
    with np.errstate(invalid="ignore"):
        looser = np.where(np.isinf(upper), upper, upper + DIGITS * np.abs(upper))
    return np.where(looser == np.inf, np.nan, looser), certified.reshape(status.shape)


def _radii_hold(status, radius, upper, certified, witnesses, certificates, eps) -> np.ndarray:
    """Whether each item's radii hold beyond its status (an argmaxable item's lower bound is checked with its
    witness, an unargmaxable item's upper bound with its certificate): a lower bound above eps on any other item
    needs a witness with that margin, and an unargmaxable item's cannot exceed eps; an upper bound needs the
    item's certificate to give it, or, where the item keeps no certificate, to lie at or above the verified lower
    bound (eps for an argmaxable item). To 6 digits."""
    ok = np.ones(len(status), dtype=bool)
    with np.errstate(invalid="ignore"):
        high = np.flatnonzero((status != "argmaxable") & (radius * (1 - DIGITS) > eps))
        ok[high] = (status[high] != "unargmaxable") & witnesses(high, radius[high] * (1 - DIGITS))
        claimed = ~np.isnan(upper)
        pos = np.flatnonzero(claimed & certified & (status != "unargmaxable"))
        if pos.size:
            ok[pos] &= certificates(pos, upper[pos])
        floor = np.where(status == "argmaxable", np.fmax(radius, eps), radius)  # verified lower bounds (or NaN)
        ok &= ~(claimed & ~certified & (upper < floor))
    return ok


def checked_radii(result) -> tuple[np.ndarray, np.ndarray]:
    """The radii of ``result`` that its own evidence backs, as :func:`verify_certificate` checks them: the lower
    bound of each argmaxable item that keeps its witness, each upper bound where the item keeps a certificate;
    NaN elsewhere (a value the result carries with no evidence for it, such as an LP's radius of a refuted item,
    whose point is not kept). A table of verified results shows these."""
    X = np.asarray(result.witness)  # in its own dtype, a block of rows at a time: no copy of a whole vocabulary's
    witnessed = np.concatenate([np.isfinite(X[s : s + BLOCK]).all(axis=1) for s in range(0, len(X), BLOCK)] or
                               [np.zeros(0, dtype=bool)]) & (np.asarray(result.status).astype(str) == "argmaxable")
    certified = np.array([len(np.atleast_1d(c[0])) > 0 for c in result.certificates], dtype=bool)
    radius = np.where(witnessed, np.asarray(result.radius, dtype=np.float64), np.nan)
    upper = np.where(certified, np.asarray(result.radius_upper, dtype=np.float64), np.nan)
    return radius, upper


def _tau_scale(top: float) -> float:
    """The power of two 1/s by which the check scaled a layer whose largest |entry| is ``top``: 1 inside
    [2^-500, 2^500]; above, down to [2^499, 2^500); below, up to [0.5, 1)."""
    if top == 0 or 2.0**-500 <= top <= 2.0**500:
        return 1.0
    e = int(np.frexp(top)[1])
    return float(np.ldexp(1.0, e - 500 if top > 1 else e))


def _in_box(X: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Rows of X that are finite and inside the box (blocks of rows: no temporary of X's size)."""
    out = np.empty(len(X), dtype=bool)
    for s in range(0, len(X), BLOCK):
        Xb = X[s : s + BLOCK]
        out[s : s + BLOCK] = np.isfinite(Xb).all(axis=1) & (lo <= Xb).all(axis=1) & (hi >= Xb).all(axis=1)
    return out


def _abs_max(A: np.ndarray) -> float:
    """max |A| over blocks of rows (no temporary of A's size)."""
    return max((float(np.abs(A[s : s + BLOCK]).max()) for s in range(0, len(A), BLOCK)), default=0.0)


def _row_check(A: np.ndarray, c: np.ndarray, x: np.ndarray, eps: float) -> bool:
    """Whether ``a_i.x + c_i + eps ||a_i|| < 0`` for every row, rigorously in float64 (rows scaled exactly)."""
    m = _pow2_scale(np.hstack([A, c[:, None]]))
    A, c = A / m[:, None], c / m
    zero = ~(A != 0).any(axis=1)
    if (c[zero] >= 0).any():
        return False
    A, c = A[~zero], c[~zero]
    if not len(A):
        return True
    # One unit u (a power of two) at least the point's, the offsets' and the margin's size: s_i / u = a_i . x / u +
    # c_i / u, every term at most d in magnitude (no overflow: a bias of 1e137 and a margin to match beside a point
    # of 1e-172), no absolute floor of its own (a point, offsets and margin all near 1e-300 keep their digits)
    u = max(float(_pow2_scale(x[None])[0]), float(_pow2_scale(np.array([[np.abs(c).max(), eps]]))[0]))
    xs, cs, margin = x / u, c / u, _scaled_up(eps, u) * _norm_up(A)
    d = A.shape[1]
    s = A @ xs + cs
    # Rounding, and up to 2^-1075 lost by each scaled entry, product and offset that underflowed (subnormal rows)
    err = gamma(d + 4) * (np.abs(A) @ np.abs(xs) + np.abs(cs) + margin) + (2 * d + 2) * 2.0**-1074
    return bool(np.all(s + err + margin < 0))


def _scaled_up(eps: float, m: float) -> float:
    """eps / m rounded up (it may be subnormal; inf where it overflows, which accepts nothing)."""
    with np.errstate(over="ignore"):
        return float(np.nextafter(eps / m, np.inf)) if eps > 0 else 0.0


def _witnesses_categories(W, b, rows, X, pos, lo, hi, eps) -> np.ndarray:
    """Argmaxable categories ``rows[pos]`` with witnesses ``X[pos]`` (indexed block by block: a whole
    vocabulary's witnesses are never copied) at margins ``eps`` (one per witness: radius claims are checked in the
    same batched passes): a fast certified pass in low precision, then, for the rest, only the rows that pass could
    not rule out, in float64."""
    ok = np.zeros(len(pos), dtype=bool)
    for s in range(0, len(pos), BLOCK):
        ok[s : s + BLOCK] = _in_box(X[pos[s : s + BLOCK]], lo, hi)
    fast = np.zeros(len(pos), dtype=bool)
    if len(pos) >= 256 and ok.any():  # a whole vocabulary: blocked products
        idx = np.flatnonzero(ok)
        fast[idx] = _fast_categories(W, b, rows, X, pos[idx], eps[idx])
    out = ok & fast
    rest = np.flatnonzero(ok & ~fast)
    if len(W) <= BLOCK:  # one block of rows: each witness exactly, without torch
        out[rest] = [_row_check_all(W, b, int(rows[pos[p]]), X[pos[p]], float(eps[p])) for p in rest]
    elif rest.size:
        out[rest] = _near_categories(W, b, rows[pos[rest]], X, pos[rest], eps[rest])
    return out


def _near_categories(W, b, t_all, X_all, pos, eps, group=256, small=16) -> np.ndarray:
    """Witnesses ``X_all[pos]`` of categories ``t_all`` checked row by row, in three tiers (scaled units as in
    :func:`_fast_categories`): low-precision products against every row with each row's own rounding bound rule
    out the rows that cannot come within eps; float64 products over the union of the rows left, for ``small``
    witnesses at a time, rule out most of the others; :func:`_row_check` decides the last few pairs on their
    exact differences. No witness costs a float64 pass over the whole layer."""
    kw = float(_pow2_scale(np.array([[_abs_max(W)]]))[0])
    xmax = max(_abs_max(X_all[pos[s : s + BLOCK]]) for s in range(0, len(pos), BLOCK))
    kx = float(_pow2_scale(np.array([[xmax]]))[0])
    bs = b / (kw * kx)
    if not np.all(np.abs(bs) <= LOWP_RANGE):  # offsets far larger than the rows: each witness on its own, exactly
        return np.array([_row_check_all(W, b, int(t), X_all[p], float(e))
                         for t, p, e in zip(t_all, pos, eps, strict=True)], dtype=bool)
    layer = _scaled_layer(W, b, bs, kw, kx)
    out = np.zeros(len(pos), dtype=bool)
    for g0 in range(0, len(pos), group):
        sel = slice(g0, min(g0 + group, len(pos)))
        out[sel] = _near_group(layer, X_all[pos[sel]], t_all[sel], eps[sel], small)
    return out


@dataclass
class _Scaled:
    """A layer in the scaled units of :func:`_near_categories` (rows / kw, offsets / (kw kx)): its low-precision
    copy ``R`` = [W / kw, bs], norms ``wn`` rounded up and the rounding terms of the products."""

    W: np.ndarray
    b: np.ndarray
    kw: float
    kx: float
    bs: np.ndarray
    R: object
    wn: np.ndarray
    kappa: float  # relative error of a low-precision product: inputs, accumulation, output
    floor: float  # products lost to subnormals
    B: float  # largest scaled |offset|


def _scaled_layer(W, b, bs, kw, kx) -> _Scaled:
    """The low-precision copy and rounding terms of :class:`_Scaled`, a block of rows at a time."""
    import torch

    n, d = W.shape
    dtype, u, v, tiny = _lowp()
    kappa = (2 * u + u * u) * (1 + gamma(d + 2, v)) + gamma(d + 2, v) + u  # inputs, accumulation, output
    B = float(np.abs(bs).max())
    R = torch.empty((n, d + 1), dtype=dtype)
    wn = np.empty(n)
    for s in range(0, n, BLOCK):
        Wb = W[s : s + BLOCK] / kw
        wn[s : s + BLOCK] = _norm_up(Wb)  # >= ||w_i|| / kw
        R[s : s + BLOCK, :d] = torch.from_numpy(Wb)
    R[:, d] = torch.from_numpy(bs)
    return _Scaled(W, b, kw, kx, bs, R, wn, kappa, tiny * 4 * (d + 3) * max(1.0, B), B)


def _near_group(layer: _Scaled, X, t, eps, small) -> np.ndarray:
    """:func:`_near_categories` for one group of witnesses ``X`` of categories ``t`` at margins ``eps`` (one per
    witness): whether each holds."""
    d = layer.W.shape[1]
    e = (eps / layer.kx) * (1 + 4 * U64)  # in scaled units, with the rounding of the products of the tests
    Xs = X / layer.kx
    xn = _norm_up(Xs)
    bs, wn = layer.bs, layer.wn
    own = np.einsum("kd,kd->k", Xs, layer.W[t] / layer.kw) + bs[t]
    # A certified lower bound on each own logit, less the float64 rounding of the tests below.
    low = own - gamma(d + 3) * (xn * wn[t] + np.abs(bs[t])) - gamma(4) * (np.abs(own) + xn * wn.max() + 2 * layer.B)
    low -= layer.floor
    kk, ii = _tier1_pairs(layer, Xs, xn, low, t, e)
    good = np.ones(len(X), dtype=bool)
    for s0 in range(0, len(X), small):
        m = (kk >= s0) & (kk < s0 + small)
        if m.any():
            _tiers23(layer, X, Xs[s0 : s0 + small], xn, low, t, kk[m], ii[m], s0, good, e, eps)
    return good


def _tier1_pairs(layer: _Scaled, Xs, xn, low, t, e) -> tuple[np.ndarray, np.ndarray]:
    """Tier 1: the (witness, row) pairs that the low-precision products cannot rule out, a block of rows at a time:
    x.w_i + b_i <= G + kappa (||x|| ||w_i|| + |b_i|) + floor; a row stays if that may come within
    eps (||w_t|| + ||w_i||) of the own logit."""
    import torch

    n, d = layer.W.shape
    bs, wn, kappa = layer.bs, layer.wn, layer.kappa
    L = torch.empty((len(Xs), d + 1), dtype=layer.R.dtype)
    L[:, :d], L[:, d] = torch.from_numpy(Xs), 1.0
    pairs_k, pairs_i = [], []
    for s in range(0, n, BLOCK):
        cols = slice(s, min(s + BLOCK, n))
        G = (L @ layer.R[cols].T).double().numpy()  # (k, block)
        G += np.multiply.outer(xn * kappa, wn[cols]) + kappa * np.abs(bs[cols]) + np.multiply.outer(e, wn[cols]) \
            + layer.floor
        kk, ii = np.nonzero((low - e * wn[t])[:, None] <= G)
        keep = ii + s != t[kk]
        pairs_k.append(kk[keep])
        pairs_i.append(ii[keep] + s)
    return np.concatenate(pairs_k), np.concatenate(pairs_i)


def _tiers23(layer: _Scaled, X, Xg, xn, low, t, k2, i2, s0, good, e, eps) -> None:
    """Tiers 2 and 3 for the pairs (k2, i2) of the witnesses ``Xg`` (= scaled ``X[s0 : s0 + len(Xg)]``) at margins
    ``eps`` (``e``: scaled): float64 products over the union of their rows, then :func:`_row_check` on the exact
    differences of the pairs left; writes False into ``good`` for each witness that fails."""
    d = layer.W.shape[1]
    bs, wn = layer.bs, layer.wn
    union, col = np.unique(i2, return_inverse=True)
    G = Xg @ (layer.W[union] / layer.kw).T  # (small, |union|)
    g = G[k2 - s0, col] + bs[i2]
    g += gamma(d + 4) * (xn[k2] * wn[i2] + np.abs(bs[i2])) + (d + 4) * 2.0**-1070 * (1 + layer.B)
    sure = g + e[k2] * (wn[t[k2]] + wn[i2]) < low[k2]
    for k in np.unique(k2[~sure]):
        i3 = i2[~sure & (k2 == k)]
        good[k] = _row_check(layer.W[i3] - layer.W[t[k]], layer.b[i3] - layer.b[t[k]], X[k], float(eps[k]))


def _row_check_all(W, b, t, x, eps) -> bool:
    """:func:`_row_check` of category t's every constraint, a block of rows at a time."""
    return all(
        _row_check(np.delete(W[s], t - s.start, axis=0) - W[t] if s.start <= t < s.stop else W[s] - W[t],
                   np.delete(b[s], t - s.start) - b[t] if s.start <= t < s.stop else b[s] - b[t], x, eps)
        for s in (slice(lo_, min(lo_ + BLOCK, len(W))) for lo_ in range(0, len(W), BLOCK)))


def _lowp():
    """(torch dtype, unit roundoff of inputs and output, unit roundoff of the accumulation, subnormal half-spacing)."""
    import torch

    try:
        native = torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported()
    except AttributeError:
        native = False
    if native:
        return torch.bfloat16, 2.0**-8, 2.0**-24, 2.0**-134
    return torch.float32, 2.0**-24, 2.0**-24, 2.0**-150


def _fast_categories(W, b, rows_all, X_all, pos, eps) -> np.ndarray:
    """Sufficient test for many witnesses at once, in scaled units (W, b and X scaled by exact powers of two):
    own_t - max_{i != t} (x.w_i + b_i) > eps (||w_t|| + max ||w_i||) + the product's rounding bound, since
    ||w_t - w_i|| <= ||w_t|| + ||w_i||. Witnesses that fail it are not rejected, only re-checked exactly.
    Scaled copies are made one block of rows at a time: the only whole copy is the low-precision layer."""
    import torch

    n, d = W.shape
    rows = rows_all[pos]
    kw = float(_pow2_scale(np.array([[_abs_max(W)]]))[0])
    xmax = max(_abs_max(X_all[pos[s : s + BLOCK]]) for s in range(0, len(pos), BLOCK))
    kx = float(_pow2_scale(np.array([[xmax]]))[0])
    bs = b / (kw * kx)
    if not np.all(np.abs(bs) <= LOWP_RANGE):  # beyond the narrow type's range: left to float64 (LOWP_RANGE)
        return np.zeros(len(rows), dtype=bool)
    dtype, u, v, tiny = _lowp()
    kappa = (2 * u + u * u) * (1 + gamma(d + 2, v)) + gamma(d + 2, v) + u  # inputs, accumulation, output
    R = torch.empty((n, d + 1), dtype=dtype)
    wn = np.empty(n)
    for s in range(0, n, BLOCK):
        Wb = W[s : s + BLOCK] / kw
        wn[s : s + BLOCK] = _norm_up(Wb)
        R[s : s + BLOCK, :d] = torch.from_numpy(Wb)
    R[:, d] = torch.from_numpy(bs)
    N, B = float(wn.max()), float(np.abs(bs).max())
    need = np.empty(len(rows))
    gram = kx == kw and len(np.unique(rows)) == len(rows) and 2 * len(rows) >= n
    for lo_ in range(0, len(rows), BLOCK):
        sl = slice(lo_, min(lo_ + BLOCK, len(rows)))
        Xs, r = X_all[pos[sl]] / kx, rows[sl]
        gram = gram and np.array_equal(Xs, W[r] / kw)  # witnesses x_t = w_t: the logits are the Gram matrix
        xn = _norm_up(Xs)
        own = np.einsum("kd,kd->k", Xs, W[r] / kw) + bs[r]
        own_err = gamma(d + 3) * (xn * wn[r] + np.abs(bs[r]))
        err = kappa * (xn * N + 2 * B) + tiny * 4 * (d + 3) * max(1.0, B) + gamma(2) * (np.abs(own) + 2 * B)
        need[sl] = own - own_err - err - (eps[sl] / kx) * (wn[r] + N)  # the largest other logit must stay below
    top = _gram_top(R, bs, rows, dtype) if gram else _general_top(R, X_all, pos, rows, kx, dtype)
    return top < need


def _general_top(R, X_all, pos, rows, kx, dtype) -> np.ndarray:
    """max_{i != t} x_t.w_i + b_i (scaled) per witness, in blocks of witnesses against blocks of R = [W, b]."""
    import torch

    n, d = R.shape[0], R.shape[1] - 1
    top = np.full(len(rows), -np.inf)
    for lo_ in range(0, len(rows), BLOCK):
        sl = slice(lo_, min(lo_ + BLOCK, len(rows)))
        L = torch.empty((sl.stop - sl.start, d + 1), dtype=dtype)
        L[:, :d] = torch.from_numpy(X_all[pos[sl]] / kx)
        L[:, d] = 1.0
        own_rows = torch.from_numpy(rows[sl])
        for lo2 in range(0, n, BLOCK):
            cols = slice(lo2, min(lo2 + BLOCK, n))
            G = L @ R[cols].T
            mine = torch.nonzero((own_rows >= cols.start) & (own_rows < cols.stop)).flatten()
            if len(mine):
                G[mine, own_rows[mine] - cols.start] = -torch.inf  # the target's own (zero) row
            top[sl] = np.maximum(top[sl], G.amax(dim=1).double().numpy())
    return top


def _gram_top(R, bs, rows, dtype) -> np.ndarray:
    """The same maxima when every witness is its own row (x_t = w_t): the logits w_t.w_i + b_i come from the
    symmetric matrix P_ti = w_t.w_i + b_t + b_i (products of [w, b, 1] with [w, 1, b]), whose upper triangle of
    blocks serves both its rows and its columns: half the products. Returns max_{i != t} P_ti - b_t."""
    import torch

    n, d = R.shape[0], R.shape[1] - 1
    Lm = torch.empty((n, d + 2), dtype=dtype)
    Rm = torch.empty((n, d + 2), dtype=dtype)
    Lm[:, : d + 1], Lm[:, d + 1] = R, 1.0  # [w, b, 1]
    Rm[:, :d], Rm[:, d], Rm[:, d + 1] = R[:, :d], 1.0, R[:, d]  # [w, 1, b]
    best = torch.full((n,), -torch.inf, dtype=torch.float64)
    for lo_ in range(0, n, BLOCK):
        ri = slice(lo_, min(lo_ + BLOCK, n))
        for lo2 in range(lo_, n, BLOCK):
            cj = slice(lo2, min(lo2 + BLOCK, n))
            P = Lm[ri] @ Rm[cj].T
            if lo2 == lo_:
                P.fill_diagonal_(-torch.inf)
            else:
                best[cj] = torch.maximum(best[cj], P.amax(dim=0).double())
            best[ri] = torch.maximum(best[ri], P.amax(dim=1).double())
    return best.numpy()[rows] - bs[rows]


def _shifted(b: np.ndarray) -> np.ndarray:
    """The biases of the categories' witness checks: ``b - c`` (c the midpoint of their range) where the largest
    |b_i| exceeds :data:`LOWP_RANGE` and every ``b_i - c`` is exact (its two-sum error 0), else ``b``: each
    category's rows keep their offsets ``b_i - b_t`` exactly, and the low-precision passes can run."""
    if not b.size or float(np.abs(b).max()) <= LOWP_RANGE:
        return b
    c = float(b.min()) / 2 + float(b.max()) / 2
    s = b - c
    z = s - b
    return s if not np.any((b - (s - z)) + (-c - z)) else b


def _certificate_categories(W, b, t, cert, lo, hi, eps) -> bool:
    """Dual weights over categories (never t itself) bounding the radius of category t by eps."""
    rows, weights = _as_certificate(cert, len(W))
    if rows is None or (rows == t).any():
        return False
    keep = weights > 0
    rows, y = rows[keep], weights[keep]
    with np.errstate(over="ignore", invalid="ignore"):
        Ac = np.hstack([W[rows] - W[t], (b[rows] - b[t])[:, None]])
    if not np.isfinite(Ac).all():  # a difference that overflows proves nothing here
        return False
    Ac /= _pow2_scale(Ac)[:, None]
    A, c = Ac[:, :-1], Ac[:, -1]
    # A zero row: 0.x + c < 0 fails outright when c >= 0 (a duplicate); else it proves nothing. A row zero only
    # after scaling has |a_i| < 2^-1074 |c_i| and the same sign everywhere in any float64 box.
    zero = ~(A != 0).any(axis=1)
    if zero.any():
        return bool((c[zero] >= 0).any())
    sigma = np.sqrt(np.einsum("kd,kd->k", A, A))
    z = y / sigma
    scale = np.maximum(np.abs(lo), np.abs(hi))
    V, depth = _chunked(z[None], Ac)
    zr = z @ (np.abs(A) @ scale)
    return bool(_dual_accept(V[:, :-1], V[:, -1], zr[None], (z @ np.abs(c))[None], np.array([_norm_mass(y, sigma)]),
                             depth, len(y), lo, hi, eps)[0])


def _norm_mass(y: np.ndarray, sigma: np.ndarray) -> float:
    """sum y_i over rows whose computed norm is at least 2^-400: there sum z_i ||a_i|| >= it (1 - gamma_(d+4));
    a smaller norm may have lost squares to underflow, so its row counts for nothing in this lower bound."""
    return float(y[sigma >= 2.0**-400].sum())


def _as_certificate(cert, n: int):
    try:
        rows, weights = cert
        rows, weights = np.asarray(rows), np.asarray(weights, dtype=np.float64)
    except (TypeError, ValueError):
        return None, None
    if (rows.ndim != 1 or rows.shape != weights.shape or not rows.size or rows.dtype.kind not in "iu"
            or ((rows < 0) | (rows >= n)).any() or len(np.unique(rows)) != len(rows)
            or not np.isfinite(weights).all() or (weights < 0).any() or not (weights > 0).any()):
        return None, None
    # The bound is homogeneous in the weights: scale them by a power of two to a largest weight in [0.5, 1), so
    # that no sum overflows (weights of 1e308 would make every bound inf), and drop those below 2^-1000, whose
    # z_i would be subnormal (any subset of the rows with non-negative weights is a certificate of its own).
    weights = weights / float(_pow2_scale(weights[None])[0])
    weights[weights < 2.0**-1000] = 0.0
    return rows.astype(np.int64), weights


def _chunked(Q: np.ndarray, A: np.ndarray) -> tuple[np.ndarray, int]:
    """Q @ A over chunks of CHUNK rows of A, the chunks' products added pairwise through a binary counter (at
    most log2 partial sums held); and the depth bound: each entry's rounding is at most gamma_(CHUNK + depth + 1)
    times the same product of absolute values."""
    stack, count = [], 0
    for s in range(0, A.shape[0], CHUNK):
        part, level = Q[:, s : s + CHUNK] @ A[s : s + CHUNK], 0
        while stack and stack[-1][0] == level:
            part, level = stack.pop()[1] + part, level + 1
        stack.append((level, part))
        count += 1
    total = stack.pop()[1]
    while stack:
        total = stack.pop()[1] + total
    return total, 2 * int(np.ceil(np.log2(max(count, 1))))


def _dual_accept(V, cz, zr, zc, ysum, depth, k, lo, hi, eps) -> np.ndarray:
    """LP duality with its rounding bound, for m certificates at once.

    With z_i = y_i / sigma_i for any sigma_i > 0, summing z_i (a_i.x + c_i + t ||a_i||) <= 0 over the rows gives
    t sum z_i ||a_i|| <= sup_box(-v) - sum z_i c_i with v = sum z_i a_i. ``V`` (m, d) and ``cz`` (m,) are the
    computed v and sum z_i c_i over rows scaled by exact powers of two (entries at most 1), ``zr`` and ``zc``
    bound sum z_i |a_i| . max(|lo|, |hi|) and sum z_i |c_i|, ``ysum`` is sum y_i over rows whose computed norm
    sigma_i is accurate (:func:`_norm_mass`), so sum z_i ||a_i|| >= ysum (1 - gamma_(d+4)); ``k`` bounds the rows
    per certificate: each of the k products in an entry of V may lose 2^-1075 to underflow. Weights are at
    most 1 (:func:`_as_certificate`); a bound that is not finite accepts nothing.
    """
    d = V.shape[1]
    g = gamma(CHUNK + depth + 3)
    with np.errstate(over="ignore", invalid="ignore"):
        sup = np.maximum(-V * lo, -V * hi)
        num = sup.sum(axis=1) - cz
        tiny = (k + 1) * 2.0**-1074 * (np.maximum(np.abs(lo), np.abs(hi)).sum() + 1)
        err = g * (zr + zc) + gamma(d + 2) * (np.abs(sup).sum(axis=1) + np.abs(cz)) + tiny
        rhs = eps * ysum * (1 - gamma(d + 4))
        return np.isfinite(num) & np.isfinite(err) & np.isfinite(rhs) & (num + err <= rhs)


def _witnesses_assignments(W, b, S, X, lo, hi, eps) -> np.ndarray:
    """Argmaxable label sets: s_i (w_i.x + b_i) > eps ||w_i|| for every label, blocked over the rows of W."""
    ok = _in_box(X, lo, hi)
    out = ok.copy()
    idx = np.flatnonzero(ok)
    if not idx.size:
        return out
    eps = np.broadcast_to(np.asarray(eps, dtype=np.float64), (len(X),))[idx, None]  # one margin per item, or all
    d = W.shape[1]
    xm = _pow2_scale(X[idx])
    Xs = X[idx] / xm[:, None]
    xabs = np.abs(Xs)
    for s in range(0, len(W), BLOCK):
        Wb, bb = W[s : s + BLOCK], b[s : s + BLOCK]
        m = _pow2_scale(np.hstack([Wb, bb[:, None]]))
        Wb, bb = Wb / m[:, None], bb / m
        sign = np.where(S[idx, s : s + BLOCK], 1.0, -1.0)
        val = sign * ((Xs @ Wb.T) * xm[:, None] + bb)  # (items, rows)
        # rounding, and 2^-1075 per scaled entry, product and offset that underflowed (subnormal rows)
        err = gamma(d + 4) * ((xabs @ np.abs(Wb).T) * xm[:, None] + np.abs(bb)) + 2.0**-1074 * (
            (2 * d + 2) * xm[:, None] + 2)
        zero = ~(Wb != 0).any(axis=1)
        good = val - err - eps * _norm_up(Wb)[None, :] > 0
        good[:, zero] = (sign * bb)[:, zero] > 0
        out[idx] &= good.all(axis=1)
    return out


def _certificates_assignments(W, b, S, certs, lo, hi, eps) -> np.ndarray:
    """Dual weights over labels, rows a_i = -s_i w_i and c_i = -s_i b_i; batched: the rows' exact scaling and
    norms do not depend on the label set, so each batch of certificates is one chunked product with W."""
    n, d = W.shape
    Wc = np.hstack([W, b[:, None]])
    Wc /= _pow2_scale(Wc)[:, None]
    sigma = np.sqrt(np.einsum("nd,nd->n", Wc[:, :d], Wc[:, :d]))
    r = np.abs(Wc[:, :d]) @ np.maximum(np.abs(lo), np.abs(hi))
    out = np.zeros(len(certs), dtype=bool)
    eps = np.broadcast_to(np.asarray(eps, dtype=np.float64), (len(certs),))  # one margin per item, or all
    step = max(1, min(256, (1 << 27) // (8 * n)))
    for s0 in range(0, len(certs), step):
        batch = np.arange(s0, min(s0 + step, len(certs)))
        Q = np.zeros((len(batch), n))  # signed z per row
        Z = np.zeros((len(batch), n))
        ysum = np.ones(len(batch))
        todo = np.zeros(len(batch), dtype=bool)
        for k, p in enumerate(batch):
            rows, y = _as_certificate(certs[p], n)
            if rows is None:
                continue
            rows, y = rows[y > 0], y[y > 0]
            sgn = np.where(S[p, rows], 1.0, -1.0)
            zero = sigma[rows] == 0
            if zero.any():  # 0.x - s_i b_i < 0 fails outright when -s_i b_i >= 0; else the row proves nothing
                out[p] = bool((-sgn[zero] * Wc[rows[zero], d] >= 0).any())
                continue
            with np.errstate(over="ignore"):
                Z[k, rows] = y / sigma[rows]
            Q[k, rows] = -sgn * Z[k, rows]
            ysum[k], todo[k] = _norm_mass(y, sigma[rows]), True
        with np.errstate(over="ignore", invalid="ignore"):
            V, depth = _chunked(Q, Wc)
            acc = _dual_accept(V[:, :d], V[:, d], Z @ r, Z @ np.abs(Wc[:, d]), ysum, depth, n, lo, hi, eps[batch])
        out[batch[todo]] = acc[todo]
    return out
