"""How long a prefill takes: a profile ``fixed_ms + a * n + b * n**2`` of the prompt's tokens, fitted to
measured prefill times (an engine's own metrics or a benchmark) by :func:`fit_prefill`.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
from numpy.typing import ArrayLike

from ..errors import InputError, warn
from ..inputs.words import count

__all__ = ["PrefillProfile", "fit_prefill", "get_prefill", "save_prefill", "user_prefills"]

#: The fields of a saved profile (besides its source), as the presets file holds them.
_FIELDS = ("fixed_ms", "ms_per_token", "ms_per_token2", "max_relative_error")


@dataclass(frozen=True)
class PrefillProfile:
    """A prefill's time as a function of its prompt: ``fixed_ms + ms_per_token * n + ms_per_token2 * n**2``
    (ms; ``n`` prompt tokens; the quadratic term is attention's). Goes wherever ``prefill_ms`` does in
    :func:`perfmodel.replay_ttft`.

    Parameters
    ----------
    fixed_ms : float
        Time of a prefill of no tokens (ms, >= 0): scheduling, launch.
    ms_per_token : float
        ms per prompt token (>= 0): the linear layers.
    ms_per_token2 : float
        ms per squared prompt token (>= 0): attention.
    name : str
        What it profiles.
    max_relative_error : float
        The fit's largest relative error on its measurements (NaN: not fitted).
    note : str
        What the fit could not tell from its measurements (e.g. a term held at 0); empty when it told all.

    Examples
    --------
    >>> from perfmodel import PrefillProfile
    >>> PrefillProfile(5.0, 0.1, 0.0).prefill_ms([0, 1000]).tolist()
    [5.0, 105.0]
    """

    fixed_ms: float
    ms_per_token: float
    ms_per_token2: float = 0.0
    name: str = "prefill"
    max_relative_error: float = float("nan")
    note: str = ""

    def __post_init__(self) -> None:
        for field in ("fixed_ms", "ms_per_token", "ms_per_token2"):
            value = getattr(self, field)
            if not (isinstance(value, (int, float, np.floating, np.integer)) and 0 <= value < np.inf):
                raise InputError(
                    f"PrefillProfile: {field}",
                    f"must be a finite number >= 0, got {value!r}",
                    "pass ms, ms per token and ms per squared token >= 0 (or fit them with fit_prefill)",
                )

    def prefill_ms(self, num_input_tokens: ArrayLike) -> np.ndarray:
        """Each prompt's prefill time (ms) for ``num_input_tokens`` tokens.

        >>> PrefillProfile(0.0, 0.0, 1e-6).prefill_ms([1000, 2000]).tolist()
        [1.0, 4.0]
        """
        n = np.asarray(num_input_tokens, dtype=np.float64)
        return self.fixed_ms + n * (self.ms_per_token + n * self.ms_per_token2)


def fit_prefill(num_input_tokens: ArrayLike, measured_ms: ArrayLike, *, name: str = "fitted") -> PrefillProfile:
    """Fit a prefill profile ``fixed_ms + a * n + b * n**2`` to measured prefill times.

    As :func:`perfmodel.fit_link`: least squares on the *relative* error (prompts span orders of magnitude),
    every coefficient >= 0. Where the measurements cannot tell every term apart (two prompt lengths tell two), the
    fit keeps, of the sets of terms they can tell apart (each pair), the one that fits them with the least error
    (the simpler on a tie), the other term held at 0, and the profile's ``note`` says which and why: it never
    drops a term that alone describes the measurements. Prompts of one length cannot tell how the time grows
    with the prompt: they are refused.

    Parameters
    ----------
    num_input_tokens
        Each measured prefill's prompt tokens (>= 0).
    measured_ms
        Each measured prefill's time in ms (> 0): an engine's own metric (e.g. vLLM's prefill time) or
        a benchmark's time to first token at a concurrency of 1, less the first decode step.
    name
        The profile's name.

    Returns
    -------
    PrefillProfile
        The fitted profile, its largest relative error in ``max_relative_error``, the terms held at 0 in ``note``.

    Examples
    --------
    >>> import numpy as np
    >>> from perfmodel import fit_prefill
    >>> n = np.array([128, 1024, 4096, 8192, 16384])
    >>> profile = fit_prefill(n, 8.0 + 0.05 * n + 2e-6 * n**2.0)
    >>> round(profile.fixed_ms, 6), round(profile.ms_per_token, 6), round(profile.ms_per_token2 * 1e6, 6)
    (8.0, 0.05, 2.0)

    Two prompt lengths whose times grow as the square of the prompt keep the quadratic term:

    >>> two = fit_prefill([1000, 2000], [100.0, 400.0])
    >>> round(two.ms_per_token2 * 1e4, 9), two.ms_per_token, two.max_relative_error < 1e-9
    (1.0, 0.0, True)
    """
    from ..network.fits import FAR_OFF, SIZE_SPREAD, distinct_points, measured_vectors

    read = measured_vectors("fit_prefill", num_input_tokens=num_input_tokens, measured_ms=measured_ms)
    n, t = cast(np.ndarray, read["num_input_tokens"]), cast(np.ndarray, read["measured_ms"])
    if n.shape != t.shape:
        raise InputError(
            "fit_prefill",
            f"{count(n.size, 'prompt size')} but {count(t.size, 'time')}",
            "pass one measured time per prompt",
        )
    rules = (("num_input_tokens", n, n >= 0, "from 0 to 2**53"), ("measured_ms", t, t > 0, "finite and > 0"))
    for label, values, ok, rule in rules:  # (prompts beyond 2**53 tokens: their square would leave float64)
        bad = ~(ok & np.isfinite(values) & (values <= 2.0**53))
        if bad.any():
            i = int(np.argmax(bad))
            raise InputError(
                f"fit_prefill: {label}",
                f"{count(int(bad.sum()), 'value')} not {rule}, first at position {i}: {float(values[i])!r}",
                "drop failed or empty measurements",
            )
    if distinct_points(np.maximum(n, 1.0)) < 2:  # (lengths less than 10% apart are one: fit_link's rule)
        got = count(n.size, "measurement") if n.size < 2 else f"{count(n.size, 'measurement')} of one prompt length"
        raise InputError(
            "fit_prefill",
            f"needs measurements of at least two prompt lengths ({SIZE_SPREAD:.0%} apart or more), got {got}",
            "measure prefills of several prompt lengths (e.g. 128 to 16k tokens)",
        )
    columns = {"fixed": np.ones_like(n), "linear": n, "quadratic": n * n}
    solution, notes = _best_terms(columns, t)
    fixed, a, b = (float(solution.get(term, 0.0)) for term in columns)
    if a == b == 0:
        notes.append("the time does not grow with the prompt on these measurements: a constant")
    profile: Any = PrefillProfile(fixed, a, b, name=name)
    error = float(np.max(np.abs(profile.prefill_ms(n) - t) / t))
    if not error <= FAR_OFF:
        warn(
            f"fit_prefill: the fit is far from the measurements (max error {error:.0%}): check that they are "
            "prefill times in ms of one model and setup, and measure more prompt lengths"
        )
    return PrefillProfile(fixed, a, b, name=name, max_relative_error=error, note="; ".join(notes))


def _best_terms(columns: dict[str, np.ndarray], t: np.ndarray) -> tuple[dict[str, float], list[str]]:
    """The non-negative fit of ``t`` by ``columns`` (on the relative error) with the least error among the sets of
    terms the measurements identify: all of them where they tell every term apart, else each largest set they do
    (two prompt lengths: each pair), the first of equal fits kept (the simpler form, in the terms' order); and the
    notes saying which terms are held at 0 (and, where the simpler form is not kept, why).

    >>> n = np.array([1000.0, 2000.0])
    >>> solution, notes = _best_terms({"fixed": np.ones(2), "linear": n, "quadratic": n * n}, np.array([100.0, 400.0]))
    >>> {term: round(value, 9) for term, value in solution.items()}
    {'fixed': 0.0, 'quadratic': 0.0001}
    >>> notes[0][:107]
    'the linear term cannot be told apart from the fixed and quadratic on these measurements: held at 0; the fix'
    """
    from ..network.fits import nonnegative_least_squares

    def identified(terms: tuple[str, ...]) -> bool:
        scaled = np.column_stack([columns[term] for term in terms]) / t[:, None]
        return bool(np.linalg.matrix_rank(scaled / np.abs(scaled).max(axis=0), tol=1e-9) == len(terms))

    names = tuple(columns)
    for size in range(len(names), 0, -1):  # the largest sets of terms the measurements tell apart
        candidates = [terms for terms in itertools.combinations(names, size) if identified(terms)]
        if candidates:
            break
    fits = []  # (sum of squared relative errors, largest relative error, the fit) of each set
    for terms in candidates:
        design = np.column_stack([columns[term] for term in terms]) / t[:, None]
        x = nonnegative_least_squares(design, np.ones_like(t))
        errors = design @ x - 1.0
        fits.append((float(np.sum(errors**2)), float(np.abs(errors).max()), dict(zip(terms, map(float, x)))))
    best = fits[0]
    for fit in fits[1:]:  # (the first of equal fits: the simpler form)
        if fit[0] < best[0] - 1e-12 * max(best[0], 1.0):
            best = fit
    solution = best[2]
    said = " and ".join(solution)
    notes = [
        f"the {term} term cannot be told apart from the {said} on these measurements: held at 0"
        for term in names
        if term not in solution
    ]
    if best is not fits[0]:  # (why not the simpler form: it fits worse with terms >= 0)
        notes[-1] += (
            f"; the {said} fit them best of the sets of {len(solution)} terms they tell apart (the "
            f"{' and '.join(fits[0][2])}, non-negative, are {fits[0][1]:.0%} off at most)"
        )
    return solution, notes


def save_prefill(profile: PrefillProfile, *, source: str = "", replace: bool = False) -> Path:
    """Save ``profile`` as a user preset under its name: ``prefill_ms="<name>"`` then takes it wherever a profile
    goes (a trace column of that name comes first), and ``perfmodel presets list`` lists it. Returns the presets
    file.

    A profile name already saved (names ignore case) is refused unless ``replace=True``; the file is written
    atomically, and an entry written by hand is never replaced without it.

    Parameters
    ----------
    profile
        The profile (a :class:`PrefillProfile`; its name is the preset's), e.g. from :func:`fit_prefill`.
    source
        Where it comes from, shown by ``perfmodel presets list``.
    replace
        Replace a preset of that name.

    Returns
    -------
    pathlib.Path
        The presets file written.

    Examples
    --------
    >>> import os, tempfile; os.environ["PERFMODEL_CONFIG_DIR"] = tempfile.mkdtemp()
    >>> _ = save_prefill(PrefillProfile(5.0, 0.1, name="our-h200"), source="vLLM metrics, 2026-11")
    >>> get_prefill("our-h200").prefill_ms([1000]).tolist()
    [105.0]
    """
    from ..inputs import user_presets as _presets

    if not isinstance(profile, PrefillProfile):
        raise InputError(
            "save_prefill", f"takes a PrefillProfile, got {type(profile).__name__}", "fit one: fit_prefill"
        )
    entry: dict[str, Any] = {field: getattr(profile, field) for field in _FIELDS}
    if np.isnan(entry["max_relative_error"]):
        del entry["max_relative_error"]  # (not fitted: JSON has no NaN)
    return _presets.save("prefills", profile.name, {**entry, "source": source}, builtin=set(), replace=replace)


def user_prefills() -> dict[str, PrefillProfile]:
    """The prefill profiles saved with :func:`save_prefill`, by name; one that cannot be used (or a presets file
    that cannot be read) is left out with a ``UserWarning`` naming the file, the entry and what is wrong.

    Returns
    -------
    dict of str to PrefillProfile
        The usable saved profiles, by name (empty when none is saved).

    Examples
    --------
    >>> import os, tempfile; os.environ["PERFMODEL_CONFIG_DIR"] = tempfile.mkdtemp()
    >>> user_prefills()
    {}
    """
    from ..inputs import user_presets as _presets

    try:
        usable, bad = user_prefills_and_errors()
    except InputError as error:  # (a file that cannot be read: the others, built in, still listed)
        warn(str(error))
        return {}
    _presets.warn_unusable(bad)
    return usable


def user_prefills_and_errors() -> tuple[dict[str, PrefillProfile], dict[str, InputError]]:
    """The usable saved profiles, and the error of each that is not (by name)."""
    from ..inputs import user_presets as _presets

    def parse(name: str, entry: dict[str, Any]) -> PrefillProfile:
        _presets.unknown_fields(name, "prefills", entry, {*_FIELDS, "source", _presets.SAVED_BY})
        values = {field: entry[field] for field in _FIELDS if field in entry}
        missing = [field for field in _FIELDS[:2] if field not in entry]
        if missing:
            raise _presets.entry_error(name, "prefills", f"has no {' or '.join(missing)}")
        for field, value in values.items():  # (the field named: the profile's own check speaks of itself)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise _presets.entry_error(name, "prefills", f"{field!r} is {_presets.json_type(value)}, not a number")
        try:
            return PrefillProfile(**{"max_relative_error": float("nan"), **values}, name=name)
        except InputError as error:
            raise _presets.entry_error(name, "prefills", f"{error.where.split(': ')[-1]!r} {error.problem}") from None

    return _presets.parse_each("prefills", parse)


def get_prefill(name: str) -> PrefillProfile:
    """The saved prefill profile ``name`` (:func:`save_prefill`).

    Parameters
    ----------
    name
        The profile's name (case ignored).

    Returns
    -------
    PrefillProfile
        The profile.

    Examples
    --------
    >>> import os, tempfile; os.environ["PERFMODEL_CONFIG_DIR"] = tempfile.mkdtemp()
    >>> _ = save_prefill(PrefillProfile(2.0, 0.05, name="lab"))
    >>> get_prefill("LAB").fixed_ms
    2.0
    """
    from ..inputs import user_presets as _presets

    usable, bad = user_prefills_and_errors()
    key = _presets.key_of(name)
    if key in bad:
        raise bad[key]
    if key not in usable:
        raise InputError(
            "prefill_ms",
            f"{name!r} is neither a trace column nor a saved prefill profile"
            + (f" (saved: {', '.join(sorted(usable))})" if usable else ""),
            "give a trace column of prefill times, or save a profile first (perfmodel.save_prefill)",
        )
    return usable[key]
