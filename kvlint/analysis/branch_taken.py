"""What the code does with a group for which a check answers False, when that is plain to see: it raises.

A container-blind check whose other branch raises (`if not isinstance(spec, MambaSpec): raise TypeError(…)`)
refuses a container loudly at startup; one whose other branch goes on computing gives a silent wrong answer.
A maintainer weighs the two differently, so KV101 says which, where the code makes it plain.
"""

from __future__ import annotations

import libcst as cst


def raised_when_false(check: cst.CSTNode, parent) -> str | None:
    """The exception the code raises right away when `check` is False: `if check: … else: raise E(…)` or
    `if not check: raise E(…)` (the check alone as the `if`'s test); None otherwise."""
    holder = parent(check)
    negated = isinstance(holder, cst.UnaryOperation) and isinstance(holder.operator, cst.Not)
    test = holder if negated else check
    statement = parent(test)
    if not isinstance(statement, cst.If) or statement.test is not test:
        return None
    if negated:
        return _raised(statement.body)
    orelse = statement.orelse
    return _raised(orelse.body) if isinstance(orelse, cst.Else) else None


def _raised(suite: cst.BaseSuite) -> str | None:
    statements = suite.body
    first = statements[0] if statements else None
    if isinstance(first, cst.SimpleStatementLine):
        first = first.body[0] if first.body else None
    if not isinstance(first, cst.Raise) or first.exc is None:
        return None
    exc = first.exc.func if isinstance(first.exc, cst.Call) else first.exc
    if isinstance(exc, cst.Name):
        return exc.value
    if isinstance(exc, cst.Attribute):
        return exc.attr.value
    return None
