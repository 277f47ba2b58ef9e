"""The shortcuts the reaching-definitions walk takes for speed (issue 30) answer as the full walk does: an
expression is searched for a `:=` only where the module has one under it (SpecFlow's walrus holders), and
paths that meet merge their bindings in the same order whichever tuples they share."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from kvlint.analysis.cst_walk import ModuleShape
from kvlint.analysis.flow.cst_bindings import Binding
from kvlint.analysis.flow.provenance import Kind, SpecFlow
from kvlint.analysis.flow.reaching import merge
from tests.test_intent_provenance import calls_named

# A walrus rebinds `spec` in a test, a call's argument, an assert: the read after it sees the group spec only
# if the walk finds the walrus (skipped, `spec` would still be the unknown parameter `other`).
WALRUSES = [
    "if (spec := kv_cache_config.kv_cache_groups[0].kv_cache_spec) is not None:\n        probe(spec)",
    "use(1, [(spec := kv_cache_config.kv_cache_groups[0].kv_cache_spec)])\n    probe(spec)",
    "assert (spec := kv_cache_config.kv_cache_groups[0].kv_cache_spec)\n    probe(spec)",
    "for i in range(2):\n        use(spec := kv_cache_config.kv_cache_groups[i].kv_cache_spec)\n    probe(spec)",
]


@pytest.mark.parametrize("statement", WALRUSES)
@pytest.mark.parametrize("shaped", [True, False], ids=["module shape", "lazy parents"])
def test_a_walrus_deep_in_an_expression_still_rebinds_the_name(statement: str, shaped: bool) -> None:
    source = textwrap.dedent("def f(kv_cache_config, other):\n    spec = other\n    " + statement + "\n")
    module = cst.parse_module(source)
    if shaped:
        shape = ModuleShape(module)
        flow = SpecFlow(module, shape.parents, shape.preorder)
    else:
        flow = SpecFlow(module, lambda: ModuleShape(module).parents)
    assert flow.classify(calls_named(module, "probe")[-1].args[0].value).kind is Kind.GROUP_SPEC


def _binding() -> Binding:
    return Binding(value=None, path=(), is_loop=False)


def test_merge_keeps_first_seen_order_and_each_binding_once() -> None:
    a, b, c, d = (_binding() for _ in range(4))
    shared = (a, b)
    merged = merge({"x": shared, "y": (c,)}, {"x": shared, "y": (d, c)}, {"x": (b, d, a)}, None)
    assert merged == {"x": (a, b, d), "y": (c, d)}
    assert [id(v) for v in merged["x"]] == [id(a), id(b), id(d)]
    # A binding one path added is not added again by a later path that brings it too.
    assert [id(v) for v in merge({"x": (a,)}, {"x": (b,)}, {"x": (b, c)})["x"]] == [id(a), id(b), id(c)]


def test_merge_keeps_a_dotted_fact_only_where_every_path_has_it() -> None:
    a, b = _binding(), _binding()
    both = merge({"g.kv_cache_spec": (a,), "x": (a,)}, {"x": (b,), "g.kv_cache_spec": (a,)})
    assert list(both) == ["x", "g.kv_cache_spec"] and [id(v) for v in both["x"]] == [id(a), id(b)]
    assert merge({"g.kv_cache_spec": (a,)}, {"x": (b,)}, {"g.kv_cache_spec": (a,)}) == {"x": (b,)}
