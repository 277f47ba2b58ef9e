"""KV101's fix (rules/_unwrap_fix.py): properties over generated checks, the composition analysis it rests on,
and, with the real vLLM 0.29.0 (slow), what the rewritten checks answer at runtime."""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvlint.analysis.hierarchy import BUILTIN_BASES, SpecHierarchy, hierarchy_of_source
from kvlint.analysis.layer_mixes import class_test, spec_class_mixes, split_composition
from kvlint.engine.lint import LintRequest, lint_text
from kvlint.engine.registry import rule_by_code
from kvlint.fixing.apply import apply_fixes
from kvlint.verify.check_forms import describe_rewrite

sys.path.insert(0, str(Path(__file__).parent))
from test_rules import project_for  # noqa: E402  (the examples' tree: vLLM 0.29.0's containers)

PATH = "vllm/distributed/kv_transfer/kv_connector/v1/generated/worker.py"
RULE = rule_by_code("KV101")
GENERATED = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
PROJECT = project_for(RULE.INVALID[0])

classes = st.sampled_from(
    ["FullAttentionSpec", "MambaSpec", "MLAAttentionSpec", "AttentionSpec", "(MambaSpec, CrossAttentionSpec)"]
)
subjects = st.sampled_from(["group.kv_cache_spec", "spec", "kv_cache_config.kv_cache_groups[i].kv_cache_spec"])
comments = st.sampled_from(["", "  # keep me", "  # 'quoted' \"x\""])


@st.composite
def programs(draw) -> str:
    """A worker-side function with a container-blind check in one of several shapes, amid unrelated code."""
    cls, subject, indent = draw(classes), draw(subjects), draw(st.sampled_from(["    ", "  ", "\t"]))
    loop = {
        "group.kv_cache_spec": "for group in kv_cache_config.kv_cache_groups:",
        "spec": "for group in kv_cache_config.kv_cache_groups:\n{i}{i}spec = group.kv_cache_spec",
        "kv_cache_config.kv_cache_groups[i].kv_cache_spec": "for i in range(3):",
    }[subject]
    # `type(x) is AttentionSpec` (an abstract class) is no layer's answer: no container the tree builds reaches it.
    exact = draw(st.booleans()) and not cls.startswith("(") and cls != "AttentionSpec"
    operator = draw(st.sampled_from(["is", "is not", "=="]))
    check = f"type({subject}) {operator} {cls}" if exact else f"isinstance({subject}, {cls})"
    if draw(st.booleans()) and not exact:
        check = f"isinstance(\n{indent * 3}{subject},\n{indent * 3}{cls},\n{indent * 2})"
    shape = draw(st.sampled_from(["if", "not-if", "assign", "filter"]))
    if shape == "filter":
        body = [
            f"{indent}return [g for g in kv_cache_config.kv_cache_groups if {check.replace(subject, 'g.kv_cache_spec')}]"
        ]
    else:
        statement = {
            "if": f"if {check}:{draw(comments)}\n{indent * 3}found.append(1)",
            "not-if": f"if not {check}:\n{indent * 3}continue",
            "assign": f"chosen = {check}{draw(comments)}\n{indent * 2}found.append(chosen)",
        }[shape]
        body = [
            f"{indent}found = []",
            f"{indent}{loop.format(i=indent)}",
            f"{indent * 2}{statement}",
            f"{indent}return found",
        ]
    before = draw(st.lists(st.sampled_from(["x = 1", "y = 'a'  # c", ""]), max_size=2))
    imports = "from vllm.v1.kv_cache_interface import CrossAttentionSpec, FullAttentionSpec, MambaSpec\n"
    parts = [imports, *before, "def worker(kv_cache_config, groups):", *body, "z = [1,\n     2]"]
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    return newline.join("\n".join(parts).split("\n")) + newline


def lint(source: str):
    return lint_text(LintRequest(PATH, PATH, PROJECT, (RULE,)), source)


@GENERATED
@given(programs(), st.booleans())
def test_fix_output_parses_is_idempotent_and_keeps_other_bytes(source, unsafe):
    first = [f for f in lint(source).findings if f.code == "KV101"]
    assert first and all(f.fix is not None for f in first), source
    outcome = apply_fixes(source, first, unsafe=unsafe)
    fixed = outcome.text
    compile(ast.parse(fixed), PATH, "exec")  # parses and compiles
    assert all(unsafe or f.fix.applicability.value == "safe" for f in outcome.applied)
    edits = sorted({e for f in outcome.applied for e in f.fix.edits}, key=lambda e: e.start)
    if edits:
        head, tail = source[: edits[0].start], source[edits[-1].end :]
        assert fixed.endswith(tail)
        assert head[head.index("def worker") :] in fixed
        assert ("\r\n" in source) == ("\r\n" in fixed)
        # no KV101 finding is left where a fix was applied: the check now reads layers
        assert not [f for f in lint(fixed).findings if f.code == "KV101" and f.fix is not None]
    else:
        assert fixed == source
    assert apply_fixes(fixed, list(lint(fixed).findings), unsafe=unsafe).text == fixed


def test_compositions_split_only_where_a_container_mixes_answers():
    compositions = spec_class_mixes(PROJECT)
    hierarchy = PROJECT.hierarchy
    full = max((c for c in compositions if "MLAAttentionSpec" in c), key=len)  # the family, not the census's
    assert {"FullAttentionSpec", "MLAAttentionSpec"} <= full and "EncoderOnlyAttentionSpec" not in set().union(
        *compositions
    )
    for safe in ("FullAttentionSpec", "MambaSpec", "AttentionSpec", "CrossAttentionSpec"):
        assert split_composition(compositions, class_test(hierarchy, frozenset({safe}), False), hierarchy) is None
    assert (
        split_composition(compositions, class_test(hierarchy, frozenset({"MLAAttentionSpec"}), False), hierarchy)
        == full
    )
    assert (
        split_composition(compositions, class_test(hierarchy, frozenset({"FullAttentionSpec"}), True), hierarchy)
        == full
    )


def test_a_helper_is_read_from_the_interface_only_in_its_shape():
    source = b'''
class KVCacheSpec: ...
def iter_layer_specs(kv_cache_spec): ...
def is_full_attention_spec(kv_cache_spec):
    """doc"""
    layer_specs = iter_layer_specs(kv_cache_spec)
    return len(layer_specs) > 0 and all(isinstance(spec, FullAttentionSpec) for spec in layer_specs)
def has_mamba(kv_cache_spec):
    return any(isinstance(s, MambaSpec) for s in iter_layer_specs(kv_cache_spec))
def first_is_mla(kv_cache_spec):
    return isinstance(next(iter(iter_layer_specs(kv_cache_spec))), MLAAttentionSpec)
'''
    hierarchy = hierarchy_of_source(source, "vllm/v1/kv_cache_interface.py")
    assert hierarchy.layer_helpers == {
        "is_full_attention_spec": ("all", "FullAttentionSpec"),
        "has_mamba": ("any", "MambaSpec"),
    }


def test_verify_describes_the_check_on_the_checked_spec():
    described = describe_rewrite(
        "isinstance(\n    group_specs[i].kv_cache_spec,\n    MambaSpec,\n)",
        "all(\n    isinstance(spec, MambaSpec)\n    for spec in iter_layer_specs(group_specs[i].kv_cache_spec)\n)",
    )
    assert described.before == {"test": "isinstance", "classes": "MambaSpec", "layers": None}
    assert described.after == {"test": "isinstance", "classes": "MambaSpec", "layers": "all"}
    assert described.outer == "all"
    assert describe_rewrite("isinstance(x, FullAttentionSpec)", "is_full_attention_spec(x)").after == {
        "test": "helper",
        "helper": "is_full_attention_spec",
    }


def test_no_fix_without_the_trees_idiom():
    bare = SpecHierarchy(bases=dict(BUILTIN_BASES), functions=frozenset(), layer_helpers={})
    project = PROJECT.__class__(**{**PROJECT.__dict__, "hierarchy": bare})
    source = "def f(kv_cache_config):\n    return [g for g in kv_cache_config.kv_cache_groups if isinstance(g.kv_cache_spec, MambaSpec)]\n"
    findings = lint_text(LintRequest(PATH, PATH, project, (RULE,)), source).findings
    assert findings and all(f.fix is None for f in findings)


# ----------------------------------------------------------------------------------------- runtime


@pytest.mark.slow
def test_rewritten_checks_answer_as_the_layers_in_the_real_vllm(vllm_runtime_env, vllm_release, tmp_path):
    """0.34.0's rewrites (the Mooncake worker's among them) in the real vLLM 0.29.0: plain specs as before,
    containers as their layers; and a rewrite that did not unwrap is caught (the harness can fail)."""
    from kvlint.scan.config import Config
    from kvlint.verify.checks import cases_document, collect_cases, render_checks
    from kvlint.verify.run import ChildRun, run_child_raw

    tree = vllm_release("0.34.0")
    cases, compositions, _ = collect_cases(tree, Config())
    mooncake = [c for c in cases if "mooncake/mooncake_connector.py" in c.site]
    assert {c.site.split(":")[1] for c in mooncake} >= {"2033", "2083"} and all(
        c.applicability == "safe" for c in mooncake
    )
    run = ChildRun(python=str(vllm_runtime_env.python), vllm_path=None, timeout_s=300)
    document = cases_document(cases, compositions)
    # the mutation: a "rewrite" that keeps the container-blind check
    blind = {
        **document,
        "cases": [{**c, "site": c["site"] + "(blind)", "after": c["before"]} for c in document["cases"]],
    }
    path = tmp_path / "checks.json"
    path.write_text(json.dumps({**document, "cases": document["cases"] + blind["cases"]}), encoding="utf-8")
    raw = run_child_raw(run, ["--checks", str(path)])
    results = {r["site"]: r for r in raw["checks"]}
    for case in document["cases"]:
        result = results[case["site"]]
        # a class only the newer tree defines is said, not checked, in the older runtime
        plain = [p for p in result["plain"] if not (p["ok"] is None and "this vLLM has no" in p.get("error", ""))]
        assert plain and all(p["ok"] for p in plain), result["plain"]
        # a composition only the newer tree can build is said, not checked, in the older runtime
        unbuilt = ("not built", "cannot build")
        checked = [
            c for c in result["containers"] if not (c["ok"] is None and any(u in c.get("error", "") for u in unbuilt))
        ]
        assert checked and all(c["ok"] for c in checked), result["containers"]
        if "MambaSpec" in json.dumps(case["before"]):
            mamba = next(c for c in result["containers"] if c["layers"] == ["MambaSpec"])
            assert (mamba["before"], mamba["after"]) == (False, True)  # the defect, and its fix
        if any(c.get("expected") for c in checked):  # some container's layers pass: blind misses it
            blind_built = [c for c in results[case["site"] + "(blind)"]["containers"] if c["ok"] is not None]
            assert any(c["ok"] is False for c in blind_built)
    table, every_ok = render_checks(cases, raw)
    assert every_ok and "mooncake_connector.py:2033:20" in table


def test_a_check_that_guards_a_use_of_the_spec_gets_no_fix():
    """Rewriting the check alone would let a container reach `spec.mamba_type` (0.29.0's offloading config
    broke a vLLM test that way, reading `num_kv_heads`): the finding says to unwrap that use, with no fix."""
    source = (
        "def mamba_sizes(kv_cache_config):\n"
        "    for g in kv_cache_config.kv_cache_groups:\n"
        '        if isinstance(g.kv_cache_spec, MambaSpec) and g.kv_cache_spec.mamba_type == "mamba2":\n'
        "            yield g\n"
    )
    findings = [f for f in lint(source).findings if f.code == "KV101"]
    assert findings and all(f.fix is None for f in findings)
    assert "no automatic fix: `g.kv_cache_spec.mamba_type` is used" in findings[0].message
