"""Where a container-blind check's other branch raises, KV101 says so (kvlint.analysis.branch_taken)."""

from __future__ import annotations

import libcst as cst
import pytest

from kvlint.analysis.branch_taken import raised_when_false
from kvlint.analysis.cst_walk import parent_map, preorder


def _check(source: str):
    module = cst.parse_module(source)
    parents = parent_map(module)
    check = next(
        n for n in preorder(module) if isinstance(n, cst.Call) and getattr(n.func, "value", "") == "isinstance"
    )
    return check, parents.get


@pytest.mark.parametrize(
    ("source", "raised"),
    [
        ("if not isinstance(spec, MambaSpec):\n    raise TypeError('x')\n", "TypeError"),
        ("if isinstance(spec, MambaSpec):\n    pass\nelse:\n    raise errors.SpecError\n", "SpecError"),
        ("if isinstance(spec, MambaSpec): pass\nelse: raise ValueError()\n", "ValueError"),
        # the other branch goes on: no refusal to speak of
        ("if not isinstance(spec, MambaSpec):\n    return None\n", None),
        ("if isinstance(spec, MambaSpec):\n    raise TypeError('x')\n", None),  # raises when True, not when False
        ("if isinstance(spec, MambaSpec) and ok:\n    pass\nelse:\n    raise TypeError\n", None),  # not the check alone
        ("if not isinstance(spec, MambaSpec):\n    log()\n    raise TypeError\n", None),  # not right away
        ("x = isinstance(spec, MambaSpec)\n", None),
        ("if not isinstance(spec, MambaSpec):\n    raise\n", None),  # a bare re-raise names nothing
    ],
)
def test_the_exception_raised_right_away_when_the_check_is_false(source, raised):
    check, parent = _check(source)
    assert raised_when_false(check, parent) == raised
