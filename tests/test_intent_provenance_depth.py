"""The depth bound of kvlint.analysis.flow.provenance: every step a value takes to reach where it is read (an
alias, a loop, a call, a subscript, …) costs one, and a chain of more steps than the bound is UNKNOWN.
Each shape below is followed by `x1 = x0`, … `probe(xN)`: N aliases resolve, N + 1 do not. A step that cost
two, or a bound one larger, moves that edge. Written against the mutants scripts/mutation.py made of that
module (issue 31)."""

from __future__ import annotations

import textwrap

import pytest

from kvlint.analysis.flow.provenance import Kind
from tests.test_intent_provenance import calls_named, flow_of, probed

# shape (its chain of aliases at CHAIN) → the most aliases after it that still resolve.
SHAPES = {
    "subscript of the groups": (
        """
        def f(kv_cache_config):
            x0 = kv_cache_config.kv_cache_groups[0]
            CHAIN
        """,
        4,
    ),
    "next of the groups": (
        """
        def f(kv_cache_config):
            x0 = next(iter(kv_cache_config.kv_cache_groups))
            CHAIN
        """,
        2,
    ),
    "a call of an unwrapper": (
        """
        def unwrap(spec):
            return spec.kv_cache_specs[0]

        def f(spec):
            x0 = unwrap(spec)
            CHAIN
        """,
        3,
    ),
    "a walrus": (
        """
        def f(kv_cache_config):
            x0 = (y := kv_cache_config.kv_cache_groups)
            CHAIN
        """,
        4,
    ),
    "a group's spec": (
        """
        def f(kv_cache_config):
            for g in kv_cache_config.kv_cache_groups:
                x0 = g.kv_cache_spec
                CHAIN
        """,
        2,
    ),
    "enumerate": (
        """
        def f(kv_cache_config):
            for i, x0 in enumerate(kv_cache_config.kv_cache_groups):
                CHAIN
        """,
        3,
    ),
    "zip": (
        """
        def f(kv_cache_config, names):
            for x0, name in zip(kv_cache_config.kv_cache_groups, names):
                CHAIN
        """,
        3,
    ),
    "list()": (
        """
        def f(kv_cache_config):
            for x0 in list(kv_cache_config.kv_cache_groups):
                CHAIN
        """,
        3,
    ),
    "a comprehension": (
        """
        def f(kv_cache_config):
            for x0 in [g for g in kv_cache_config.kv_cache_groups if g]:
                CHAIN
        """,
        2,
    ),
    "a tuple": (
        """
        def f(group: KVCacheGroupSpec):
            for x0 in (group,):
                CHAIN
        """,
        4,
    ),
    "a conditional expression": (
        """
        def f(kv_cache_config, on):
            x0 = kv_cache_config.kv_cache_groups[0].kv_cache_spec if on else None
            CHAIN
        """,
        2,
    ),
    "a layer iterator": (
        """
        def f(spec):
            for x0 in iter_layer_specs(spec):
                CHAIN
        """,
        5,
    ),
    "an annotated parameter": (
        """
        def f(x0: KVCacheGroupSpec):
            CHAIN
        """,
        6,
    ),
    "a caller's argument": (
        """
        def helper(x0):
            CHAIN

        def f(group: KVCacheGroupSpec):
            helper(group)
        """,
        5,
    ),
    "a container's values": (
        """
        def f(spec):
            for x0 in spec.kv_cache_specs.values():
                CHAIN
        """,
        5,
    ),
}


def chained(shape: str, aliases: int) -> str:
    lines = []
    for line in textwrap.dedent(shape).splitlines():
        if line.strip() == "CHAIN":
            indent = line[: len(line) - len(line.lstrip())]
            lines += [f"{indent}x{i + 1} = x{i}" for i in range(aliases)] + [f"{indent}probe(x{aliases})"]
        else:
            lines.append(line)
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("name", SHAPES)
def test_the_depth_bound_counts_each_step_once(name: str) -> None:
    shape, most = SHAPES[name]
    assert probed(chained(shape, most)) is not Kind.UNKNOWN
    assert probed(chained(shape, most + 1)) is Kind.UNKNOWN


def test_an_unwrapper_asked_alone_has_the_whole_depth_budget() -> None:
    # Its returned value is read at depth 1: four aliases deep is the last that resolves.
    def unwrapper(aliases: int) -> str:
        steps = "".join(f"    x{i + 1} = x{i}\n" for i in range(aliases))
        return f"def unwrap(spec):\n    x0 = spec.kv_cache_specs[0]\n{steps}    return x{aliases}\n"

    flow, _ = flow_of(unwrapper(4))
    assert flow.returns_layer_spec("unwrap")
    flow, _ = flow_of(unwrapper(5))
    assert not flow.returns_layer_spec("unwrap")


def test_whether_a_function_unwraps_is_decided_once_not_per_depth() -> None:
    # Asked first by a shallow read, the answer holds for a read at the end of a chain too deep to decide it.
    source = """
    def unwrap(spec):
        return spec.kv_cache_specs[0]

    def shallow(spec):
        probe(unwrap(spec))

    def deep(spec):
        x0 = unwrap(spec)
        x1 = x0
        x2 = x1
        x3 = x2
        x4 = x3
        x5 = x4
        probe(x5)
    """
    flow, module = flow_of(source)
    shallow, deep = (call.args[0].value for call in calls_named(module, "probe"))
    assert flow.classify(shallow).kind is Kind.LAYER_SPEC
    assert flow.classify(deep).kind is Kind.LAYER_SPEC
