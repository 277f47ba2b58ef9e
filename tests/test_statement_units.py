"""A unit parsed alone is exactly the statement the whole module's parse has at those lines, or nothing."""

from __future__ import annotations

import ast
import textwrap

import pytest

from kvlint.analysis.statement_units import parse_unit, unit_spans

TRICKY = textwrap.dedent(
    '''\
    """Module docstring naming Spec."""
    import os
    from x import (
        Spec,
        Other,
    )


    @decorated(Spec)
    def top(spec: Spec) -> Spec:
        """A docstring
    flush left: Spec"""
        if isinstance(spec, Spec):
            return spec
        elif (
            spec is None
        ):
            value = Spec(
                1,
            )
        else:
            value = [
        Spec()
            ]
        return value


    class Holder(Spec):
        field: Spec = None

        def method(self):
            try:
                built = Spec()
            except ValueError:
                built = Spec()  # in an except clause
            finally:
                pass
            return built
    '''
)


def dump(statement: ast.stmt) -> str:
    """A unit starts at its `def`/`class` line: decorators above it are not part of it."""
    for node in ast.walk(statement):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            node.decorator_list = []
    return ast.dump(statement, include_attributes=True)


def statements_by_span(tree: ast.AST) -> dict[tuple[int, int], str]:
    return {(n.lineno, n.end_lineno): dump(n) for n in ast.walk(tree) if isinstance(n, ast.stmt)}


def check_units(source: bytes, lines: set[int]) -> int:
    """How many units parsed alone; each must equal the whole parse's statement at its lines."""
    whole = statements_by_span(ast.parse(source))
    text_lines = source.split(b"\n")
    parsed = 0
    for span in unit_spans(text_lines, lines) or ():
        unit = parse_unit(text_lines, *span)
        if unit is None:
            continue
        parsed += 1
        assert any(span[0] <= line <= span[1] for line in lines)
        for statement in unit.body:
            key = (statement.lineno, statement.end_lineno)
            assert whole.get(key) == dump(statement), key
    return parsed


_LINES = TRICKY.split("\n")
# `top` holds lines flush left inside its body (a docstring's and a bracket's continuation): a unit cut at the
# indentation there is guessed wrong and does not parse alone, so its lines give nothing (the caller parses the
# whole module). Every other line gives its whole statement.
GUESSED_WRONG = range(
    next(i for i, text in enumerate(_LINES, 1) if text.startswith("@decorated")),
    next(i for i, text in enumerate(_LINES, 1) if text.startswith("class Holder")),
)


@pytest.mark.parametrize("line", range(1, TRICKY.count("\n") + 1))
def test_every_line_gives_the_whole_parses_statement_or_nothing(line):
    parsed = check_units(TRICKY.encode(), {line})
    assert parsed == (0 if line in GUESSED_WRONG else 1), (line, _LINES[line - 1])


def test_a_method_is_parsed_on_its_own():
    source = TRICKY.encode()
    line = next(i for i, text in enumerate(source.split(b"\n"), 1) if b"in an except clause" in text)
    [span] = unit_spans(source.split(b"\n"), {line})
    unit = parse_unit(source.split(b"\n"), *span)
    assert isinstance(unit.body[0], ast.FunctionDef) and unit.body[0].name == "method"


@pytest.mark.slow
def test_units_of_a_real_runner_match_its_whole_parse(vllm_release):
    source = (vllm_release("0.29.0") / "vllm/v1/worker/gpu_model_runner.py").read_bytes()
    lines = {i for i, text in enumerate(source.split(b"\n"), 1) if b"Spec" in text}
    assert check_units(source, lines) > 20
