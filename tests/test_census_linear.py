"""The census costs time linear in a module a pull request controls (a red team's crafted modules, each a few hundred
kilobytes, stalled an index build for a minute or more before): the grouping paths read per function, not per
`from_specs` call; what a constructor builds combined without copying what it built before; the spec roots, the
platform reach's layer flags and the block at a line found without a scan per class; a block parsed at its line
without padding it there when that costs far more than the block. Each is also read as before."""

from __future__ import annotations

import ast
import time

import pytest

from kvlint.analysis.ast_helpers import parse_at
from kvlint.analysis.census.budget import BudgetExceeded
from kvlint.analysis.census.built import NOTHING, either, layer_built, product, referenced
from kvlint.analysis.census.class_texts import classes_of
from kvlint.analysis.census.parsing import ModuleTrees
from kvlint.analysis.census.paths import _Callers, _functions, _Lines, read_grouping_paths
from kvlint.analysis.census.reading import _Reader, _spec_roots, read_census
from kvlint.analysis.census.skeletons import method_of, parse_skeleton
from kvlint.analysis.platform_reach import _layer_flags

LIMIT_S = 5  # each crafted input took from 7 s to minutes; read linearly, under half a second

CONTAINER = "UniformTypeKVCacheSpecs"
GROUPING = "vllm/v1/core/kv_cache_utils.py"


def bounded(function, *arguments):
    started = time.monotonic()
    result = function(*arguments)
    assert time.monotonic() - started < LIMIT_S
    return result


def test_a_grouping_functions_calls_each_read_at_their_own_line():
    text = f"""
def whole(c, specs):
    if {CONTAINER}.from_specs(specs):
        return None
    kept = {{k: v for k, v in specs.items() if isinstance(v, FullSpec)}}
    return {CONTAINER}.from_specs(kept)


def caller(c, specs):
    filtered = {{k: v for k, v in specs.items() if not isinstance(v, HiddenSpec)}}
    return whole(c, filtered)
"""
    first, second = read_grouping_paths({GROUPING: text.encode()}, CONTAINER)
    assert (first.function, first.line, first.only, first.excluded) == ("whole", 3, frozenset(), {"HiddenSpec"})
    assert first.guards.returns_container and not second.guards.returns_container
    assert (second.line, second.only, second.excluded) == (6, {"FullSpec"}, {"HiddenSpec"})


def test_a_crafted_grouping_module_costs_linear_time():
    # A module that does not parse is read from its text alone: the paths' own reading, nothing else (with a
    # tree, kvlint.analysis.census.guards reads each call's guards).
    calls = "".join(f"    g({CONTAINER}.from_specs(specs))\n" for _ in range(2000))
    paths = bounded(read_grouping_paths, {GROUPING: f"def f(specs):\n{calls}def broken(:\n".encode()}, CONTAINER)
    assert [path.line for path in paths] == list(range(2, 2002))  # 35 s before
    callers = "".join(
        f"def f{i}(c, specs):\n    return {CONTAINER}.from_specs(specs)\n\n"
        f"def g{i}(c, specs):\n    kept = {{k: v for k, v in specs.items() if not isinstance(v, Hidden)}}\n"
        f"    return f{i}(c, kept)\n\n"
        for i in range(2000)
    )
    paths = bounded(read_grouping_paths, {GROUPING: f"{callers}def broken(:\n".encode()}, CONTAINER)
    assert len(paths) == 2000 and all(path.excluded == {"Hidden"} for path in paths)  # 20 s before


def test_the_guards_of_a_crafted_grouping_module_cost_linear_time():
    # A module that parses: each call's guards read from its tree (kvlint.analysis.census.guards), once per module
    # and function, not per call (100 s before).
    text = "".join(
        f"def f{i}(specs):\n    if {CONTAINER}.from_specs(specs):\n        return None\n\n" for i in range(2000)
    )
    paths = bounded(read_grouping_paths, {GROUPING: f"{text}def g(specs):\n    return f1(specs)\n".encode()}, CONTAINER)
    assert len(paths) == 2000 and all(path.guards.returns_container for path in paths)


def test_what_a_constructor_builds_is_combined_in_linear_time():
    def combine():
        built = NOTHING
        for line in range(20_000):  # 30 s before: each product copied the sites and counted the calls again
            built = product(built, layer_built("Attention", f"m.py:{line}", False))
        return built

    built = bounded(combine)
    assert len(built.sites) == 20_000 and built.varied == {"Attention"}
    # Reading a part first, or twice, changes nothing; one call reached twice is one construction.
    once = layer_built("Mamba", "m.py:1", False)
    assert product(once, once).varied == frozenset() and product(once, once).sites == {("Mamba", "m.py:1")}
    branches = either([once, layer_built("Mamba", "m.py:2", False)])
    assert branches.varied == frozenset() and product(branches, referenced(once)).varied == frozenset()
    assert product(branches, layer_built("Mamba", "m.py:3", False)).varied == {"Mamba"}


REGISTRY = b'_TEXT_GENERATION_MODELS = {\n    "Evil": ("evil", "Evil"),\n}\n'
LAYERS = "vllm/model_executor/layers/layer.py"


def census(layers: str, model: str = "class Evil:\n    pass\n"):
    texts = {
        "vllm/model_executor/models/registry.py": REGISTRY,
        LAYERS: layers.encode(),
        "vllm/model_executor/models/evil.py": f"from vllm.model_executor.layers.layer import Attention\n{model}".encode(),
    }
    trees = ModuleTrees(texts)
    return read_census(texts, frozenset({"FullSpec"}), trees=trees), trees


SPEC = "    def get_kv_cache_spec(self):\n        return FullSpec()\n"


def test_a_models_constructions_each_a_site():
    found, _ = census(
        f"class Attention:\n{SPEC}", "class Evil:\n    def __init__(self):\n" + "        Attention()\n" * 3
    )
    [model] = found.models
    assert model.sites == tuple(("Attention", f"vllm/model_executor/models/evil.py:{line}") for line in (4, 5, 6))
    assert model.varied == {"Attention"} and model.alternatives == (frozenset({"Attention"}),)


@pytest.mark.parametrize(
    ("text", "roots"),
    [
        (f"class A:\n{SPEC}", {"A"}),
        (f"class A:\n    class B:\n        pass\n{SPEC}", {"A"}),  # B as deep as the def: not around it
        (f"class A:\n    class B:\n        x = 1\n    {SPEC}", {"B"}),  # the last class above indented less
        (f"class A:\n    pass\nclass B:\n    class C:\n        pass\n{SPEC}", {"B"}),  # B hides A
        (f"class A:\n    class B:\n        pass\nclass C:\n    pass\n    {SPEC}", {"C"}),  # C hides A and B
        (f"def f():\n{SPEC}", set()),
        (f"class A:\n\tclass B:\n\t\tpass\n\t{SPEC}", {"B"}),  # a tab and four spaces: 12 columns
        (f"class A:\n\tclass B:\n\t\tpass\n{SPEC.replace('    def', '        def')}", {"A"}),  # a tab is 8
        (f"class A:\n{SPEC}class B:\n{SPEC}class C:\n    class D:\n    {SPEC}", {"A", "B", "D"}),
    ],
)
def test_the_classes_that_define_the_spec_method(text, roots):
    data = text.encode()
    assert _spec_roots({"m.py": data}, {"m.py": classes_of("m.py", data)}) == roots


def test_a_crafted_module_of_spec_roots_costs_linear_time():
    data = "".join(f"class L{i}:\n{SPEC}" for i in range(20_000)).encode()  # 19 s before
    classes = classes_of("m.py", data)
    assert len(bounded(_spec_roots, {"m.py": data}, {"m.py": classes})) == 20_000


FLAGGED = f"class Attention:\n    def __init__(self):\n        select(use_mla=True)\n\n{SPEC}\n"


def test_a_layers_flags_reach_its_subclasses_however_deep():
    layers = (
        FLAGGED
        + "class Plain:\n"
        + SPEC
        + "".join(f"class L{i}({f'L{i - 1}' if i else 'Attention'}):\n    pass\n" for i in range(5))
    )
    layers += (
        "class A(B):\n    def __init__(self):\n        select(use_sparse=True)\n\n" + SPEC + "class B(A):\n    pass\n"
    )
    found, trees = census(layers)
    flags = _layer_flags(found, trees)
    assert flags["L4"] == flags["Attention"] == {"use_mla"} and flags["Plain"] == frozenset()
    assert flags["A"] == flags["B"] == {"use_sparse"}  # a loop of bases, as the count of rounds read it


def test_a_crafted_module_of_layers_costs_linear_time():
    found, trees = census(FLAGGED + "".join(f"class L{i}(Attention):\n    pass\n\n" for i in range(4000)))
    flags = bounded(_layer_flags, found, trees)  # 15 s before
    assert len(flags) == 4001 and all(value == {"use_mla"} for value in flags.values())


def test_the_statement_at_each_line():
    trees = ModuleTrees({"m.py": b"x = 1; y = 2\n\n# c\n@dec\ndef f():\n    pass\nz = (1,\n 2)\n"})
    names = []
    for line in range(10):
        found = trees.block_at("m.py", line)
        names.append(found.name if isinstance(found, ast.FunctionDef) else ast.unparse(found) if found else None)
    # The first statement on a line; the lines after a small statement no statement's; a definition to its next.
    assert names == [None, "x = 1", None, None, "f", "f", "f", "z = (1, 2)", "z = (1, 2)", None]
    # A class asked for at a line no statement holds, or by another name, is none.
    trees = ModuleTrees({"m.py": b"x = 1\n\nclass A:\n    class B:\n        pass\n"})
    assert [trees.class_at("m.py", line, name) for line, name in [(2, "A"), (9, "A"), (3, "B")]] == [None] * 3
    assert trees.class_at("m.py", 3, "A").name == "A" and trees.class_at("m.py", 4, "B").name == "B"


def test_a_crafted_module_of_late_blocks_costs_linear_time():
    text = "#\n" * 100_000 + "".join(f"x{i} = {i}\ndef f{i}():\n    pass\n" for i in range(2000))
    trees = ModuleTrees({"m.py": text.encode()})

    def read():
        return [trees.block_at("m.py", 100_002 + 3 * i) for i in range(2000)]

    blocks = bounded(read)  # 12 s before: each block padded to its line
    assert [(block.name, block.lineno, block.body[0].lineno) for block in blocks[::999]] == [
        ("f0", 100_002, 100_003),
        ("f999", 102_999, 103_000),
        ("f1998", 105_996, 105_997),
    ]


BLOCK = 'x = f"""a\n{y\n + 1} b {z!r:>{w}}""" + "é"\ndef f(a, *, b=f"{c}"):\n    return (a, b)  # note\n'


@pytest.mark.parametrize("line", [1, 2, 40, 10_000])  # padded, and (far down) moved to its line
def test_a_block_parsed_at_its_line_as_a_whole_parse_gives_it(line):
    whole = ast.parse("\n" * (line - 1) + BLOCK)
    assert ast.dump(parse_at(BLOCK, line), include_attributes=True) == ast.dump(whole, include_attributes=True)


def test_a_method_parsed_alone_keeps_its_lines_and_columns():
    cls = "class A:\n    x = 1\n\n    def g(self, é=f'{1}'):\n        return [i for i in é]\n"
    for first in (3, 50_000):
        whole = ast.parse("\n" * (first - 1) + cls).body[0]
        skeleton = parse_skeleton(cls, first, "m.py")
        assert ast.dump(method_of(skeleton, 1), include_attributes=True) == ast.dump(
            whole.body[1], include_attributes=True
        )


def test_a_callers_calls_each_drop_what_its_lines_above_them_filter():
    # What a caller filters out of an argument, per call: the assignments above the call's line end, a `{…}` read
    # whole once the line is past its `}` (else its first line), as the caller's text cut at each call read.
    text = f"""
def f(c, specs):
    return {CONTAINER}.from_specs(specs)

def early(c, specs):
    f(c, specs)
    specs = {{k: v for k, v in specs.items() if not isinstance(v, Hidden)}}
    return f(c, specs)

def late(c, specs):
    kept = {{k: v for k, v in specs.items()
            if not isinstance(v, Hidden)}}
    f(c, kept)
    kept = {{k: v for k, v in kept.items() if not isinstance(v, Other)}}; f(c, kept)
"""
    lines = _Lines(text)
    assert _Callers(lines, _functions(lines)).excluded("f") == frozenset()  # `early`'s first call drops nothing
    text = text.replace("    f(c, specs)\n", "")
    lines = _Lines(text)
    assert _Callers(lines, _functions(lines)).excluded("f") == {"Hidden"}


def test_a_caller_of_many_calls_costs_linear_time():
    calls = "".join(f"    f(c, kept{i % 2})\n" for i in range(4000))
    text = (
        f"def f(c, specs):\n    return {CONTAINER}.from_specs(specs)\n\ndef g(c, specs):\n"
        "    kept0 = {k: v for k, v in specs.items() if not isinstance(v, Hidden)}\n"
        "    kept1 = {k: v for k, v in specs.items() if not isinstance(v, Hidden) and not isinstance(v, Other)}\n"
        f"{calls}def broken(:\n"
    )
    (path,) = bounded(read_grouping_paths, {GROUPING: text.encode()}, CONTAINER)  # 5 s before
    assert path.excluded == {"Hidden"}


def _reader(text: str) -> _Reader:
    classes: dict = {}
    for cls in classes_of("m.py", text.encode()):
        classes.setdefault(cls.name, []).append(cls)
    return _Reader(classes, frozenset({"FullSpec", "SlidingSpec", "MambaSpec"}))


def test_a_classes_bases_are_read_nearest_first_up_to_the_class_that_settles_it():
    reader = _reader(
        "class Root:\n    kind = Kind.FULL\n    def get_kv_cache_spec(self):\n        return FullSpec()\n"
        "class Sliding(Root):\n    def get_kv_cache_spec(self):\n        return super().get_kv_cache_spec() or "
        "SlidingSpec()\n"
        "class Runtime(Root):\n    kind = pick()\n"
        "class Both(Runtime, Sliding):\n    pass\n"
        "class Mamba(Sliding):\n    kind = Kind.MAMBA\n    def get_kv_cache_spec(self):\n        return MambaSpec()\n"
    )
    assert reader._spec_method("Both")[0] == {"SlidingSpec", "FullSpec"}  # through `super()` to Root's
    assert reader._spec_method("Mamba")[0] == {"MambaSpec"}  # its own, no `super()`: the bases' are not read
    assert reader._value("Runtime", "kind") == "?|FULL"  # set at run time: the base's constant read on
    assert reader._value("Both", "kind") == "?|FULL" and reader._value("Mamba", "kind") == "MAMBA"


def test_a_chain_of_layer_classes_costs_linear_time():
    # Each class derives from the one before (and from a mixin that says nothing): every class read its whole
    # chain for every question (4,000 classes: 18 s).
    chain = "".join(f"class L{i}(L{i - 1}, Mixin):\n    kind = pick()\n" for i in range(1, 4000))
    reader = _reader(
        f"class Mixin:\n    pass\nclass L0:\n    def get_kv_cache_spec(self):\n        return FullSpec()\n{chain}"
    )

    def read_all():
        return [(reader._spec_method(f"L{i}")[0], reader._value(f"L{i}", "kind")) for i in range(4000)]

    read = bounded(read_all)
    assert read[0] == ({"FullSpec"}, None) and read[-1] == ({"FullSpec"}, "?")


@pytest.mark.parametrize(
    "classes",
    [
        # Bases that loop (by name: two modules' classes can), each class with a mixin too: every name walked.
        "".join(f"class L{i}(L{(i + 1) % 4000}, Mixin):\n    kind = pick()\n" for i in range(4000)),
        # Two bases that bear on the spec method at every class: their order is the walk's, every name walked.
        "".join(
            f"class L{i}(L{i - 1}, L{i - 2}):\n    def get_kv_cache_spec(self):\n"
            "        return super().get_kv_cache_spec()\n"
            for i in range(2, 4000)
        ),
    ],
    ids=["a-loop-of-bases", "two-bearing-bases-each"],
)
def test_names_walked_through_thousands_of_classes_stop_at_the_census_budget(classes):
    reader = _reader(f"class Mixin:\n    pass\nclass L0:\n    pass\nclass L1(L0):\n    pass\n{classes}")
    started = time.monotonic()
    with pytest.raises(BudgetExceeded):  # the index then says its cross-file analysis is incomplete
        for i in range(3999, -1, -1):
            reader._spec_method(f"L{i}")
            reader._value(f"L{i}", "kind")
    assert time.monotonic() - started < LIMIT_S  # minutes before (quadratic: 500 classes 2 s)
