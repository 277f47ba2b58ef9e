"""Flow-sensitive provenance (kvlint.analysis.flow.reaching): what a name holds where it is read."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from kvlint.analysis.flow.provenance import Kind, SpecFlow
from kvlint.engine.lint import collect_parents


def kind_at_last_check(source: str) -> Kind:
    """The provenance of the subject of the last `isinstance(…, AttentionSpec)` in `source`."""
    module = cst.parse_module(textwrap.dedent(source))
    flow = SpecFlow(module, lambda: collect_parents(module))
    checks = []

    class Finder(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            if isinstance(node.func, cst.Name) and node.func.value == "isinstance":
                if cst.Module([]).code_for_node(node.args[1].value) == "AttentionSpec":
                    checks.append(node)

    module.visit(Finder())
    return flow.classify(checks[-1].args[0].value).kind


GROUP, LAYER, UNKNOWN = Kind.GROUP_SPEC, Kind.LAYER_SPEC, Kind.UNKNOWN


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        pytest.param(
            """
            def f(kv_cache_config):
                for g in kv_cache_config.kv_cache_groups:
                    spec = g.kv_cache_spec
                    spec = unknown_helper(spec)  # rebound: the group's spec no longer reaches the check
                    isinstance(spec, AttentionSpec)
            """,
            UNKNOWN,
            id="rebinding-replaces",
        ),
        pytest.param(
            """
            def f(kv_cache_config):
                for g in kv_cache_config.kv_cache_groups:
                    isinstance(spec, AttentionSpec)  # bound at the end of the previous iteration
                    spec = g.kv_cache_spec
            """,
            GROUP,
            id="loop-back-edge",
        ),
        pytest.param(
            """
            def f(kv_cache_config):
                for g in kv_cache_config.kv_cache_groups:
                    spec = g.kv_cache_spec
                    if isinstance(spec, UniformTypeKVCacheSpecs):
                        return None
                    isinstance(spec, AttentionSpec)
            """,
            LAYER,
            id="early-return-narrows",
        ),
        pytest.param(
            """
            def f(kv_cache_config):
                for g in kv_cache_config.kv_cache_groups:
                    spec = g.kv_cache_spec
                    assert not isinstance(spec, UniformTypeKVCacheSpecs)
                    isinstance(spec, AttentionSpec)
            """,
            LAYER,
            id="assert-narrows",
        ),
        pytest.param(
            """
            def f(kv_cache_config):
                for g in kv_cache_config.kv_cache_groups:
                    if not isinstance(g.kv_cache_spec, UniformTypeKVCacheSpecs):
                        isinstance(g.kv_cache_spec, AttentionSpec)  # an attribute chain narrows too
            """,
            LAYER,
            id="attribute-narrowed-in-branch",
        ),
        pytest.param(
            """
            def f(kv_cache_config):
                for g in kv_cache_config.kv_cache_groups:
                    if isinstance(g.kv_cache_spec, UniformTypeKVCacheSpecs):
                        pass
                    isinstance(g.kv_cache_spec, AttentionSpec)  # the paths meet: no longer known
            """,
            GROUP,
            id="narrowing-lost-where-paths-meet",
        ),
        pytest.param(
            """
            def f(kv_cache_config):
                spec = None
                try:
                    spec = kv_cache_config.kv_cache_groups[0].kv_cache_spec
                    risky()
                except ValueError:
                    isinstance(spec, AttentionSpec)  # the handler may start after the assignment
            """,
            GROUP,
            id="try-body-reaches-handler",
        ),
        pytest.param(
            """
            def f(kv_cache_config):
                spec = kv_cache_config.kv_cache_groups[0].kv_cache_spec

                def later():
                    return isinstance(spec, AttentionSpec)  # a closure: every binding of the function

                spec = None
                return later
            """,
            GROUP,
            id="closure-sees-every-binding",
        ),
        pytest.param(
            """
            def f(kv_cache_config, kind):
                spec = kv_cache_config.kv_cache_groups[0].kv_cache_spec
                match kind:
                    case _:
                        spec = None
                isinstance(spec, AttentionSpec)  # `match` is not walked: every binding
            """,
            GROUP,
            id="unmodelled-statement-falls-back",
        ),
        pytest.param(
            """
            def _unwrap(spec):
                if isinstance(spec, UniformTypeKVCacheSpecs):
                    return next(iter(spec.kv_cache_specs.values()))
                return spec

            def f(kv_cache_config):
                for g in kv_cache_config.kv_cache_groups:
                    isinstance(_unwrap(g.kv_cache_spec), AttentionSpec)
            """,
            LAYER,
            id="unwrapping-helper-of-the-module",
        ),
    ],
)
def test_provenance_is_what_reaches_the_read(source, expected):
    assert kind_at_last_check(source) is expected
