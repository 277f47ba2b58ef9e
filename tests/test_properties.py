"""Property tests over generated programs built around the bug patterns, and a bounded fuzz of the engine."""

from __future__ import annotations

import ast

import libcst as cst
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvlint.analysis.hierarchy import BUILTIN_BASES, SpecHierarchy
from kvlint.analysis.tree_index import TreeIndex
from kvlint.engine.lint import LintRequest, lint_text
from kvlint.engine.registry import all_rules
from kvlint.fixing.apply import apply_fixes

PROJECT = TreeIndex(
    root=None,
    hierarchy=SpecHierarchy(bases=dict(BUILTIN_BASES)),
    resolver_module="vllm.v1.core.kv_cache_utils",
    resolver_layer_classes=frozenset({"AttentionSpec"}),
)
RULES = tuple(r for r in all_rules() if r.CODE in ("KV000", "KV101", "KV102"))
PATH = "vllm/distributed/kv_transfer/kv_connector/v1/generated/config.py"
# How many examples each property gets is the loaded profile's (conftest.py): a few dozen in the fast loop, more
# in the full suite.
GENERATED = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])

identifiers = st.sampled_from(["spec", "kv_spec", "layer", "s", "group_spec"])
groups = st.sampled_from(["group", "g", "kv_group"])
dcp_names = st.sampled_from(["dcp", "dcp_size", "dcp_world_size", "parallel_config.decode_context_parallel_size"])
classes = st.sampled_from(["AttentionSpec", "FullAttentionSpec", "MLAAttentionSpec", "(AttentionSpec, MambaSpec)"])
comments = st.sampled_from(["", "  # keep me", "  # 'quoted' \"x\"", "\t# tab comment"])
newlines = st.sampled_from(["\n", "\r\n"])


@st.composite
def programs(draw) -> str:
    """A module with a hand-written DCP scaling in one of several shapes, amid unrelated code."""
    group, dcp, cls = draw(groups), draw(dcp_names), draw(classes)
    spec = f"{group}.kv_cache_spec"
    gate = f"({dcp} if isinstance({spec}, {cls}) else 1)"
    shape = draw(st.sampled_from(["inline", "multiline", "reversed", "unconditional", "assigned"]))
    indent = draw(st.sampled_from(["    ", "\t", "  "]))
    if shape == "inline":
        body = [
            f"{indent}for {group} in kv_cache_config.kv_cache_groups:",
            f"{indent}{indent}yield {spec}.block_size * {gate}",
        ]
    elif shape == "multiline":
        body = [
            f"{indent}for {group} in kv_cache_config.kv_cache_groups:",
            f"{indent}{indent}yield (",
            f"{indent}{indent}{indent}{spec}.block_size",
            f"{indent}{indent}{indent}* (",
            f"{indent}{indent}{indent}{indent}{dcp}",
            f"{indent}{indent}{indent}{indent}if isinstance({spec}, {cls})",
            f"{indent}{indent}{indent}{indent}else 1",
            f"{indent}{indent}{indent})",
            f"{indent}{indent})",
        ]
    elif shape == "reversed":
        body = [
            f"{indent}for {group} in kv_cache_config.kv_cache_groups:",
            f"{indent}{indent}yield {gate} * {spec}.block_size",
        ]
    elif shape == "unconditional":
        body = [
            f"{indent}for {group} in kv_cache_config.kv_cache_groups:",
            f"{indent}{indent}yield {spec}.block_size * {dcp}",
        ]
    else:
        name = draw(identifiers)
        body = [
            f"{indent}for {group} in kv_cache_config.kv_cache_groups:",
            f"{indent}{indent}{name} = {spec}",
            f"{indent}{indent}yield {name}.block_size * ({dcp} if isinstance({name}, {cls}) else 1)",
        ]
    body = [line + draw(comments) if i % 2 == 0 else line for i, line in enumerate(body)]
    before = draw(st.lists(st.sampled_from(["x = 1", "y = 'a'  # c", "def f():\n    return 2", ""]), max_size=3))
    after = draw(st.lists(st.sampled_from(["z = [1,\n     2]", "print('done')", ""]), max_size=3))
    imports = "from vllm.v1.kv_cache_interface import AttentionSpec, FullAttentionSpec, MLAAttentionSpec, MambaSpec\n"
    parts = [
        imports,
        *before,
        "def spans(kv_cache_config, dcp, dcp_size, dcp_world_size, parallel_config):",
        *body,
        *after,
    ]
    newline = draw(newlines)
    return newline.join("\n".join(parts).split("\n")) + newline


def lint(source: str):
    return lint_text(LintRequest(PATH, PATH, PROJECT, RULES), source)


@GENERATED
@given(programs(), st.booleans())
def test_fix_properties(source, unsafe):
    first = lint(source)
    assert first.findings, "every generated program holds a scaling site"
    outcome = apply_fixes(source, list(first.findings), unsafe=unsafe)
    fixed = outcome.text
    ast.parse(fixed)  # the output parses
    # Bytes outside the edits are unchanged: strip the edited spans and the import header from both sides.
    edits = sorted({e for f in outcome.applied for e in f.fix.edits}, key=lambda e: e.start)
    if edits:
        head, tail = source[: edits[0].start], source[edits[-1].end :]
        body_start = head.index("def spans")
        assert fixed.endswith(tail)
        assert head[body_start:] in fixed
        assert ("\r\n" in source) == ("\r\n" in fixed) and ("\n" not in source.replace("\r\n", "")) == (
            "\n" not in fixed.replace("\r\n", "")
        )
    else:
        assert fixed == source
    # Idempotent, and nothing fixable of the applied kinds is left.
    second = lint(fixed)
    again = apply_fixes(fixed, list(second.findings), unsafe=unsafe)
    assert again.text == fixed
    applied_codes = {f.code for f in outcome.applied}
    assert not [
        f
        for f in second.findings
        if f.code in applied_codes and f.fix and (unsafe or f.fix.applicability.value == "safe")
    ]


# A bounded fuzz (a few seconds): mutated programs and random bytes never crash the engine.


@GENERATED
@given(st.data())
def test_engine_never_crashes_on_mutated_source(data):
    source = data.draw(programs())
    operations = data.draw(
        st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 40), st.text(max_size=8)), max_size=4)
    )
    for position, length, insert in operations:
        position %= len(source) + 1
        source = source[:position] + insert + source[position + length :]
    result = lint(source)
    assert not [f for f in result.findings if "internal error" in f.message], result.findings


@settings(deadline=None)
@given(st.binary(max_size=2000))
def test_engine_never_crashes_on_random_bytes(blob):
    from kvlint.engine.lint import lint_bytes

    result = lint_bytes(
        LintRequest(PATH, PATH, PROJECT, RULES), b"kv_cache_groups isinstance( Spec block_size dcp\n" + blob
    )
    assert not [f for f in result.findings if "internal error" in f.message]


def test_a_name_libcst_refuses_but_python_parses_is_one_unreadable_line():
    # Found by the fuzz above: a character in an imported module's name that the nesting guard lets through and
    # libcst refuses as an identifier (a CSTValidationError, not a ParserSyntaxError).
    source = "from \U00031350vllm.v1.kv_cache_interface import AttentionSpec\n\n\ndef spans(groups, dcp):\n"
    source += "    for group in groups:\n"
    source += "        yield group.kv_cache_spec.block_size * (dcp if isinstance(group.kv_cache_spec, AttentionSpec) else 1)\n"
    # Which names libcst accepts differs between Python versions (CI's 3.10 and 3.13 accept this one, 3.11 refuses
    # it): either way kvlint reads the file as libcst does, never with an internal error.
    try:
        cst.parse_module(source)
    except cst.CSTValidationError:
        refused = True
    else:
        refused = False
    result = lint(source)
    assert not [f for f in result.findings if "internal error" in f.message], result.findings
    [finding] = result.findings
    if refused:
        assert finding.code == "KV000" and "is not a valid identifier" in finding.message
    else:
        assert finding.code == "KV102", finding
