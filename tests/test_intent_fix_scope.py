"""What a KV101 fix must know of the scope it writes into (rules/_fix_scope.py): a use of the checked value
the check guards, a name the rewrite calls that the scope rebinds, a free loop name. One snippet per
behaviour, named after it; written against the mutants scripts/mutation.py made of that module (issue 31)."""

from __future__ import annotations

import libcst as cst
import pytest

from kvlint.analysis.cst_walk import parent_map, preorder
from kvlint.analysis.flow.provenance import SpecFlow
from kvlint.rules._fix_scope import free_name, guarded_use, rebinding, resolved_calls
from tests.test_witness_semantics import _isinstance_call


def flow_of(source: str):
    module = cst.parse_module(source)
    return SpecFlow(module, lambda: parent_map(module)), _isinstance_call(module)


def use(source: str) -> str | None:
    flow, check = flow_of(source)
    return guarded_use(flow, check, check.args[0].value)


@pytest.mark.parametrize(
    ("body", "found"),
    [
        # past `if not check: continue` (or any exit) the rest of the block is narrowed: a use there counts
        (
            "if not isinstance(g.spec, MambaSpec):\n            continue\n        n = g.spec.mamba_type",
            "g.spec.mamba_type",
        ),
        (
            "if not isinstance(g.spec, MambaSpec):\n            log()\n            break\n        n = g.spec.x",
            "g.spec.x",
        ),
        ("if not isinstance(g.spec, MambaSpec): raise ValueError()\n        n = g.spec.x", "g.spec.x"),
        # a branch that does not leave: what follows is reached either way, not guarded
        ("if not isinstance(g.spec, MambaSpec):\n            log()\n        n = g.spec.x", None),
        # in the check's own statement, outside the check
        ("ok = isinstance(g.spec, MambaSpec) and g.spec.x > 1", "g.spec.x"),
        ("ok = isinstance(g.spec, MambaSpec) and g.other", None),
        # a name bound to the same value is the same value
        (
            "spec = g.spec\n        if not isinstance(spec, MambaSpec):\n            continue\n        n = g.spec.x",
            "g.spec.x",
        ),
        (
            "spec = g.spec\n        if not isinstance(g.spec, MambaSpec):\n            continue\n        n = spec.x",
            "spec.x",
        ),
        # another class test of it is a look, not a use
        ("if not isinstance(g.spec, MambaSpec):\n            continue\n        n = type(g.spec)", None),
        ("if not isinstance(g.spec, MambaSpec):\n            continue\n        n = isinstance(g.spec, A)", None),
    ],
)
def test_a_use_of_the_checked_value_the_check_guards(body, found):
    assert use(f"def f(groups, log):\n    for g in groups:\n        {body}\n") == found


def test_a_check_outside_any_statement_guards_nothing():
    assert use("def f(s=isinstance(x, A)):\n    pass\n") is None


@pytest.mark.parametrize(
    ("source", "why"),
    [
        ("def f(all, s):\n    return isinstance(s, A)\n", "`all` is a parameter here"),
        ("def f(s):\n    all = 1\n    return isinstance(s, A)\n", "`all` is bound in `f`"),
        ("from numpy import all\n\ndef f(s):\n    return isinstance(s, A)\n", "`all` is bound at module level"),
        ("def f(ss):\n    return [isinstance(s, A) for all in ss]\n", "`all` is a comprehension variable here"),
        ("f = lambda all, s: isinstance(s, A)\n", "`all` is a parameter here"),
        ("def f(s):\n    return isinstance(s, A)\n", None),
    ],
)
def test_a_name_the_rewrite_calls_that_the_scope_rebinds(source, why):
    flow, check = flow_of(source)
    assert rebinding(flow, check, ("all",), "vllm/x.py") == why


def test_the_interface_modules_own_helper_imported_from_there_is_the_one_the_fix_means():
    helper = ("iter_layer_specs",)
    meant = "from vllm.v1.kv_cache_interface import iter_layer_specs\n\ndef f(s):\n    return isinstance(s, A)\n"
    flow, check = flow_of(meant)
    assert rebinding(flow, check, helper, "vllm/x.py") is None
    renamed = meant.replace("import iter_layer_specs", "import other as iter_layer_specs")
    flow, check = flow_of(renamed)
    assert rebinding(flow, check, helper, "vllm/x.py") == "`iter_layer_specs` is bound at module level"
    own = "def iter_layer_specs(s):\n    return s\n\ndef f(s):\n    return isinstance(s, A)\n"
    flow, check = flow_of(own)
    assert rebinding(flow, check, helper, "vllm.v1.kv_cache_interface") is None
    assert rebinding(flow, check, helper, "vllm/x.py") == "`iter_layer_specs` is bound at module level"


def test_a_loop_name_the_code_does_not_mention():
    assert free_name("x") == "spec"
    assert free_name("spec") == "layer_spec"
    assert free_name("spec layer_spec layer layer_spec_1") == "layer_spec_2"


HELPER_IMPORT = "from vllm.v1.kv_cache_interface import iter_layer_specs\n"
CHECK = "\ndef f(s):\n    return isinstance(s, A)\n"


def helper_rebinding(module_code: str, own_module: str = "vllm/x.py") -> str | None:
    flow, check = flow_of(HELPER_IMPORT + module_code + CHECK)
    return rebinding(flow, check, ("iter_layer_specs",), own_module)


def test_a_builtin_the_interface_module_defines_is_a_rebinding_even_there():
    # The interface module's own `def all` is not the builtin the rewrite calls (unlike its own helper).
    flow, check = flow_of("def all(x):\n    return x\n" + CHECK)
    assert rebinding(flow, check, ("all",), "vllm.v1.kv_cache_interface") == "`all` is bound at module level"


@pytest.mark.parametrize(
    "other",
    [
        "from numpy import zeros\n",  # another import binds another name
        "X = 1\n",  # an assignment of another name
        "def g():\n    iter_layer_specs = 1\n",  # a nested function's own local
        "class C:\n    iter_layer_specs = 1\n",  # a class attribute
    ],
)
def test_only_bindings_of_the_helpers_own_name_in_the_modules_own_scope_make_it_another(other):
    assert helper_rebinding(other) is None


@pytest.mark.parametrize(
    "other",
    [
        "for iter_layer_specs in x:\n    pass\n",
        "iter_layer_specs: object = None\n",
        "import numpy as iter_layer_specs\n",
        "import iter_layer_specs.sub\n",  # binds the package's first name
        "import iter_layer_specs\n",
    ],
)
def test_the_helper_imported_from_the_interface_and_rebound_otherwise_is_another(other):
    assert helper_rebinding(other) == "`iter_layer_specs` is bound at module level"


@pytest.mark.parametrize(
    "binding",
    [
        "s: KVCacheSpec = g.spec",  # an annotated assignment binds the same value
        "if (s := g.spec) is None:\n            continue",  # so does a walrus
    ],
)
def test_a_name_bound_to_the_checked_value_by_any_assignment_is_that_value(binding):
    body = f"{binding}\n        if not isinstance(s, MambaSpec):\n            continue\n        n = g.spec.x"
    assert use(f"def f(groups):\n    for g in groups:\n        {body}\n") == "g.spec.x"


@pytest.mark.parametrize(
    ("branch", "found"),
    [
        ("\n            log(); continue", "g.spec.x"),  # the exit ends the block's last line
        (" log()", None),  # a one-line branch that does not leave
        (" continue; log()", "g.spec.x"),  # an exit anywhere on a one-line branch leaves
    ],
)
def test_a_branch_leaves_when_its_last_line_or_its_one_line_suite_exits(branch, found):
    body = f"if not isinstance(g.spec, MambaSpec):{branch}\n        n = g.spec.x"
    assert use(f"def f(groups, log):\n    for g in groups:\n        {body}\n") == found


def test_a_check_at_module_level_guards_a_use_after_it():
    assert use("for g in groups:\n    if not isinstance(g.spec, MambaSpec):\n        continue\n    n = g.spec.x\n") == (
        "g.spec.x"
    )


def test_a_name_bound_through_a_chain_of_assignments_is_the_checked_value():
    body = "a = g.spec\n        b = a\n        if not isinstance(b, MambaSpec):\n            continue\n        n = g.spec.x"
    assert use(f"def f(groups):\n    for g in groups:\n        {body}\n") == "g.spec.x"


def calls_reaching(source: str, function: str, line: int = 0) -> tuple[list[int], list[int]]:
    """The lines of the calls that reach the `def function` (the `line`th of that name), and of those that may."""
    module = cst.parse_module(source)
    flow = SpecFlow(module, lambda: parent_map(module))
    defs = [n for n in preorder(module) if isinstance(n, cst.FunctionDef) and n.name.value == function]
    reaching, unknown = resolved_calls(flow, defs[line])
    lines = {call: source[: source.index(module.code_for_node(call))].count("\n") + 1 for call in reaching + unknown}
    return [lines[c] for c in reaching], [lines[c] for c in unknown]


def test_a_call_by_bare_name_reaches_a_module_function_defined_once():
    assert calls_reaching("def f(s):\n    pass\n\nx = f(1)\n", "f") == ([4], [])


def test_a_call_by_bare_name_may_reach_either_of_two_functions_of_that_name():
    source = "def f(s):\n    pass\n\ndef f(s):\n    pass\n\nx = f(1)\n"
    assert calls_reaching(source, "f") == ([], [7])


def test_a_bare_name_never_reaches_a_method_of_that_name():
    source = "class C:\n    def f(self, s):\n        pass\n\nx = f(1)\ny = C.f(2)\n"
    assert calls_reaching(source, "f") == ([6], [])
