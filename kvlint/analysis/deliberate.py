"""Whether a user meets a check's wrong answer as a defect, read from what the tree says about the code.

Two kinds of code answer a container wrongly on purpose or where no user's serving depends on it:
- a deliberate fail-closed check: the way a container takes refuses (`return False`, `raise`), and the
  check's function docstring or the comment right above it says the refusal is meant (it is conservative,
  fails closed, refuses or rejects what it cannot vouch for); or the check is a conjunct of an `and` (a
  container's False makes it all False) and the comment on or right above the check's line says so
  (`# Exact type: fail closed on wrappers` above `and type(spec) is C`);
- a benchmark-only connector: the module's or class's docstring says the code exists for benchmarks.

Each answer is the tree's own words, for the finding to quote; None when the tree says neither. And one kind
of check is no defect at all: what an `assert` of test code asserts (`test_assertion`).
"""

from __future__ import annotations

import re

import libcst as cst

_ON_PURPOSE = re.compile(r"\b(conservative(?:ly)?|fail(?:s|ing|ed)?[ -]closed|refus\w*|reject\w*)\b", re.IGNORECASE)
_BENCHMARK = re.compile(r"\bbenchmark\w*", re.IGNORECASE)
_REFUSALS = (cst.Raise,)
# Test code as pytest collects it: a `tests`/`test` folder, `test_*.py`, `*_test.py`, `conftest.py`.
_TEST_MODULE = re.compile(r"(?:^|/)(?:tests?/|test_[^/]*\.py$|[^/]*_test\.py$|conftest\.py$)")


def fail_closed(check: cst.CSTNode, parent, function: cst.FunctionDef | None, comments: str = "") -> str | None:
    """The words that make `check` a deliberate fail-closed check, or None (`comments`: those on and right
    above the check's own line, kvlint.analysis.deliberate.comments_at)."""
    holder, negated = check, False
    while isinstance(parent(holder), cst.UnaryOperation) and isinstance(parent(holder).operator, cst.Not):
        holder, negated = parent(holder), not negated
    branch = parent(holder)
    if not negated and isinstance(branch, cst.BooleanOperation) and isinstance(branch.operator, cst.And):
        return _sentence(comments, _ON_PURPOSE)  # a container's False closes the whole conjunction
    if not isinstance(branch, cst.If) or branch.test is not holder:
        return None
    # A container answers the check False: it takes the body of `if not check`, else the `else`.
    taken = branch.body if negated else branch.orelse
    if taken is None or not _refuses(taken.body if isinstance(taken, cst.Else) else taken):
        return None
    texts = [comments, _comments_above(branch, parent)]
    if function is not None:
        texts += [_docstring(function.body), _comments_above(function, parent)]
    return next((found for text in texts if (found := _sentence(text, _ON_PURPOSE))), None)


def test_assertion(module_path: str, check: cst.CSTNode, parent) -> bool:
    """Whether `check` is (part of) what an `assert` statement of test code asserts: the test's expectation of
    its own fixture (`assert isinstance(sched_config.kv_cache_groups[0].kv_cache_spec, FullAttentionSpec)` after
    a flatten step). A container that reaches it fails the test, loudly, which is what the test is for; no
    branch is taken in silence and nothing is sized by it. The same in vLLM's own tests as in a plugin's."""
    if not _TEST_MODULE.search(module_path):
        return False
    current, holder = check, parent(check)
    while holder is not None and not isinstance(holder, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
        current, holder = holder, parent(holder)
    return isinstance(holder, cst.Assert) and holder.test is current


def benchmark_only(module: cst.Module, check: cst.CSTNode, parent) -> str | None:
    """The docstring sentence that says the code around `check` exists for benchmarks, or None."""
    current = parent(check)
    while current is not None:
        if isinstance(current, cst.ClassDef):
            found = _sentence(_docstring(current.body), _BENCHMARK)
            if found:
                return found
        current = parent(current)
    return _sentence(module.get_docstring(clean=True) or "", _BENCHMARK)


def _refuses(suite: cst.BaseSuite) -> bool:
    body = suite.body if isinstance(suite, cst.IndentedBlock) else [suite]
    first = body[0] if body else None
    smalls = first.body if isinstance(first, (cst.SimpleStatementLine, cst.SimpleStatementSuite)) else ()
    if not smalls:
        return False
    statement = smalls[0]
    if isinstance(statement, _REFUSALS):
        return True
    return (
        isinstance(statement, cst.Return)
        and isinstance(statement.value, cst.Name)
        and statement.value.value in ("False", "None")
    )


def _docstring(body: cst.BaseSuite) -> str:
    statements = body.body if isinstance(body, cst.IndentedBlock) else []
    first = statements[0] if statements else None
    if isinstance(first, cst.SimpleStatementLine) and first.body and isinstance(first.body[0], cst.Expr):
        value = first.body[0].value
        if isinstance(value, cst.SimpleString):
            return value.evaluated_value if isinstance(value.evaluated_value, str) else ""
        if isinstance(value, cst.ConcatenatedString):
            return str(value.evaluated_value or "")
    return ""


def _comments_above(node: cst.CSTNode, parent) -> str:
    """The comment lines right above a statement (its leading lines), as one text."""
    lines = getattr(node, "leading_lines", ())
    return " ".join(line.comment.value.lstrip("#").strip() for line in lines if line.comment is not None)


def comments_at(lines: list[str], line: int) -> str:
    """The comment ending the 1-based `line` and the comment-only lines right above it, as one text."""
    found = []
    own = lines[line - 1] if 0 < line <= len(lines) else ""
    if " #" in own:
        found.append(own.split(" #", 1)[1])
    above = line - 2
    while above >= 0 and lines[above].lstrip().startswith("#"):
        found.insert(0, lines[above].lstrip().lstrip("#"))
        above -= 1
    return " ".join(text.strip() for text in found)


def _sentence(text: str, pattern: re.Pattern) -> str | None:
    """The sentence of `text` that `pattern` finds, on one line; None when none does."""
    for sentence in re.split(r"(?<=[.!?])\s+", " ".join(text.split())):
        if pattern.search(sentence):
            return sentence if len(sentence) <= 160 else sentence[:159] + "…"
    return None
