"""What a grouping function's callers filter out of the specs they hand it (kvlint.analysis.census.paths
`_Callers`), read in one pass of each caller's assignments, is what reading the caller's text up to each call
gives: compared on random modules — filters before and after a call, a `{…}` over two lines, a call on the line
of a filter, annotated and compared names, a `def` line that names the function — with that reading written out
plainly here."""

from __future__ import annotations

import random
import re

import pytest

from kvlint.analysis.census.paths import _Callers, _filtered, _functions, _Lines

CALLED = ["f0", "f1", "g0", "g1", "h0"]

PIECES = [
    "def f{a}(c, specs):",
    "def g{a}(c, kept):",
    "    def h{a}(c, specs):",
    "    kept = {{k: v for k, v in specs.items() if not isinstance(v, {C})}}",
    "    specs = {{k: v for k, v in specs.items() if isinstance(v, {C})}}",
    "    kept: dict[str, X] = {{k: v for k, v in specs.items() if not isinstance(v, ({C}, {D}))}}",
    "    kept = {{k: v for k, v in specs.items()",
    "            if not isinstance(v, {C})}}",
    "    kept = {{k: v for k, v in specs.items() if not isinstance(v, {C}) and {{1}}}}",
    "    kept = dict(specs)  # {{ if not isinstance(v, {C})}}",
    "    kept == specs",
    "    k: kept = {{ if not isinstance(v, {C}) }}",
    "    f{a}(c, kept)",
    "    f{a}(c, specs)",
    "    g{a}(c,   kept); f{a}(c, kept)",
    "    return f{a}(c, kept)",
    "    x = f{a}(c, kept) if kept else g{a}(c, specs)",
    "",
    "    pass",
    "    kept = {C}",
    "    kept={{ k:v for k,v in s if not isinstance(v,{C})}}; f{a}(c, kept)",
    "def   f{a}(c, kept)",
    "    kept = {{",
    "    }}",
    "\tkept = {{k: v if not isinstance(v, {C})}}\r",
    "    h0(c, kept); kept = {{k: v for k, v in kept.items() if not isinstance(v, {D})}}; h0(c, kept)",
    # A `{…}` read up to its first `}`: what the rest of its line filters is not the assignment's.
    "    kept = {{k: v for k, v in specs.items() if not isinstance(v, {C})}} or {{v for v in s if not isinstance(v, {D})}}",
    # A call inside a `{…}` that closes at its line's end: the whole `{…}` is above the call's line end.
    "            if not isinstance(v, {D}) and f{a}(c, kept)}}",
    # An empty `{}`, then another name's filter: the `{…}` ends at its own `}`.
    "    kept = {{}}",
    "    other = {{k: v for k, v in specs.items() if not isinstance(v, {C})}}",
    # Braces opened twice: no `{…}` is read, only the line.
    "    kept = {{{{k: v}} for k in s if not isinstance(v, {C})}}",
    # An assignment right after another's `=`, and a word ending in `def` before a call.
    "    kept =kept = {{k: v for k, v in specs.items() if not isinstance(v, {C})}}",
    "    xdef f{a}(c, kept)",
]


def _plain_excluded(lines: _Lines, callers: _Callers, name: str) -> frozenset[str]:
    """The reading before: the caller's lines up to each call's line joined, its filters read again each time."""
    excluded = None
    for line, start, caller, argument in callers._calls_of(name):
        if re.search(r"\bdef\s+$", lines.text[lines.starts[line - 1] : start]):
            continue
        body = "\n".join(lines.lines[caller[1] - 1 : line])
        found = set(_filtered(body, argument, keep=False))
        excluded = found if excluded is None else excluded & found
    return frozenset(excluded or ())


@pytest.mark.parametrize("seed", [1, 2])
def test_each_callers_filters_are_read_as_its_text_up_to_each_call(seed):
    rng = random.Random(seed)
    dropped = 0
    for _ in range(1500):
        text = "\n".join(
            rng.choice(PIECES).format(a=rng.randint(0, 1), C=rng.choice("ABC"), D=rng.choice("DE"))
            for _ in range(rng.randint(1, 25))
        )
        lines = _Lines(text)
        functions = _functions(lines)
        read, plain = _Callers(lines, functions), _Callers(lines, functions)
        for name in CALLED:
            expected = _plain_excluded(lines, plain, name)
            assert read.excluded(name) == expected, (name, text)
            dropped += bool(expected)
    assert dropped > 500  # the modules give most callers something they filter out
