"""`kvlint verify --rewrites TREE`: TREE is input, so its checks reach the verify child as data (the test, the
class names, the quantifier), never as code; a check whose classes are not names is said, not evaluated.

The child runs for real (this interpreter, `-I`) against a small fake vLLM runtime: dataclass specs, a
container, `iter_layer_specs` and the full-attention helper, and a stand-in `torch` module.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from kvlint.verify import child
from kvlint.verify.check_forms import NotEvaluable, describe_rewrite
from tests.kvlint_runner import run_kvlint
from tests.mini_vllm import MINI_VLLM, write_tree

RUNTIME_INTERFACE = """
    from dataclasses import dataclass, field

    @dataclass
    class KVCacheSpec:
        block_size: int

    class AttentionSpec(KVCacheSpec):
        pass

    class FullAttentionSpec(AttentionSpec):
        pass

    class MLAAttentionSpec(FullAttentionSpec):
        pass

    class MambaSpec(KVCacheSpec):
        pass

    @dataclass
    class UniformTypeKVCacheSpecs(KVCacheSpec):
        kv_cache_specs: dict = field(default_factory=dict)

    def iter_layer_specs(kv_cache_spec):
        if isinstance(kv_cache_spec, UniformTypeKVCacheSpecs):
            return kv_cache_spec.kv_cache_specs.values()
        return (kv_cache_spec,)
    """
RUNTIME = {
    "vllm/__init__.py": '__version__ = "0.0.fake"\n',
    "vllm/config.py": "",
    "vllm/v1/__init__.py": "",
    "vllm/v1/core/__init__.py": "",
    "vllm/v1/core/kv_cache_utils.py": "",
    "vllm/v1/kv_cache_interface.py": RUNTIME_INTERFACE,
    "torch.py": "bfloat16, float32, uint8 = 'bfloat16', 'float32', 'uint8'\n",
}


def crafted_tree(root: Path, marker: Path) -> Path:
    """The miniature vLLM with a worker module whose checks would write `marker` (a file, a folder through
    `os`) if evaluated, and one plain check that is evaluated."""
    worker = f"""
        import vllm.v1.kv_cache_interface as kvi
        from vllm.v1.kv_cache_interface import MambaSpec

        def mamba_groups(kv_cache_config):
            return [g for g in kv_cache_config.kv_cache_groups if isinstance(g.kv_cache_spec, open({str(marker)!r}, "w").MambaSpec)]

        def state_groups(kv_cache_config):
            return [g for g in kv_cache_config.kv_cache_groups if isinstance(g.kv_cache_spec, __import__("os").makedirs({str(marker) + "-dir"!r}).MambaSpec)]

        def plain_groups(kv_cache_config):
            return [g for g in kv_cache_config.kv_cache_groups if isinstance(g.kv_cache_spec, kvi.MambaSpec)]
        """
    files = {**MINI_VLLM, "vllm/v1/worker/__init__.py": "", "vllm/v1/worker/groups.py": worker}
    return write_tree(root, files)


def test_a_crafted_check_runs_nothing_in_the_child_and_is_said(tmp_path):
    marker = tmp_path / "pwned"
    tree = crafted_tree(tmp_path / "tree", marker)
    runtime = write_tree(tmp_path / "runtime", RUNTIME)
    result = run_kvlint(
        "verify", "--rewrites", str(tree), "--vllm", str(runtime), "--python", sys.executable, cwd=tmp_path
    )
    assert not marker.exists() and not Path(str(marker) + "-dir").exists()
    out = result.stdout
    assert "groups.py:5:" in out and "groups.py:8:" in out, out
    assert out.count("not evaluated: `open(") == 1 and out.count("not evaluated: `__import__('os')") == 1, out
    assert "is not a class named by a name or an attribute chain of names" in out
    # the check whose class is an attribute chain of names is evaluated, as kvlint reads it: by its class name
    plain = out.split("groups.py:11:")[1]
    assert "{MambaSpec}: before False, after True, layers [True] → all True  ok" in plain, out
    assert result.returncode == 1, out  # a check not evaluated is not proven
    assert result.stderr == ""


@pytest.mark.parametrize(
    ("original", "replacement", "before", "after"),
    [
        (
            "isinstance(g.spec, (MambaSpec, kvi.MLAAttentionSpec))",
            "all(isinstance(spec, (MambaSpec, kvi.MLAAttentionSpec)) for spec in iter_layer_specs(g.spec))",
            {"test": "isinstance", "classes": ["MambaSpec", "MLAAttentionSpec"], "layers": None},
            {"test": "isinstance", "classes": ["MambaSpec", "MLAAttentionSpec"], "layers": "all"},
        ),
        (
            "type(g.spec) not in (MambaSpec,)",
            "any(type(layer) not in (MambaSpec,) for layer in iter_layer_specs(g.spec))",
            {"test": "type", "operator": "not in", "classes": ["MambaSpec"], "layers": None},
            {"test": "type", "operator": "not in", "classes": ["MambaSpec"], "layers": "any"},
        ),
        (
            "isinstance(specs[i], MambaSpec | FullAttentionSpec)",
            "is_full_attention_spec(specs[i])",
            {"test": "isinstance", "classes": {"union": ["MambaSpec", "FullAttentionSpec"]}, "layers": None},
            {"test": "helper", "helper": "is_full_attention_spec"},
        ),
    ],
)
def test_a_check_is_described_by_names(original, replacement, before, after):
    described = describe_rewrite(original, replacement)
    assert (described.before, described.after) == (before, after)


@pytest.mark.parametrize(
    "classes",
    ["(MambaSpec, *EXTRA)", "SPECS[0]", "f().MambaSpec", "(lambda: MambaSpec)()", "x[0].y.MambaSpec"],
)
def test_classes_that_are_not_names_are_not_evaluated(classes):
    with pytest.raises(NotEvaluable, match="is not a class named by a name"):
        describe_rewrite(
            f"isinstance(g.spec, {classes})", f"all(isinstance(s, {classes}) for s in iter_layer_specs(g.spec))"
        )


def test_a_rewrite_of_another_expression_is_not_evaluated():
    with pytest.raises(NotEvaluable, match="another expression"):
        describe_rewrite("isinstance(g.spec, FullAttentionSpec)", "is_full_attention_spec(os.system('x'))")


def test_the_child_evaluates_descriptions_by_name_only(tmp_path):
    interface = write_tree(tmp_path, {"interface.py": RUNTIME_INTERFACE}) / "interface.py"
    namespace: dict = {}
    exec(compile(interface.read_text(), str(interface), "exec"), namespace)  # noqa: S102 - the test's own fake
    module = type(ast)("interface")
    module.__dict__.update(namespace)
    module.is_full_attention_spec = lambda spec: all(
        isinstance(layer, namespace["FullAttentionSpec"]) for layer in namespace["iter_layer_specs"](spec)
    )
    names = child.CheckNames(module)
    mamba, mla = namespace["MambaSpec"](16), namespace["MLAAttentionSpec"](16)
    container = namespace["UniformTypeKVCacheSpecs"](16, {"a": mamba, "b": mla})
    negated = {"test": "type", "operator": "not in", "classes": ["MambaSpec"], "layers": "any"}
    assert child.answer(negated, names, container) is True and child.answer(negated, names, mamba) is False
    union = {"test": "isinstance", "classes": {"union": ["MambaSpec", "MLAAttentionSpec"]}, "layers": "all"}
    assert child.answer(union, names, container) is True
    for name in ("__builtins__", "os.system", "__import__", "print"):
        crafted = {"test": "isinstance", "classes": name, "layers": None}
        assert child.evaluate(crafted, names, mamba) in (f"not a name: {name!r}", f"this vLLM has no {name}")
    assert child.evaluate({"test": "helper", "helper": "KVCacheSpec"}, names, mamba) == (
        "KVCacheSpec is not a function in this vLLM"
    )


def test_the_child_compiles_and_evaluates_no_code():
    """The child has no `eval`, `exec` or `compile`: a check is data it interprets."""
    tree = ast.parse(Path(child.__file__).read_text(encoding="utf-8"))
    called = {node.func.id for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}
    assert not called & {"eval", "exec", "compile", "__import__"}
