"""Where a spec expression comes from (kvlint.analysis.flow.provenance): one snippet per way a value flows, the
expression asked about is the argument of the last `probe(…)`. Written against the mutants
scripts/mutation.py made of that module (issue 31)."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from kvlint.analysis.flow.provenance import Kind, SpecFlow
from kvlint.engine.lint import collect_parents

GROUP_LIST, GROUP, GROUP_SPEC, LAYER, UNKNOWN = (
    Kind.GROUP_LIST,
    Kind.GROUP,
    Kind.GROUP_SPEC,
    Kind.LAYER_SPEC,
    Kind.UNKNOWN,
)


def calls_named(module: cst.Module, name: str) -> list[cst.Call]:
    found = []

    class Finder(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            if isinstance(node.func, cst.Name) and node.func.value == name:
                found.append(node)

    module.visit(Finder())
    return found


def flow_of(source: str) -> tuple[SpecFlow, cst.Module]:
    module = cst.parse_module(textwrap.dedent(source))
    return SpecFlow(module, lambda: collect_parents(module)), module


def probed(source: str) -> Kind:
    """The provenance kind of the last `probe(…)`'s argument."""
    flow, module = flow_of(source)
    return flow.classify(calls_named(module, "probe")[-1].args[0].value).kind


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        pytest.param(
            """
            def f(spec):
                probe(spec.kv_cache_specs["layer.0"])
            """,
            LAYER,
            id="an-entry-of-a-containers-kv_cache_specs-is-a-layer",
        ),
        pytest.param(
            """
            def f(spec):
                probe(spec.layers["layer.0"])
            """,
            UNKNOWN,
            id="an-entry-of-another-mapping-is-unknown",
        ),
        pytest.param(
            """
            def f(kv_cache_specs):
                probe(kv_cache_specs["layer.0"])
            """,
            UNKNOWN,
            id="an-entry-of-a-bare-name-kv_cache_specs-is-unknown",
        ),
        pytest.param(
            """
            def f(kv_cache_config):
                group = next(iter(kv_cache_config.kv_cache_groups))
                probe(group.kv_cache_spec)
            """,
            GROUP_SPEC,
            id="next-of-the-groups-is-a-group",
        ),
        pytest.param(
            """
            def f(kv_cache_config, on):
                probe(kv_cache_config.kv_cache_groups[0].kv_cache_spec if on else None)
            """,
            GROUP_SPEC,
            id="a-group-spec-or-None-is-a-group-spec",
        ),
        pytest.param(
            """
            def f(kv_cache_config, on):
                probe(None if on else kv_cache_config.kv_cache_groups[0].kv_cache_spec)
            """,
            GROUP_SPEC,
            id="None-or-a-group-spec-is-a-group-spec",
        ),
        pytest.param(
            """
            def f(kv_cache_config, on, other):
                probe(kv_cache_config.kv_cache_groups[0].kv_cache_spec if on else other)
            """,
            UNKNOWN,
            id="a-group-spec-or-an-unknown-name-is-unknown",
        ),
        pytest.param(
            """
            def f(on, this, that):
                probe(this if on else that)
            """,
            UNKNOWN,
            id="one-unknown-or-another-is-unknown",
        ),
        pytest.param(
            """
            def f(kv_cache_config):
                for i, group in enumerate(kv_cache_config.kv_cache_groups):
                    probe(group.kv_cache_spec)
            """,
            GROUP_SPEC,
            id="enumerates-second-item-is-the-group",
        ),
        pytest.param(
            """
            def f(kv_cache_config):
                for i, group in enumerate(kv_cache_config.kv_cache_groups):
                    probe(i)
            """,
            UNKNOWN,
            id="enumerates-first-item-is-an-index",
        ),
        pytest.param(
            """
            def f(kv_cache_config, names):
                for i, (group, name) in enumerate(zip(kv_cache_config.kv_cache_groups, names)):
                    probe(group.kv_cache_spec)
            """,
            GROUP_SPEC,
            id="a-nested-target-inside-enumerate-follows-its-path",
        ),
        pytest.param(
            """
            def f(kv_cache_config, names):
                for group, name in zip(kv_cache_config.kv_cache_groups, names):
                    probe(group.kv_cache_spec)
            """,
            GROUP_SPEC,
            id="zips-first-item-comes-from-its-first-argument",
        ),
        pytest.param(
            """
            def f(kv_cache_config, names):
                for name, group in zip(names, kv_cache_config.kv_cache_groups):
                    probe(group.kv_cache_spec)
            """,
            GROUP_SPEC,
            id="zips-second-item-comes-from-its-second-argument",
        ),
        pytest.param(
            """
            def f(kv_cache_config, names):
                for (group, i), name in zip(zip(kv_cache_config.kv_cache_groups, names), names):
                    probe(group.kv_cache_spec)
            """,
            GROUP_SPEC,
            id="a-nested-target-inside-zip-follows-its-path",
        ),
        pytest.param(
            """
            def f(kv_cache_config, rest):
                for name, group in zip(*rest, kv_cache_config.kv_cache_groups):
                    probe(group.kv_cache_spec)
            """,
            UNKNOWN,
            id="after-a-starred-argument-zips-positions-are-unknown",
        ),
        pytest.param(
            """
            def f(kv_cache_config, rest):
                for name, group in zip(kv_cache_config.kv_cache_groups, *rest):
                    probe(group.kv_cache_spec)
            """,
            UNKNOWN,
            id="an-item-taken-from-a-starred-argument-of-zip-is-unknown",
        ),
        pytest.param(
            """
            def f(kv_cache_config):
                for group in sorted(kv_cache_config.kv_cache_groups):
                    probe(group.kv_cache_spec)
            """,
            GROUP_SPEC,
            id="sorted-passes-the-groups-through",
        ),
        pytest.param(
            """
            def f(kv_cache_config, helper):
                for spec in helper(kv_cache_config):
                    probe(spec)
            """,
            UNKNOWN,
            id="the-items-of-an-unknown-call-are-unknown",
        ),
        pytest.param(
            """
            def f(spec):
                for layer in spec.kv_cache_specs.values():
                    probe(layer)
            """,
            LAYER,
            id="the-values-of-a-containers-kv_cache_specs-are-layers",
        ),
        pytest.param(
            """
            def f(spec):
                for name, layer in spec.kv_cache_specs.items():
                    probe(layer)
            """,
            LAYER,
            id="the-items-of-a-containers-kv_cache_specs-are-layers",
        ),
        pytest.param(
            """
            def f(spec):
                for name in spec.kv_cache_specs.keys():
                    probe(name)
            """,
            UNKNOWN,
            id="the-keys-of-a-containers-kv_cache_specs-are-no-specs",
        ),
        pytest.param(
            """
            def f(spec):
                for layer in spec.layers.values():
                    probe(layer)
            """,
            UNKNOWN,
            id="the-values-of-another-attribute-are-unknown",
        ),
        pytest.param(
            """
            def f(kv_cache_config):
                for group in [g for g in kv_cache_config.kv_cache_groups if g.kv_cache_spec]:
                    probe(group.kv_cache_spec)
            """,
            GROUP_SPEC,
            id="a-list-comprehension-over-the-groups-holds-groups",
        ),
        pytest.param(
            """
            def f(kv_cache_config):
                for a, b in [g for g in kv_cache_config.kv_cache_groups]:
                    probe(b.kv_cache_spec)
            """,
            UNKNOWN,
            id="a-destructured-item-of-a-comprehension-is-unknown",
        ),
        pytest.param(
            """
            def f(group: KVCacheGroupSpec):
                for spec in (group.kv_cache_spec,):
                    probe(spec)
            """,
            GROUP_SPEC,
            id="a-tuple-of-group-specs-holds-group-specs",
        ),
        pytest.param(
            """
            def f(group: KVCacheGroupSpec, other):
                for spec in (group.kv_cache_spec, other):
                    probe(spec)
            """,
            UNKNOWN,
            id="a-tuple-of-a-group-spec-and-an-unknown-is-unknown",
        ),
        pytest.param(
            """
            def f(things):
                for thing in things:
                    probe(thing.kv_cache_spec)
            """,
            UNKNOWN,
            id="the-items-of-an-unknown-iterable-are-no-groups",
        ),
        pytest.param(
            """
            def f(kv_cache_config):
                for a, b in kv_cache_config.kv_cache_groups:
                    probe(b.kv_cache_spec)
            """,
            UNKNOWN,
            id="a-destructured-item-of-the-groups-is-unknown",
        ),
        pytest.param(
            """
            for group in kv_cache_config.kv_cache_groups:
                probe(group.kv_cache_spec)
            """,
            GROUP_SPEC,
            id="a-loop-at-module-level-is-followed",
        ),
        pytest.param(
            """
            GROUPS = kv_cache_config.kv_cache_groups

            def f():
                probe(GROUPS)
            """,
            GROUP_LIST,
            id="a-module-level-name-read-in-a-function-is-followed",
        ),
        pytest.param(
            """
            def f(group: KVCacheGroupSpec):
                probe(group.kv_cache_spec)
            """,
            GROUP_SPEC,
            id="a-parameter-annotated-KVCacheGroupSpec-is-a-group",
        ),
        pytest.param(
            """
            class Worker:
                def describe(self, spec):
                    probe(spec)

                def run(self, kv_cache_config):
                    for group in kv_cache_config.kv_cache_groups:
                        self.describe(group.kv_cache_spec)
            """,
            GROUP_SPEC,
            id="a-method-called-through-self-gets-its-arguments-after-self",
        ),
        pytest.param(
            """
            class Worker:
                @staticmethod
                def describe(spec):
                    probe(spec)

                def run(self, kv_cache_config):
                    for group in kv_cache_config.kv_cache_groups:
                        Worker.describe(group.kv_cache_spec)
            """,
            GROUP_SPEC,
            id="a-static-method-called-through-its-class-gets-its-arguments-from-the-first",
        ),
        pytest.param(
            """
            def f(group: KVCacheGroupSpec, other):
                probe(group.kv_cache_spec)
                group = other
            """,
            GROUP_SPEC,
            id="a-parameter-rebound-later-in-the-body-is-still-the-parameter-before",
        ),
        pytest.param(
            """
            def f(kv_cache_config, on):
                spec = kv_cache_config.kv_cache_groups[0].kv_cache_spec
                if on:
                    spec = unwrap(spec)
                probe(spec)
            """,
            GROUP_SPEC,
            id="a-group-spec-on-one-path-and-an-unknown-on-another-is-a-group-spec",
        ),
    ],
)
def test_provenance_of_an_expression(source: str, expected: Kind) -> None:
    assert probed(source) is expected


def test_a_name_destructured_from_the_group_list_is_not_the_group_list() -> None:
    source = """
    def f(kv_cache_config):
        first, second = kv_cache_config.kv_cache_groups
        probe(first)
    """
    assert probed(source) is not GROUP_LIST


def test_a_function_that_only_recurses_or_returns_unknowns_is_no_unwrapper() -> None:
    # While a function is being decided, a call to itself answers "no": it cannot vouch for itself.
    source = """
    def peel(spec, n):
        if n:
            return peel(spec, n - 1)
        return make_spec()

    def f(kv_cache_config):
        probe(peel(kv_cache_config.kv_cache_groups[0].kv_cache_spec, 2))
    """
    assert probed(source) is UNKNOWN


def test_a_recursive_unwrapper_is_an_unwrapper() -> None:
    source = """
    def unwrap(spec):
        if isinstance(spec, UniformTypeKVCacheSpecs):
            return unwrap(next(iter(spec.kv_cache_specs.values())))
        return spec

    def f(kv_cache_config):
        probe(unwrap(kv_cache_config.kv_cache_groups[0].kv_cache_spec))
    """
    assert probed(source) is LAYER


@pytest.mark.parametrize(
    ("statement", "expected"),
    [
        ("return not isinstance(spec, UniformTypeKVCacheSpecs) and isinstance(spec, AttentionSpec)", True),
        ("if not isinstance(spec, UniformTypeKVCacheSpecs) and isinstance(spec, AttentionSpec):\n        pass", True),
        ("return isinstance(spec, MambaSpec) and isinstance(spec, AttentionSpec)", False),
    ],
)
def test_a_container_test_in_the_same_statement_counts(statement: str, expected: bool) -> None:
    flow, module = flow_of(f"def f(spec):\n    {statement}\n")
    check = next(c for c in calls_named(module, "isinstance") if c.args[1].value.value == "AttentionSpec")
    assert flow.checks_for_container(check, "spec") is expected


def test_the_classes_around_a_node_innermost_first() -> None:
    flow, module = flow_of(
        """
        class Outer:
            class Inner:
                def f(self):
                    probe(1)

        def g():
            probe(2)
        """
    )
    inside, outside = calls_named(module, "probe")
    assert flow.enclosing_class_names(inside) == ["Inner", "Outer"]
    assert flow.enclosing_class_names(outside) == []
