"""Words for counts in messages: one helper, so that every count printed agrees in number ("1 row", "2 rows")."""

from __future__ import annotations


def count(n: float, word: str, plural: str | None = None) -> str:
    """``n`` and ``word``, in the singular for exactly one and in the plural otherwise (``plural``, default the
    word and an s); whole numbers with thousands separators.

    Parameters
    ----------
    n
        The count.
    word
        The singular noun (``"row"``); may be several words (``"malformed line"``).
    plural
        The plural, when it is not ``word + "s"`` (``"entries"``).

    Returns
    -------
    str
        E.g. ``"1 row"``, ``"2,048 rows"``.

    Examples
    --------
    >>> count(1, "row"), count(0, "row"), count(12345, "request"), count(1, "entry", "entries")
    ('1 row', '0 rows', '12,345 requests', '1 entry')
    """
    number = f"{int(n):,}" if float(n).is_integer() else f"{n:,}"
    return f"{number} {word if n == 1 else plural or word + 's'}"
