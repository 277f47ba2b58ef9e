"""The shapes of constructor code the census reads (kvlint.analysis.census.constructor_shapes) and a module's
top-level bindings (kvlint.analysis.census.module_bindings): snippets, each test named after the behaviour it
proves."""

from __future__ import annotations

import ast
import textwrap

from kvlint.analysis.ast_helpers import shape
from kvlint.analysis.census import constructor_shapes as shapes
from kvlint.analysis.census.module_bindings import bind, module_path
from kvlint.analysis.census.parsing import Deferred


def _module(text: str) -> ast.Module:
    return ast.parse(textwrap.dedent(text))


def _expr(text: str) -> ast.expr:
    return ast.parse(text, mode="eval").body


def _function(text: str) -> ast.FunctionDef:
    return _module(text).body[0]


def _call(text: str) -> ast.Call:
    return _expr(text)


# ------------------------------------------------------------------------------ a module's bindings


def _bindings(text: str) -> dict[str, tuple[str, object]]:
    found: dict = {}
    bind(_module(text).body, found)
    return found


def _kinds(text: str) -> dict[str, str]:
    return {name: kind for name, (kind, _) in _bindings(text).items()}


def test_a_modules_top_level_definitions_values_and_imports_are_bound_the_first_kept():
    text = """
    from a import B, C as D
    class K:
        pass
    def f():
        pass
    async def g():
        pass
    V = W = 1
    x, y = 1, 2
    obj.attr = 3
    K = 4
    """
    found = _bindings(text)
    assert {name: kind for name, (kind, _) in found.items()} == {
        "B": "import",
        "D": "import",
        "K": "class",  # the first binding kept
        "f": "function",
        "g": "function",
        "V": "value",
        "W": "value",
    }
    assert isinstance(found["V"][1], ast.Constant) and isinstance(found["K"][1], ast.ClassDef)


def test_a_deferred_definition_is_bound_under_its_kind_unparsed():
    deferred = Deferred("class", "K", 1, 2)
    found: dict = {}
    bind([deferred, Deferred("function", "K", 3, 4), Deferred("function", "f", 5, 6)], found)
    assert found == {"K": ("class", deferred), "f": ("function", Deferred("function", "f", 5, 6))}


def test_an_if_binds_the_way_the_default_platform_takes_and_an_undecided_one_both():
    text = """
    if current_platform.is_rocm():
        A = 1
        R = 1
    else:
        A = 2
    if current_platform.is_cuda():
        C = 1
    else:
        C = 2
        E = 2
    if TYPE_CHECKING:
        from typing import T
    if config.flag:
        U = 1
    else:
        U = 2
        O = 2
    """
    found = _bindings(text)
    assert set(found) == {"A", "C", "U", "O"}
    assert found["A"][1].value == 2 and found["C"][1].value == 1 and found["U"][1].value == 1


def test_a_try_binds_its_body_not_its_handlers():
    text = """
    try:
        from fast import X
    except ImportError:
        X = None
        Y = None
    """
    assert _kinds(text) == {"X": "import"}


def test_an_import_names_a_module_or_a_package_the_selection_holds():
    texts = {"a/b.py": "", "a/c/__init__.py": "", "a/__init__.py": "", "top.py": ""}
    assert module_path(texts, "a.b", "x/y.py") == "a/b.py"
    assert module_path(texts, "a.c", "x/y.py") == "a/c/__init__.py"
    assert module_path(texts, "a.d", "x/y.py") is None
    # Relative: `from .b import …` beside the importer, `from ..x import …` one package up.
    assert module_path(texts, "b", "a/m.py", 1) == "a/b.py"
    assert module_path(texts, "", "a/m.py", 1) == "a/__init__.py"
    assert module_path(texts, "b", "a/c/m.py", 2) == "a/b.py"
    assert module_path(texts, "", "a/c/m.py", 2) == "a/__init__.py"
    assert module_path(texts, "top", "a/c/m.py", 3) == "top.py"
    assert module_path(texts, "b", "a/c/m.py", 1) is None


# ------------------------------------------------------------------------------------ platform tests


def test_platform_tests_are_decided_for_cuda():
    decided = {
        "TYPE_CHECKING": False,
        "current_platform.is_cuda()": True,
        "current_platform.is_cuda_alike()": True,
        "current_platform.is_rocm()": False,
        "current_platform.is_tpu()": False,
        "platforms.current_platform.is_xpu()": False,  # reached through a module
        "not current_platform.is_rocm()": True,
        "not config.flag": None,
        "current_platform.is_rocm() or current_platform.is_cuda()": True,
        "current_platform.is_rocm() or current_platform.is_cpu()": False,
        "current_platform.is_rocm() or config.flag": None,
        "config.flag or current_platform.is_rocm()": None,
        "current_platform.is_cuda() and current_platform.is_cuda_alike()": True,
        "current_platform.is_cuda() and current_platform.is_rocm()": False,
        "current_platform.is_cuda() and config.flag": None,
        "current_platform.has_device_capability()": None,  # not a platform's name
        "current_platform.is_device_capability(90)": None,  # an argument: not a plain platform test
        "config.is_cuda()": None,
        "is_cuda()": None,
        "get()().is_cuda()": None,
        "flag": None,
        "TYPE_CHECKING_X": None,
    }
    for text, value in decided.items():
        assert shapes.platform_test(_expr(text)) is value, text


# ---------------------------------------------------------------------------- class and method shapes


CLASS = """
class K(Base):
    kind = "a"
    size: int = 4
    other: int
    obj.kind = 5
    x, kind = 1, 2

    async def run(self):
        pass

    def run(self):
        pass

    def __init__(self, config):
        self.window = config.window
        other.cache = 1
        self.a, self.b = 1, 2
        self.p = self.q = 0
"""


def test_a_classs_method_and_class_body_bindings():
    cls = _module(CLASS).body[0]
    run = shapes.method(cls, "run")
    assert isinstance(run, ast.FunctionDef) and run.lineno == 12  # a plain def, not the async one
    assert shapes.method(cls, "missing") is None
    values = [shapes.class_binding(statement, "kind") for statement in cls.body]
    assert [v.value for v in values if v is not None] == ["a"]
    assert [shapes.class_binding(s, "size") for s in cls.body][1].value == 4
    assert [shapes.class_binding(s, "other") for s in cls.body][2] is None  # annotated, no value
    assert shapes.class_binding(cls.body[3], "obj") is None
    assert shapes.class_binding(ast.parse("x.size: int = 4").body[0], "size") is None
    assert shapes.class_binding(ast.parse("def size(): pass").body[0], "size") is None
    assert shapes.class_binding(ast.parse("a = b = 4").body[0], "b").value == 4  # any of several targets


def test_whether_a_constructor_assigns_an_attribute_of_self():
    cls = _module(CLASS).body[0]
    assert shapes.assigns_self_attribute(cls, "window")
    assert not shapes.assigns_self_attribute(cls, "cache")  # another object's
    assert not shapes.assigns_self_attribute(cls, "a")  # unpacked: not a plain assignment
    assert not shapes.assigns_self_attribute(cls, "config")
    assert shapes.assigns_self_attribute(cls, "q")  # any of several targets
    assert not shapes.assigns_self_attribute(_module("class E:\n    window = 1\n").body[0], "window")


def test_a_site_is_the_module_and_the_line():
    assert shapes.site("m.py", _module("\n\nx = 1").body[0]) == "m.py:3"
    assert shapes.site("m.py", ast.Load()) == "m.py:0"


def test_type_of_self_and_self_class_are_the_instances_class():
    for text, value in {
        "type(self)": True,
        "self.__class__": True,
        "other.__class__": False,
        "self.cls": False,
        "type(other)": False,
        "type(self, x)": False,
        "kind(self)": False,
        "type(self.x)": False,
        "x.type(self)": False,
        "self": False,
    }.items():
        assert shapes.instance_class(_expr(text)) is value, text


def test_a_constructors_super_init_call():
    init = _function("def __init__(self):\n    other.__init__()\n    super().setup()\n    super(K, self).__init__(a)\n")
    call = shapes.super_init_call(init)
    assert call is not None and call.lineno == 4
    assert shapes.super_init_call(_function("def __init__(self):\n    base().__init__()\n")) is None
    assert shapes.super_init_call(_function("def __init__(self):\n    x.super().__init__()\n")) is None
    assert shapes.super_init_call(_function("def __init__(self):\n    super.__init__()\n")) is None


def test_a_parameters_default_positional_or_keyword_only():
    function = _function("def f(self, a, b=1, *, c=2, d, e=None):\n    pass\n")
    assert shapes.parameter_default(function, "b").value == 1
    assert shapes.parameter_default(function, "a") is None
    assert shapes.parameter_default(function, "c").value == 2
    assert shapes.parameter_default(function, "d") is None
    assert shapes.parameter_default(function, "e").value is None
    assert shapes.parameter_default(function, "self") is None
    assert shapes.parameter_default(None, "b") is None
    only = _function("def f(self, a=1, /, b=2):\n    pass\n")
    assert shapes.parameter_default(only, "a").value == 1 and shapes.parameter_default(only, "b").value == 2


def test_a_parameter_or_default_reads_the_parameter_when_the_caller_gave_it():
    passed = frozenset({"layer_cls"})
    assert shapes.given_or_default(_expr("layer_cls or Default"), passed).id == "layer_cls"
    assert shapes.given_or_default(_expr("other or Default"), passed) is None
    assert shapes.given_or_default(_expr("layer_cls and Default"), passed) is None
    assert shapes.given_or_default(_expr("self.layer_cls or Default"), passed) is None
    assert shapes.given_or_default(_expr("layer_cls"), passed) is None


def test_a_local_value_is_its_first_plain_assignment():
    function = _function("def f(self):\n    a: int = 0\n    a = A\n    a = B\n    b, c = 1, 2\n    self.d = 3\n")
    assert shapes.local_value(function, "a").id == "A"
    assert shapes.local_value(function, "b") is None and shapes.local_value(function, "d") is None
    assert shapes.local_value(function, "a").id == "A"  # asked again: the same


def test_the_methods_a_test_calls_and_the_values_a_function_returns():
    assert shapes.self_methods_called(_expr("self.is_a() and other.is_b() and is_c() and self.x")) == ["is_a"]
    function = _function("def f(self):\n    if x:\n        return A\n    return\n")
    assert [v.id for v in shapes.returned_values(function)] == ["A"]


# ------------------------------------------------------------------------------- the layer's position


def test_a_test_reading_a_position_name_or_attribute_is_per_layer():
    positions = frozenset({"layer_id", "self.idx"})
    assert shapes.per_layer_test(_expr("layer_id in sparse"), positions)
    assert shapes.per_layer_test(_expr("self.idx > 2"), positions)
    assert not shapes.per_layer_test(_expr("config.idx > 2"), positions)
    assert not shapes.per_layer_test(_expr("idx > 2"), positions)
    assert not shapes.per_layer_test(_expr("self.layer_id"), positions)


def test_position_names_start_at_prefix_loops_and_given_per_layer_parameters_and_spread_by_assignment():
    function = _function(
        """
        def __init__(self, config, prefix, kind, other):
            layer_id = int(prefix.split(".")[-1])
            sparse = layer_id in config.sparse
            self.dense = not sparse
            unrelated = config.size
            copy: bool = kind
            for i, (j, *k) in enumerate(config.layers):
                pass
            items = [x for x in config.items]
            first, (second, *rest) = prefix.split(".")
            [listed] = [first]
        """
    )
    assert shapes.position_names(function) == {
        "prefix",
        "layer_id",
        "sparse",
        "self.dense",
        "i",
        "j",
        "k",
        "x",
        "first",  # unpacked targets, however nested
        "second",
        "rest",
        "listed",
    }
    # A parameter its caller gave a per-layer value; a name the caller knows holds it.
    names = shapes.position_names(function, frozenset({"kind", "kind@layer", "other"}), frozenset({"self.q"}))
    assert {"kind", "copy", "self.q"} <= names and "other" not in names


def test_without_a_position_name_nothing_is_per_layer():
    function = _function("def __init__(self, config):\n    a = config.x\n    b = a\n")
    assert shapes.position_names(function) == frozenset()
    keyword = _function("def __init__(self, config, *, prefix=''):\n    a = prefix\n")
    assert shapes.position_names(keyword) == {"prefix", "a"}


def test_a_position_name_reassigned_from_itself_ends_the_spreading():
    # Its assignment adds nothing new: the spreading stops (a pass that adds no name is the last).
    function = _function("def __init__(self, prefix):\n    prefix = prefix.strip()\n")
    assert shapes.position_names(function) == {"prefix"}


def test_a_comprehensions_own_variable_is_not_what_its_value_reads():
    function = _function(
        """
        def __init__(self, config, prefix):
            ids = [layer for layer in config.dense]
            same = all(d == 0 for d in config.dims)
            for layer in range(3):
                pass
        """
    )
    assert "ids" not in shapes.position_names(function, seeds=frozenset({"d"}))
    assert "same" not in shapes.position_names(function, seeds=frozenset({"d"}))


def test_a_name_assigned_again_under_a_per_layer_test_is_per_layer_one_assigned_once_is_not():
    function = _function(
        """
        def __init__(self, config, prefix):
            idx = int(prefix)
            self.window = None
            if config.types[idx] == "sliding":
                self.window = config.window
                local = config.linear
            else:
                other: int = 1
                other = 2
        """
    )
    names = shapes.position_names(function)
    assert "self.window" in names and "other" in names and "local" not in names
    # The same assignments under a test of the model's config: nothing per layer.
    config = _function(textwrap.dedent(ast.unparse(function)).replace("config.types[idx]", "config.kind"))
    assert shapes.position_names(config) == {"prefix", "idx"}


def test_a_call_is_per_layer_when_an_argument_but_prefix_reads_the_position():
    positions = frozenset({"i"})
    assert shapes.per_layer_call(_call("A(config, config.w[i])"), positions)  # any argument
    assert shapes.per_layer_call(_call("A(window=config.w[i])"), positions)
    assert not shapes.per_layer_call(_call("A(config, prefix=f'{p}.{i}')"), positions)
    assert not shapes.per_layer_call(_call("A(config.w[i])"), frozenset())


def test_a_per_layer_argument_but_prefix_configures_apart():
    assert shapes.given_per_layer(frozenset({"window@layer"}))
    assert not shapes.given_per_layer(frozenset({"prefix@layer", "window"}))
    assert shapes.given_per_layer(frozenset({"prefix@layer", "window@layer"}))


# ------------------------------------------------------------------------------ what a call passes


def test_the_parameters_a_call_gives_a_value_by_keyword_or_position():
    init = _function("def __init__(self, config, window=None, sparse=False, *rest):\n    pass\n")
    passed = shapes.passed_parameters(_call("A(config, None, True, 1, 2, window=None, prefix=p, **kw)"), init)
    assert passed == {"config", "sparse", "prefix"}
    assert shapes.passed_parameters(_call("A(c, *args, True)"), init) == {"config"}
    # Without the constructor, only keywords.
    assert shapes.passed_parameters(_call("A(c, w, s=1)"), None) == {"s"}
    posonly = _function("def __init__(self, config, /, window=None):\n    pass\n")
    assert shapes.passed_parameters(_call("A(c, w)"), posonly) == {"config", "window"}


def test_a_value_read_from_the_position_is_marked_per_layer():
    init = _function("def __init__(self, config, window=None):\n    pass\n")
    positions = frozenset({"i"})
    passed = shapes.passed_parameters(_call("A(config, config.w[i], prefix=f'x.{i}', sparse=s)"), init, positions)
    assert passed == {"config", "window", "window@layer", "prefix", "prefix@layer", "sparse"}
    assert shapes.passed_parameters(_call("A(config, config.w[i])"), init) == {"config", "window"}


def test_the_keywords_two_calls_of_one_callee_in_an_ifs_ways_give_apart():
    statement = _module(
        """
        if x:
            a = Attn(config, window=config.w, dtype=d)
            b = Other(k=1)
        else:
            a = Attn(config, window=-1, dtype=d, extra=1)
            c = Third(k=2)
        """
    ).body[0]
    attn = shape(ast.parse("Attn", mode="eval").body)  # the callee, by its shape (as its call is compared)
    assert shapes.differing_keywords(statement.body, statement.orelse) == {(attn, "window"), (attn, "extra")}
    assert shapes.differing_keywords(statement.body, []) == frozenset()


# ------------------------------------------------------------------------------------------- bases


def _resolver(text: str):
    defined = {n.name: n for n in _module(text).body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}

    def resolve(module, expr):
        node = defined.get(expr.id) if isinstance(expr, ast.Name) else None
        if node is None:
            return None
        # Every base is defined in base.py, as if imported there.
        return "base.py", "class" if isinstance(node, ast.ClassDef) else "function", node

    return resolve, defined


BASES = """
def helper():
    pass

class A:
    pass

class B(A):
    pass

class C(A):
    pass

class D(B, C, helper, Missing):
    pass

class E(D, B):
    pass
"""


def test_a_classs_bases_nearest_first_each_once_and_only_classes():
    resolve, defined = _resolver(BASES)
    found = shapes.bases_nearest_first(resolve, "m.py", defined["E"], 10)
    assert [(module, cls.name) for module, cls in found] == [
        ("m.py", "E"),
        ("base.py", "D"),  # each in the module its name resolves to
        ("base.py", "B"),
        ("base.py", "C"),
        ("base.py", "A"),
    ]
    # A limit on the classes seen.
    limited = shapes.bases_nearest_first(resolve, "m.py", defined["E"], 1)
    assert [cls.name for _, cls in limited] == ["E", "D"]
    assert [cls.name for _, cls in shapes.bases_nearest_first(resolve, "m.py", defined["E"], 0)] == ["E"]


def test_the_bases_whose_constructor_super_init_runs():
    resolve, defined = _resolver(BASES)
    d = defined["D"]

    def bases(call: str | None, cls=d):
        upward = _call(call) if call else None
        return [ast.unparse(base) for _, base in shapes.constructor_bases(resolve, "m.py", cls, upward)]

    assert bases(None) == ["B", "C", "helper", "Missing"]
    assert bases("super().__init__()") == ["B", "C", "helper", "Missing"]
    assert bases("super(D, self).__init__()") == ["B", "C", "helper", "Missing"]
    # `super(B, self)`: the bases listed after B, then B's own.
    assert bases("super(B, self).__init__()") == ["C", "helper", "Missing", "A"]
    # A class not among the bases: its own bases only; an unknown one or a function: the class's own.
    assert bases("super(A, self).__init__()") == ["B", "C", "helper", "Missing"]
    assert bases("super(C, self).__init__()") == ["helper", "Missing", "A"]
    # Those after B in the module of the class, B's own in the module B's name resolves to.
    upward = _call("super(B, self).__init__()")
    modules = [(module, ast.unparse(base)) for module, base in shapes.constructor_bases(resolve, "m.py", d, upward)]
    assert modules == [("m.py", "C"), ("m.py", "helper"), ("m.py", "Missing"), ("base.py", "A")]
    assert bases("super(Missing, self).__init__()") == ["B", "C", "helper", "Missing"]
    assert bases("super(helper, self).__init__()") == ["B", "C", "helper", "Missing"]


def test_a_loop_anywhere_in_the_constructor_holds_the_position():
    # A generator handed to a call in an expression statement: its variable is each layer's index too.
    function = ast.parse("def __init__(self, n):\n    self.layers.extend(Layer(i) for i in range(n))\n").body[0]
    assert shapes.position_names(function) == {"i"}
    # An annotation is not run: a loop written in one holds nothing.
    annotated = ast.parse("def __init__(self, n):\n    x: [j for j in range(n)] = 1\n").body[0]
    assert shapes.position_names(annotated) == frozenset()
