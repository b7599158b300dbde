r"""Free texts from user code, escaped so that every store holds them: NUL on PostgreSQL.

PostgreSQL's TEXT cannot hold U+0000 (psycopg refuses it before sending), while an
exception message, a traceback or a human task's title may carry one. The texts cairn
stores verbatim from user code pass through `stored` on the way in and `loaded` on the
way out, in the shared row mapping (store/_sql), so both stores hold the same form:

- U+0000 is stored as U+0001 followed by "0";
- U+0001 itself is stored as U+0001 followed by "1" (so the escape is reversible).

A text with neither character is stored unchanged, and so is read back unchanged: rows
written before this escape existed read as they were (unless they held U+0001, which no
real message does). Values cairn serializes as JSON need none of this: JSON writes NUL
as the six characters `\u0000`.

Escaped columns: step_attempts.error_type, message and traceback; tasks.title, assignee
and submitted_by. Identifiers (run ids, names, keys) are not texts: they are checked
where they enter, or refused by the store with StoreRefused.
"""

from __future__ import annotations

ESCAPE = "\x01"
_NUL = "\x00"
_TO_STORE = str.maketrans({_NUL: ESCAPE + "0", ESCAPE: ESCAPE + "1"})
_CODES = {"0": _NUL, "1": ESCAPE}


def stored(text: str) -> str:
    """`text` as the store holds it: NUL and the escape character escaped."""
    if _NUL not in text and ESCAPE not in text:
        return text
    return text.translate(_TO_STORE)


def loaded(text: str) -> str:
    """The text `stored` was given, from what the store holds (the inverse of `stored`)."""
    if ESCAPE not in text:
        return text
    head, *rest = text.split(ESCAPE)
    parts = [head]
    for piece in rest:
        # A lone escape at the end, or an unknown code, is kept as it was (not ours).
        code = piece[:1]
        parts.append(_CODES[code] + piece[1:] if code in _CODES else ESCAPE + piece)
    return "".join(parts)


def stored_or_none(text: str | None) -> str | None:
    """`stored`, passing None through."""
    return None if text is None else stored(text)


def loaded_or_none(text: str | None) -> str | None:
    """`loaded`, passing None through."""
    return None if text is None else loaded(text)
