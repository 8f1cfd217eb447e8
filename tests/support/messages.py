"""The two rules every answer of the magics, the panel and the CLI keeps (issue 37): its first line fits in
120 characters, and a reason is said once per answer. Tests of each face pass their outputs through ``problems``."""

from __future__ import annotations

import re

FIRST_LINE_MAX = 120
# A reason is a clause of some length: shorter pieces ("applied", "GPU 0") may rightly recur in one answer.
REASON_MIN = 30
_CLAUSE = re.compile(r"[^;:()\n]+")


def clauses(text: str) -> list[str]:
    """The clauses of ``text``: its pieces between ``; : ( )`` and line ends, trimmed, of ``REASON_MIN`` or more."""
    pieces = (" ".join(part.split()).strip(" .,`'\"") for part in _CLAUSE.findall(text))
    return [piece for piece in pieces if len(piece) >= REASON_MIN]


def problems(text: str) -> list[str]:
    """What breaks the rules in one answer: empty when it keeps them."""
    found = []
    lines = text.strip("\n").splitlines()
    first = lines[0] if lines else ""
    if len(first) > FIRST_LINE_MAX:
        found.append(f"first line is {len(first)} characters (at most {FIRST_LINE_MAX}): {first!r}")
    seen: set[str] = set()
    for clause in clauses(text):
        if clause in seen:
            found.append(f"said twice: {clause!r}")
        seen.add(clause)
    return found
