"""The fix-safety property over generated container-blind checks (tests/fix_programs.py): every fix `kvlint
fix` writes re-parses, compiles and keeps the check's classes; run with stand-in classes built from the
tree's hierarchy, a safe fix answers as before for a plain spec of every class and a container never
reaches a use the check guarded. The same programs run in the real vLLM 0.29.0 in the slow test."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvlint.analysis.layer_mixes import spec_class_mixes
from kvlint.engine.lint import LintRequest, lint_text
from kvlint.engine.registry import rule_by_code
from kvlint.fixing.apply import apply_fixes, check_compiles

sys.path.insert(0, str(Path(__file__).parent))
import fix_programs as generated  # noqa: E402
from test_rules import project_for  # noqa: E402  (the examples' tree: vLLM 0.29.0's containers)

PATH = "vllm/distributed/kv_transfer/kv_connector/v1/generated/worker.py"
RULE = rule_by_code("KV101")
PROJECT = project_for(RULE.INVALID[0])
BASES = PROJECT.hierarchy.bases
INTERFACE = generated.stand_in_interface(BASES)
# a plain spec of every class a group can hold; a container of every composition the tree can build
PLAIN = sorted(name for name in BASES if name not in ("KVCacheSpec", "AttentionSpec", "UniformTypeKVCacheSpecs"))
COMPOSITIONS = sorted(sorted(c) for c in spec_class_mixes(PROJECT))

programs = st.builds(
    generated.Program,
    classes=st.sampled_from(generated.CLASSES),
    form=st.sampled_from(generated.FORMS),
    shape=st.sampled_from(generated.SHAPES),
    subject=st.sampled_from(generated.SUBJECTS),
    use=st.sampled_from(generated.USES),
    shadow=st.sampled_from(generated.SHADOWS),
    indent=st.sampled_from(["    ", "\t"]),
    comment=st.booleans(),
    newline=st.sampled_from(["\n", "\r\n"]),
)


def container(layers: list[str]):
    spec = INTERFACE.UniformTypeKVCacheSpecs()
    spec.kv_cache_specs = {f"model.layers.{i}": getattr(INTERFACE, name)() for i, name in enumerate(layers)}
    return spec


def class_arguments(source: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance":
            found.append(ast.dump(node.args[1]))
        elif isinstance(node, ast.Compare) and isinstance(node.left, ast.Call):
            if isinstance(node.left.func, ast.Name) and node.left.func.id == "type":
                found.append(ast.dump(node.comparators[0]))
    return sorted(found)


def answers(text: str, specs: list) -> list:
    """What the worker answers for a group of each spec: (found, the classes that reached the use)."""
    namespace = generated.load(text, INTERFACE)
    results = []
    for spec in specs:
        found, seen = generated.run_worker(namespace, [spec])
        results.append((found, [type(s).__name__ for s in seen]))
    return results


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs, st.booleans())
def test_every_fix_of_a_generated_check_compiles_keeps_its_classes_and_answers_as_before(program, unsafe):
    source = program.source
    findings = [f for f in lint_text(LintRequest(PATH, PATH, PROJECT, (RULE,)), source).findings if f.code == "KV101"]
    text = apply_fixes(source, findings, unsafe=unsafe).text
    check_compiles(text, PATH, source)  # `kvlint fix` refuses a file it cannot compile: none here
    if text == source:
        return
    helper = "is_full_attention_spec" in text
    before, after = class_arguments(source), class_arguments(text)
    assert set(after) <= set(before) if helper else after == before, (source, text)
    plain = [getattr(INTERFACE, name)() for name in PLAIN]
    assert answers(text, plain) == answers(source, plain), (source, text)
    for layers in COMPOSITIONS:
        _, seen = generated.run_worker(generated.load(text, INTERFACE), [container(layers)])
        assert "UniformTypeKVCacheSpecs" not in [type(s).__name__ for s in seen], (layers, source, text)


def test_the_generator_reaches_the_fixes_it_tests():
    """The property is not vacuous: the shapes it draws get safe fixes, and the stand-ins tell them apart."""
    fixed = 0
    for shape in generated.SHAPES:
        program = generated.Program(
            "(MambaSpec, CrossAttentionSpec)", "isinstance", shape, "spec", "none", "none", "    ", True
        )
        findings = lint_text(LintRequest(PATH, PATH, PROJECT, (RULE,)), program.source).findings
        safe = [f for f in findings if f.fix is not None and f.fix.applicability.value == "safe"]
        text = apply_fixes(program.source, safe, unsafe=False).text
        fixed += text != program.source
        mamba = container(["MambaSpec"])
        assert answers(text, [mamba]) != answers(program.source, [mamba]) or text == program.source
    assert fixed == len(generated.SHAPES)
