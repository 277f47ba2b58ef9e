"""Whether a container can reach a later check at all, after an earlier check of the same value sent it away.

A container answers an `isinstance(spec, C)` test False. After `if not isinstance(spec, AttentionSpec):
return …`, inside `if isinstance(spec, AttentionSpec):`, or right of `isinstance(spec, AttentionSpec) and`,
no container gets to a later check of `spec`: that check answers nothing for a container of its own, and
its wrong answer is the earlier check's (a related location of it, not a finding).
"""

from __future__ import annotations

import libcst as cst

from kvlint.types import RelatedLocation

_EXITS = (cst.Return, cst.Continue, cst.Break, cst.Raise)


def _test_of(check: cst.CSTNode, parent) -> tuple[cst.CSTNode, bool]:
    """The expression holding the check's answer and whether it is negated (`not isinstance(…)`)."""
    holder, negated = check, False
    while isinstance(parent(holder), cst.UnaryOperation) and isinstance(parent(holder).operator, cst.Not):
        holder, negated = parent(holder), not negated
    return holder, negated


def _inside(node: cst.CSTNode, ancestor: cst.CSTNode, parent) -> bool:
    while node is not None:
        if node is ancestor:
            return True
        node = parent(node)
    return False


def _exits(suite: cst.BaseSuite) -> bool:
    body = suite.body if isinstance(suite, cst.IndentedBlock) else [suite]
    last = body[-1] if body else None
    smalls = last.body if isinstance(last, (cst.SimpleStatementLine, cst.SimpleStatementSuite)) else ()
    return bool(smalls) and isinstance(smalls[-1], _EXITS)


def dominated(earlier: cst.CSTNode, later: cst.CSTNode, parent) -> bool:
    """Whether a container that meets `earlier` never reaches `later` (same function, earlier in the source)."""
    test, negated = _test_of(earlier, parent)
    holder = parent(test)
    # Short-circuit: `isinstance(s, C) and <later>` / `not isinstance(s, C) or <later>`.
    if isinstance(holder, cst.BooleanOperation) and holder.left is test and _inside(later, holder.right, parent):
        return isinstance(holder.operator, cst.And) != negated
    if not isinstance(holder, (cst.If, cst.IfExp)) or holder.test is not test:
        return False
    # A container answers False: it takes the else branch of a positive test, the body of a negated one.
    taken, skipped = (holder.orelse, holder.body) if not negated else (holder.body, holder.orelse)
    if skipped is not None and _inside(later, skipped, parent):
        return True  # nested under the branch a container never takes
    if isinstance(holder, cst.If) and taken is not None and not isinstance(taken, (cst.If, cst.Else)):
        # `if not isinstance(s, C): return` then later statements of the same block
        if _exits(taken) and not _inside(later, holder, parent):
            block = parent(holder)
            if not isinstance(block, (cst.IndentedBlock, cst.Module)):
                return False
            position = next(i for i, statement in enumerate(block.body) if statement is holder)
            return any(_inside(later, statement, parent) for statement in block.body[position + 1 :])
    return False


def related_to(context, node: cst.CSTNode, code: str, message: str):
    """A related location of a finding: the dominated check, where it is and what it would have said."""
    position = context.position(node)
    return RelatedLocation(
        context.path,
        position.start.line,
        position.start.column + 1,
        position.end.line,
        position.end.column + 1,
        code,
        message,
    )
