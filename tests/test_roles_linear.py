"""The readers of roles, consumers and the sizing program cost time linear (or n log n) in a module a pull request or
a plugin package controls (a red team's crafted inputs of hundreds of kilobytes, or thousands of classes, each took
from several seconds to minutes before): a chain of classes deriving from the target's (the tree's roles and the
package's), a file's class lines and reads of an accessor, helper calls among many helpers, and the blocks of a
module parsed one by one far down it. Each is also read as before."""

from __future__ import annotations

import ast
import time

import pytest

from kvlint.analysis.flow.consumers import _Outline, scheduler_consumed_members
from kvlint.analysis.package_classes import derived_from, read_package_classes
from kvlint.analysis.plugin_roles import read_tree_roles
from kvlint.analysis.sizing.program import calls_a_helper, parse_module
from kvlint.analysis.vocabulary import DEFAULT_SCHEDULER_ONLY_PATHS

# Each crafted input below took 6 s or more before (up to ~13 s), and takes under 0.5 s now.
LIMIT_S = 3


def bounded(function, *arguments):
    started = time.monotonic()
    result = function(*arguments)
    assert time.monotonic() - started < LIMIT_S
    return result


MIXINS = ", ".join(f"Mixin{j}" for j in range(16))  # bases beside the chain's: each fixpoint round tested them all


def chain(count: int, root: str) -> str:
    """Classes each deriving from the one after it, the last from `root`: a fixpoint round found one of them."""
    classes = "".join(f"class C{i}(C{i + 1}, {MIXINS}):\n    pass\n" for i in range(count))
    return classes + f"class C{count}({root}):\n    pass\n"


def test_the_trees_roles_are_read_down_from_their_roots():
    tree = {
        "vllm/v1/core/sched/scheduler.py": b"class Scheduler(SchedulerInterface):\n    pass\n",
        "vllm/plugins/a.py": b"class Late(Mid):\n    pass\nclass Mid(KVConnectorBase_V1, Scheduler):\n    pass\n"
        b"class Other(Mixin):\n    pass\nclass Both(Late, Other):\n    pass\n",
    }
    roles = read_tree_roles(tree, DEFAULT_SCHEDULER_ONLY_PATHS)
    assert roles.scheduler_classes == {"Scheduler", "Mid", "Late", "Both"}
    assert roles.connector_classes == {"KVConnectorBase_V1", "Mid", "Late", "Both"}


def test_a_chain_of_the_trees_classes_costs_linear_time():
    roles = bounded(read_tree_roles, {"vllm/plugins/chain.py": chain(8000, "KVConnectorBase_V1").encode()}, ())
    assert len(roles.connector_classes) == 8002  # the chain's classes and the base


def test_the_packages_classes_derive_from_the_targets_through_its_own():
    classes = (
        ("A", (("vllm", "Scheduler"),)),
        ("B", (("package", "A"),)),
        ("Own", (("package", "Scheduler"),)),  # the package's own Scheduler derives from nothing of the target's
        ("Named", (("vllm", "A"),)),  # vLLM's A is not the package's
        ("Late", (("package", "Later"),)),
        ("Later", (("package", "B"), ("vllm", "Other"))),
        ("B", (("vllm", "Other"),)),  # a second class of the same name: one derived is enough
    )
    assert derived_from(classes, frozenset({"Scheduler"})) == {"A", "B", "Later", "Late"}
    assert derived_from(classes, frozenset()) == frozenset()


def test_a_chain_of_the_packages_classes_costs_linear_time():
    imports = f"from vllm.v1.core.sched.scheduler import Scheduler\nfrom .mixins import {MIXINS}\n"
    classes = read_package_classes([(imports + chain(4000, "Scheduler")).encode()])
    assert len(bounded(derived_from, classes, frozenset({"Scheduler"}))) == 4001


def test_the_outline_names_the_classes_and_def_around_a_line():
    data = (
        b"class A:\n"
        b"    class BScheduler:\n"
        b"        def pulls(self):\n"
        b"            x.pulls\n"
        b"    def f(self):\n"
        b"\tclass C:\n"
        b"          y.pulls; \x0c z.pulls\n"
        b"x.pulls\n"
    )
    outline = _Outline(data)
    reads = [offset for offset in range(len(data)) if data.startswith(b".pulls", offset)]
    asked = [outline.enclosing(offset) for offset in [0, *reads]]
    assert asked == [
        {"classes": [], "def": None},
        {"classes": ["BScheduler", "A"], "def": "pulls"},
        {"classes": ["C", "A"], "def": "f"},
        {"classes": ["C", "A"], "def": "f"},  # blanks and a form feed before a read: the line's indent
        {"classes": [], "def": "f"},  # the def is the nearest above, whatever its indent: as it was read before
    ]


def test_the_outline_counts_no_def_on_the_reads_own_line_and_is_asked_in_order():
    # A one-line def is above the lines after it, not its own line's reads: the first line as any other.
    line = b"def pulls(self): return self.x.pulls\n"
    for data in (line, b"\n" + line, b"class A:\n" + line):
        outline = _Outline(data)
        assert outline.enclosing(data.rindex(b".pulls"))["def"] is None
    outline = _Outline(line * 2)
    assert outline.enclosing((line * 2).rindex(b".pulls"))["def"] == "pulls"
    with pytest.raises(ValueError):
        outline.enclosing(0)  # asked back: the stack of classes has passed that line


ACCESSOR = b"class Half:\n    def pulls(self):\n        return self._pulls\n"
CONNECTOR = "vllm/distributed/kv_transfer/kv_connector/v1/half.py"


def test_reads_only_the_scheduler_makes_are_consumed_by_it():
    texts = {CONNECTOR: ACCESSOR, "vllm/x.py": b"class AScheduler:\n    def f(self):\n        return y.pulls\n"}
    assert scheduler_consumed_members(texts, ()) == frozenset({"pulls"})
    texts["vllm/x.py"] += b"class Worker:\n    def f(self):\n        return y.pulls\n"
    assert scheduler_consumed_members(texts, ()) == frozenset()


def consumed(crafted: bytes) -> frozenset[str]:
    texts = {CONNECTOR: ACCESSOR, "vllm/v1/core/sched/crafted.py": crafted}  # read by the scheduler only
    return scheduler_consumed_members(texts, DEFAULT_SCHEDULER_ONLY_PATHS)


def test_reads_below_many_classes_cost_linear_time():
    classes = b"def g():\n" + b"".join(b"    class A%d:\n        pass\n" % i for i in range(16_000))
    assert bounded(consumed, classes + b"        x = y.pulls\n" * 16_000) == frozenset({"pulls"})


def test_a_long_line_of_reads_costs_linear_time():
    assert bounded(consumed, b"x = [" + b"y.pulls, " * 200_000 + b"]\n") == frozenset({"pulls"})


def helpers(*names: str):
    return [parse_module("helpers.py", "".join(f"def {name}(spec, dcp_size):\n    pass\n" for name in names))]


def test_a_helpers_name_before_a_bracket_is_its_call():
    modules = helpers("size", "resolve")
    assert calls_a_helper("dcp = 1\nresolve(spec, dcp)\n", modules)
    assert calls_a_helper("dcp = 1\nn = block_size(s)\n", modules)  # as text: a name ending in a helper's
    assert calls_a_helper("dcp = 1\n'size('\n", modules)
    assert not calls_a_helper("dcp = 1\nresolve (spec)\nsize\n(\nsized(\n", modules)
    assert not calls_a_helper("resolve(spec)\n", modules)  # no DCP size mentioned
    assert not calls_a_helper("dcp = 1\nresolve(spec)\n", [parse_module("m.py", "def resolve(spec):\n    pass\n")])


def test_many_helpers_in_a_long_module_cost_linear_time():
    modules = helpers(*(f"helper_{i}" for i in range(8000)))
    assert bounded(calls_a_helper, "dcp = 1\n" + "helper_(" * 200_000, modules) is False


_shift = ast.increment_lineno


def positions(nodes) -> list[tuple]:
    attributes = ("lineno", "col_offset", "end_lineno", "end_col_offset")
    return [
        (type(node).__name__, *(getattr(node, name, None) for name in attributes))
        for top in nodes
        for node in ast.walk(top)
    ]


def test_a_partial_parse_places_each_block_as_a_whole_parse_does(monkeypatch):
    shifted = []
    monkeypatch.setattr(ast, "increment_lineno", lambda node, lines: shifted.append(lines) or _shift(node, lines))
    block = "def f{}(spec):\n    é = dcp_size\n    return (spec.block_size *\n        é)\n"
    # A block near the top (placed by leading newlines) and two far below (parsed alone, then shifted).
    text = "x = 1\n" * 10 + block.format(0) + "x = 1\r\n" * 3000 + block.format(1) + "\n" + block.format(2)
    module = parse_module("m.py", text, partial=True)
    whole = ast.parse(text)
    assert [node.name for node in module.tree.body] == ["f0", "f1", "f2"]
    kept = [node for node in whole.body if isinstance(node, ast.FunctionDef)]
    assert positions(module.tree.body) == positions(kept)
    assert shifted == [3014, 3019]


def test_many_blocks_far_down_a_module_cost_linear_time():
    text = "x = 1\n" * 200_000 + "".join(f"def f{i}(spec):\n    return dcp_size\n" for i in range(2000))
    module = bounded(parse_module, "crafted.py", text, True)
    assert len(module.tree.body) == 2000
    assert (module.tree.body[-1].lineno, module.tree.body[-1].body[0].value.col_offset) == (203999, 11)
