"""Whether a container that meets an earlier check ever reaches a later one (kvlint.analysis.flow.dominance): one
snippet per shape, the earlier check on `C`, the later on `D`. Written against the mutants scripts/mutation.py
made of that module (issue 31)."""

from __future__ import annotations

import libcst as cst
import pytest

from kvlint.analysis.flow.dominance import dominated, related_to
from tests.test_witness_semantics import _first, _parsed


def _check(module, cls):
    return _first(
        module,
        cst.Call,
        lambda n: isinstance(n.func, cst.Name) and n.func.value == "isinstance" and n.args[1].value.value == cls,
    )


def dominates(source: str) -> bool:
    module, parent = _parsed(source)
    return dominated(_check(module, "C"), _check(module, "D"), parent)


@pytest.mark.parametrize(
    "body",
    [
        "if not isinstance(s, C):\n        return None\n    return isinstance(s, D)",
        "if not isinstance(s, C):\n        continue_ = 1\n        raise ValueError\n    return isinstance(s, D)",
        "if not isinstance(s, C): return None\n    return isinstance(s, D)",
        "if not isinstance(s, C):\n        return None\n    x = 1\n    if y:\n        return isinstance(s, D)",
        "if isinstance(s, C):\n        return isinstance(s, D)",
        "if not isinstance(s, C):\n        pass\n    else:\n        return isinstance(s, D)",
        "if not isinstance(s, C):\n        return None\n    else:\n        pass\n    return isinstance(s, D)",
        "return isinstance(s, C) and isinstance(s, D)",
        "return not isinstance(s, C) or isinstance(s, D)",
        "return isinstance(s, D) if isinstance(s, C) else None",
    ],
)
def test_a_container_sent_away_by_the_earlier_check_never_reaches_the_later(body):
    assert dominates(f"def f(s, y):\n    {body}\n")


@pytest.mark.parametrize(
    "body",
    [
        # The branch a container takes does not leave: it goes on to the later check.
        "if not isinstance(s, C):\n        log(s)\n    return isinstance(s, D)",
        "if not isinstance(s, C):\n        if y:\n            return None\n    return isinstance(s, D)",
        # A positive test: a container takes the else branch, which holds the later check or falls through.
        "if isinstance(s, C):\n        return None\n    return isinstance(s, D)",
        "if isinstance(s, C):\n        pass\n    else:\n        return isinstance(s, D)",
        "if not isinstance(s, C):\n        return isinstance(s, D)",
        # Short-circuits a container passes through to the right.
        "return isinstance(s, C) or isinstance(s, D)",
        "return not isinstance(s, C) and isinstance(s, D)",
        "return isinstance(s, D) and isinstance(s, C)",
        # The check is not the test of the `if`, or is not tested at all.
        "if y == isinstance(s, C):\n        return None\n    return isinstance(s, D)",
        "x = isinstance(s, C)\n    return isinstance(s, D)",
        # Later in another block than the one the exit leaves.
        "if y:\n        if not isinstance(s, C):\n            return None\n    return isinstance(s, D)",
        "if y:\n        pass\n    elif not isinstance(s, C):\n        return None\n    return isinstance(s, D)",
        "return isinstance(s, D) if not isinstance(s, C) else None",
    ],
)
def test_a_container_the_earlier_check_lets_through_still_reaches_the_later(body):
    assert not dominates(f"def f(s, y, log):\n    {body}\n")


def test_only_statements_after_the_exit_are_dominated_not_those_before():
    source = "def f(s):\n    x = isinstance(s, D)\n    if not isinstance(s, C):\n        return None\n    return x\n"
    assert not dominates(source)


def test_a_related_location_names_the_dominated_checks_place():
    module, parent = _parsed("def f(s):\n    return isinstance(s, C) and isinstance(s, D)\n")

    class Context:
        path = "m.py"

        @staticmethod
        def position(node):
            return cst.metadata.CodeRange(cst.metadata.CodePosition(2, 32), cst.metadata.CodePosition(2, 49))

    related = related_to(Context, _check(module, "D"), "KV101", "it would say")
    assert (related.line, related.column, related.end_line, related.end_column) == (2, 33, 2, 50)
