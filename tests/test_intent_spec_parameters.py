"""Which attributes choose a layer's spec class and what it builds while one is None
(kvlint.analysis.census.spec_branches), and which constructor parameters set them
(kvlint.analysis.census.spec_parameters): snippets of `get_kv_cache_spec` methods and miniature constructors,
each test named after the behaviour it proves (see also tests/test_intent_spec_choice.py)."""

from __future__ import annotations

import ast
import textwrap

from kvlint.analysis.census.spec_branches import UNKNOWN, SpecBranching, spec_branching
from kvlint.analysis.census.spec_parameters import ANY, SpecCalls, call_choice, spec_parameters

SPECS = frozenset({"FullAttentionSpec", "SlidingWindowSpec", "MLAAttentionSpec"})
FULL, SLIDING, MLA = "FullAttentionSpec", "SlidingWindowSpec", "MLAAttentionSpec"


def _branching(*bodies: str):
    """spec_branching of `get_kv_cache_spec` methods with these bodies (the layer's own first)."""
    methods = [
        "    def get_kv_cache_spec(self, vllm_config):\n" + textwrap.indent(textwrap.dedent(body), " " * 8)
        for body in bodies
    ]
    return spec_branching(methods, SPECS)


def _reads(body: str):
    return _branching(body).attributes


def _when_none(*bodies: str) -> dict:
    return dict(_branching(*bodies).when_none)


# ----------------------------------------------------------------------------- which attributes choose


def test_a_method_that_does_not_parse_or_defines_no_function_is_unknown():
    assert spec_branching(["    def get_kv_cache_spec(self):\n        return (\n"], SPECS) is UNKNOWN
    assert spec_branching(["x = FullAttentionSpec()\n"], SPECS) is UNKNOWN
    assert spec_branching([], SPECS) is UNKNOWN
    # A parsed one is known, even when it chooses nothing.
    assert _branching("return FullAttentionSpec()").attributes == frozenset()


def test_an_async_spec_method_is_read_too():
    text = "    async def get_kv_cache_spec(self):\n        return SlidingWindowSpec() if self.w else FullAttentionSpec()\n"
    assert spec_branching([text], SPECS).attributes == {"w"}


def test_every_method_of_the_chain_must_be_traced_and_their_attributes_join():
    own = "if self.window:\n    return SlidingWindowSpec()\nreturn FullAttentionSpec()"
    base = "if self.kind == 'mla':\n    return MLAAttentionSpec()\nreturn FullAttentionSpec()"
    assert _branching(own, base).attributes == {"window", "kind"}
    # One method choosing by a call of the layer's own: the whole answer is unknown.
    assert _branching(own, base.replace("self.kind == 'mla'", "self.is_mla()")).attributes is None
    assert _branching(base.replace("self.kind == 'mla'", "self.is_mla()"), own).attributes is None


def test_a_call_of_anything_but_the_layers_own_method_in_a_test_is_read_through():
    body = "if is_windowed(self.window):\n    return SlidingWindowSpec()\nreturn FullAttentionSpec()"
    assert _reads(body) == {"window"}
    # `other.attr` is not the layer's: it chooses nothing of the layer's own.
    assert _reads(body.replace("self.window", "config.window")) == frozenset()
    assert _reads(body.replace("is_windowed(self.window)", "config.windowed()")) == frozenset()


def test_a_test_is_read_through_the_locals_it_names():
    body = "window = self.sliding_window\nif window is not None:\n    return SlidingWindowSpec()\nreturn FullAttentionSpec()"
    assert _reads(body) == {"sliding_window"}
    annotated = body.replace("window = self.sliding_window", "window: int = self.sliding_window")
    assert _reads(annotated) == {"sliding_window"}
    augmented = body.replace("window = self.sliding_window", "window = 0\nwindow += self.sliding_window")
    assert _reads(augmented) == {"sliding_window"}
    # An annotation without a value assigns nothing (and a local read in a loop of its own ends).
    bare = body.replace("window = self.sliding_window", "window: int\nwindow = window + self.sliding_window")
    assert _reads(bare) == {"sliding_window"}
    # A name no assignment binds (a module constant) adds nothing.
    assert _reads(body.replace("window = self.sliding_window\n", "")) == frozenset()


def test_a_local_assigned_twice_is_read_through_both_values():
    body = """
    window = self.a
    window = self.b
    if window:
        return SlidingWindowSpec()
    return FullAttentionSpec()
    """
    assert _reads(body) == {"a", "b"}


def test_only_tests_whose_ways_build_apart_or_leave_choose():
    same = "if self.dtype == 'fp8':\n    x = FullAttentionSpec()\nelse:\n    x = FullAttentionSpec()\nreturn x"
    assert _reads(same) == frozenset()
    apart = "if self.dtype == 'fp8':\n    x = SlidingWindowSpec()\nelse:\n    x = FullAttentionSpec()\nreturn x"
    assert _reads(apart) == {"dtype"}
    # Leaving the method from either way chooses (no KV cache, or an error).
    assert _reads("if self.encoder:\n    raise ValueError()\nreturn FullAttentionSpec()") == {"encoder"}
    assert _reads("if self.encoder:\n    x = 1\nelse:\n    return None\nreturn FullAttentionSpec()") == {"encoder"}
    # A test whose ways hold some other statements than a return chooses nothing.
    assert _reads("if self.encoder:\n    x = 1\n    y = 2\nreturn FullAttentionSpec()") == frozenset()


def test_a_conditional_expression_chooses_only_when_its_ways_build_apart():
    assert _reads("return SlidingWindowSpec() if self.window else FullAttentionSpec()") == {"window"}
    assert _reads("return FullAttentionSpec(extra=656 if self.dtype else None)") == frozenset()


def test_a_loops_test_and_a_match_subject_choose():
    assert _reads("while self.pending:\n    pass\nreturn FullAttentionSpec()") == {"pending"}
    match = "match self.kind:\n    case 'sliding':\n        return SlidingWindowSpec()\nreturn FullAttentionSpec()"
    assert _reads(match) == {"kind"}


# ---------------------------------------------------------------------- what is built while one is None

# The first test makes `w` read whatever the second reads; it builds nothing. The second's body builds the sliding
# spec, its else the full one.
WINDOWED = (
    "if self.w == 1:\n    return None\nif {test}:\n    x = SlidingWindowSpec()\nelse:\n    x = FullAttentionSpec()"
)


def _none_builds(test: str) -> frozenset:
    return _when_none(WINDOWED.format(test=test))["w"]


def test_a_test_the_attribute_being_none_settles_takes_one_way():
    assert _none_builds("self.w") == {FULL}
    assert _none_builds("self.w is not None") == {FULL}
    assert _none_builds("self.w is None") == {SLIDING}
    assert _none_builds("not self.w") == {SLIDING}
    assert _none_builds("not (self.w is None)") == {FULL}
    # What follows the if is read in both cases.
    assert _when_none("if self.w:\n    return SlidingWindowSpec()\nreturn FullAttentionSpec()")["w"] == {FULL}
    assert _when_none("if self.w is None:\n    return SlidingWindowSpec()\nreturn MLAAttentionSpec()")["w"] == {
        SLIDING,
        MLA,
    }


def test_a_test_the_attribute_does_not_settle_takes_both_ways():
    for test in (
        "self.w == 4",  # not a None test
        "self.w is not 4",  # the other side is no None
        "self.w > None",  # the comparison is no identity
        "self.w is not None is not None",  # two comparisons
        "self.other is not None",  # another attribute
        "not self.other",
        "self.w is not None or self.other",
        "self.other and self.w is None",
    ):
        assert _none_builds(test) == {FULL, SLIDING}, test


def test_and_or_settle_by_their_parts():
    assert _none_builds("self.w is not None and self.other") == {FULL}
    assert _none_builds("self.other and self.w") == {FULL}
    assert _none_builds("self.w is not None or self.w") == {FULL}
    assert _none_builds("self.w or self.other") == {FULL, SLIDING}
    # All parts true while None: the body alone; one part true of an `or`: the body alone.
    assert _none_builds("self.w is None and not self.w") == {SLIDING}
    assert _none_builds("self.w is None or self.other") == {SLIDING}
    assert _none_builds("self.other or self.w is None") == {SLIDING}
    # Some part unsettled, none false: both ways.
    assert _none_builds("self.w is None and self.other") == {FULL, SLIDING}


def test_a_conditional_expression_the_attribute_settles_builds_one_way():
    assert _when_none("return SlidingWindowSpec() if self.w else FullAttentionSpec()")["w"] == {FULL}
    assert _when_none("return FullAttentionSpec() if self.w is None else SlidingWindowSpec()")["w"] == {FULL}
    both = "return SlidingWindowSpec() if self.w == 2 else FullAttentionSpec()"
    assert _when_none(both)["w"] == {FULL, SLIDING}


def test_specs_are_found_in_every_kind_of_statement_and_expression():
    choose = "if self.w:\n    return SlidingWindowSpec()\n"
    cases = {
        "for x in y:\n    return FullAttentionSpec()": {FULL},
        "with x:\n    return FullAttentionSpec()": {FULL},
        "try:\n    x = 1\nexcept E:\n    return FullAttentionSpec()": {FULL},
        "match x:\n    case 1:\n        return FullAttentionSpec()": {FULL},
        "return spec.FullAttentionSpec()": {FULL},  # an attribute of a module
        "return make(spec=FullAttentionSpec())": {FULL},  # a keyword's value
        "return make(FullAttentionSpec())": {FULL},  # an argument
        "return [FullAttentionSpec()]": {FULL},
        "return [s for s in FullAttentionSpec()]": {FULL},  # a comprehension's iterable
        "return factory()()": set(),
        "return Unknown()": set(),
    }
    for rest, specs in cases.items():
        assert _when_none(choose + rest)["w"] == specs, rest
    # A spec built in an if's test is found too.
    assert _when_none("if self.w:\n    return SlidingWindowSpec()\nif FullAttentionSpec():\n    pass")["w"] == {FULL}


def test_specs_while_none_join_over_the_methods_of_the_chain():
    own = "if self.w:\n    return SlidingWindowSpec()\nreturn super().get_kv_cache_spec(vllm_config)"
    base = "if self.w is None:\n    return MLAAttentionSpec()\nreturn FullAttentionSpec()"
    assert _when_none(own, base) == {"w": {MLA, FULL}}


def test_each_attribute_has_its_own_specs_while_none():
    text = """
    if self.w is not None:
        return SlidingWindowSpec()
    if self.mla:
        return MLAAttentionSpec()
    return FullAttentionSpec()
    """
    assert _when_none(text) == {"w": {MLA, FULL}, "mla": {SLIDING, FULL}}


def test_a_parsed_method_is_dedented_first():
    text = "        def get_kv_cache_spec(self):\n            return SlidingWindowSpec() if self.w else None\n"
    assert spec_branching([text], SPECS).attributes == {"w"}


# ------------------------------------------------------------- which constructor parameters set them


def _resolver(modules: dict[str, str]):
    """A resolve_expr over miniature modules: a name their module defines, else one another defines (as if
    imported); None for a module the tree lacks."""
    defined = {
        module: {
            n.name: n for n in ast.parse(textwrap.dedent(text)).body if isinstance(n, (ast.ClassDef, ast.FunctionDef))
        }
        for module, text in modules.items()
    }

    def resolve(module, expr):
        if not isinstance(expr, ast.Name) or not isinstance(module, str) or module not in defined:
            return None
        for where in (module, *defined):
            node = defined[where].get(expr.id)
            if node is not None:
                return where, "class" if isinstance(node, ast.ClassDef) else "function", node
        return None

    return resolve, defined


BASES = """
class Base:
    def __init__(self, config, sliding_window=None, sparse=False, prefix=""):
        self.sliding_window = sliding_window
        self.sparse = sparse
"""

SUBCLASSES = """
def helper():
    pass


class Sub(Base):
    def __init__(self, config, window, **kwargs):
        local = window
        super().__init__(config, sliding_window=local, **kwargs)


class Passes(Base):
    def __init__(self, config, **kwargs):
        super().__init__(config, **kwargs)


class Positional(Base):
    def __init__(self, config, window=None):
        super().__init__(config, window)


class Starred(Base):
    def __init__(self, config, *args):
        super().__init__(config, *args)


class TooMany(Base):
    def __init__(self, config, window=None):
        super().__init__(config, None, False, "", window)


class Fixed(Base):
    def __init__(self, config):
        super().__init__(config, sliding_window=4096)


class SpreadsNoKwargs(Base):
    def __init__(self, config):
        super().__init__(config, **config.extra)


class KeepsItsKwargs(Base):
    def __init__(self, config, **kwargs):
        super().__init__(config)


class Defaulted(Base):
    def __init__(self, config):
        super().__init__(config)


class NoSuper(Base):
    def __init__(self, config):
        self.other = 1


class FromAnotherAttribute(Base):
    def __init__(self, config):
        super().__init__(config, sliding_window=self.window)


class NoInit(Unknown, helper, Sub):
    pass


class Deeper(Sub):
    def __init__(self, config, w, **kwargs):
        super().__init__(config, window=w, **kwargs)


class Orphan:
    pass
"""


def _sources(name: str, attributes=("sliding_window",), modules=None):
    resolve, defined = _resolver(modules or {"layers.py": SUBCLASSES, "base.py": BASES})
    module = next(m for m, classes in defined.items() if name in classes)
    return spec_parameters(resolve, module, defined[module][name], frozenset(attributes))


def test_an_attribute_set_in_the_classs_own_constructor_names_its_parameter_and_default():
    own = """
    class Own:
        def __init__(self, window=None, size=4096, required=1, *, kind=None, dtype, **kwargs):
            self.w = window
            self.s = size
            self.k = kind
            self.d = dtype
            config.w = 4096  # another object's attribute: not the layer's
            a, b = 1, 2
    """
    attributes = ("w", "s", "k", "d")
    assert _sources("Own", attributes, {"a.py": own}) == {
        "w": ({"window"}, True),
        "s": ({"size"}, False),
        "k": ({"kind"}, True),
        "d": ({"dtype"}, False),  # a required parameter is never None
    }
    # A parameter without a default before those with one is never None either.
    required = "class Own:\n    def __init__(self, window, size=None):\n        self.w = window\n"
    assert _sources("Own", ("w",), {"a.py": required}) == {"w": ({"window"}, False)}


def test_an_attribute_is_traced_through_the_constructors_locals_and_none_assignments():
    own = """
    class Own:
        def __init__(self, window=None, config=None):
            local = window
            self.w = None
            if config:
                self.w = local
            self.x = window if window else 0
            self.y: int = config.window
            self.z: int
    """
    assert _sources("Own", ("w", "x", "y"), {"a.py": own}) == {
        "w": ({"window"}, True),  # None, or a local holding a None-default parameter
        "x": ({"window"}, False),  # 0 when the window is None
        "y": ({"config"}, False),  # an annotated assignment; a config's attribute may be set
    }
    # An annotation without a value is no assignment: `z` is untraced (no base sets it).
    assert _sources("Own", ("z",), {"a.py": own}) is None


def test_an_attribute_set_from_another_attribute_of_the_layer_is_untraced():
    own = "class Own:\n    def __init__(self, w=None):\n        self.x = w\n        self.w = w or self.default\n"
    assert _sources("Own", ("w",), {"a.py": own}) is None
    assert _sources("Own", ("x",), {"a.py": own}) == {"x": ({"w"}, True)}


def test_an_attribute_the_base_sets_is_traced_through_what_super_init_gives_it():
    assert _sources("Base") == {"sliding_window": ({"sliding_window"}, True)}
    assert _sources("Sub") == {"sliding_window": ({"window"}, False)}  # through a local; required
    assert _sources("Passes") == {"sliding_window": ({"sliding_window"}, True)}  # through `**kwargs`
    assert _sources("Positional") == {"sliding_window": ({"window"}, True)}  # by position
    assert _sources("Fixed") == {"sliding_window": (frozenset(), False)}
    # Not given: the base's default, whatever the call passes.
    for name in ("Starred", "TooMany", "SpreadsNoKwargs", "KeepsItsKwargs", "Defaulted"):
        assert _sources(name) == {"sliding_window": (frozenset(), True)}, name
    # Both attributes, one per class level.
    assert _sources("Sub", ("sliding_window", "sparse")) == {
        "sliding_window": ({"window"}, False),
        "sparse": ({"sparse"}, False),
    }


def test_an_attribute_no_constructor_sets_or_one_given_another_attribute_is_untraced():
    assert _sources("NoSuper") is None
    assert _sources("FromAnotherAttribute") is None
    assert _sources("Orphan") is None  # no constructor, no base
    assert _sources("Base", ("missing",)) is None


def test_a_class_without_a_constructor_is_read_through_its_first_class_base_in_its_module():
    # `Unknown` resolves to nothing and `helper` to a function: both skipped.
    assert _sources("NoInit") == {"sliding_window": ({"window"}, False)}
    assert _sources("Deeper") == {"sliding_window": ({"w"}, False)}


def _chain(length: int, with_init: bool) -> str:
    """Classes C0(C1) … C<length-1>, the last setting `self.w`; the others without constructors or handing
    `w` on to super()."""
    lines = []
    for index in range(length - 1):
        lines.append(f"class C{index}(C{index + 1}):\n")
        if with_init:
            lines.append("    def __init__(self, w=None):\n        super().__init__(w)\n")
        else:
            lines.append("    pass\n")
    lines.append(f"class C{length - 1}:\n    def __init__(self, w=None):\n        self.w = w\n")
    return "".join(lines)


def test_a_chain_of_bases_is_followed_thirteen_deep_and_no_further():
    for with_init in (False, True):
        assert _sources("C0", ("w",), {"a.py": _chain(13, with_init)}) == {"w": ({"w"}, True)}
        assert _sources("C0", ("w",), {"a.py": _chain(14, with_init)}) is None


# --------------------------------------------------------------------- what a call of the class chooses

WINDOW = SpecBranching(frozenset({"w"}), (("w", frozenset({FULL})),))
WINDOW_SOURCES = {"w": (frozenset({"window", "size"}), True)}


def test_a_class_object_only_named_configures_nothing_and_may_build_anything():
    assert call_choice(WINDOW, WINDOW_SOURCES, None) == (False, ANY)
    # A layer class of one spec class: nothing to choose, nothing recorded (Built.specs stays small).
    assert call_choice(None, None, None) == (False, frozenset())


def test_without_a_traced_choice_any_per_layer_argument_but_prefix_configures_apart():
    for branching, sources in ((None, WINDOW_SOURCES), (UNKNOWN, WINDOW_SOURCES), (WINDOW, None)):
        recorded = frozenset() if branching is None else ANY
        assert call_choice(branching, sources, frozenset({"sparse", "sparse@layer"})) == (True, recorded)
        assert call_choice(branching, sources, frozenset({"prefix", "prefix@layer"})) == (False, recorded)


def test_only_a_per_layer_parameter_that_sets_a_choosing_attribute_configures_apart():
    assert call_choice(WINDOW, WINDOW_SOURCES, frozenset({"size", "size@layer"}))[0] is True
    assert call_choice(WINDOW, WINDOW_SOURCES, frozenset({"window", "sparse@layer"}))[0] is False
    assert call_choice(WINDOW, WINDOW_SOURCES, frozenset({"window"}))[0] is False


def test_a_call_passing_none_of_an_attributes_parameters_builds_what_its_none_builds():
    assert call_choice(WINDOW, WINDOW_SOURCES, frozenset({"sparse"})) == (False, {FULL})
    # Passing one of them: anything.
    assert call_choice(WINDOW, WINDOW_SOURCES, frozenset({"size"})) == (False, ANY)
    # An attribute not None by default, or one no spec test reads while None: anything.
    assert call_choice(WINDOW, {"w": (frozenset({"window"}), False)}, frozenset()) == (False, ANY)
    assert call_choice(WINDOW, {"v": (frozenset({"window"}), True)}, frozenset()) == (False, ANY)


def test_the_specs_of_several_none_attributes_are_those_all_of_them_allow():
    branching = SpecBranching(frozenset({"a", "b"}), (("a", frozenset({FULL, MLA})), ("b", frozenset({MLA, SLIDING}))))
    sources = {"a": (frozenset({"x"}), True), "b": (frozenset({"y"}), True)}
    assert call_choice(branching, sources, frozenset()) == (False, {MLA})
    assert call_choice(branching, sources, frozenset({"x"})) == (False, {MLA, SLIDING})
    # None allowed by all: no answer rather than none at all.
    disjoint = SpecBranching(frozenset({"a", "b"}), (("a", frozenset({FULL})), ("b", frozenset({SLIDING}))))
    assert call_choice(disjoint, sources, frozenset()) == (False, ANY)


def test_spec_calls_reads_a_classs_sources_once_and_only_for_a_traced_choice():
    resolve, defined = _resolver({"layers.py": SUBCLASSES, "base.py": BASES})
    traced = SpecBranching(frozenset({"sliding_window"}), (("sliding_window", frozenset({FULL})),))
    calls = SpecCalls({"Sub": traced, "Passes": UNKNOWN, "Positional": None})
    sub = defined["layers.py"]["Sub"]
    # `sparse` sets nothing the spec reads; a call not passing the window is still free (Sub's is required).
    assert calls.choice(resolve, "layers.py", sub, frozenset({"sparse@layer"})) == (False, ANY)
    assert calls.choice(resolve, "layers.py", sub, frozenset({"window@layer"})) == (True, ANY)
    assert calls._sources == {("layers.py", "Sub"): {"sliding_window": ({"window"}, False)}}
    # Untraced or unknown layers: any per-layer argument, and no sources read.
    for name in ("Passes", "Positional", "Defaulted"):
        recorded = ANY if name == "Passes" else frozenset()  # Positional, Defaulted: one spec class (no branching)
        assert calls.choice(resolve, "layers.py", defined["layers.py"][name], frozenset({"sparse@layer"})) == (
            True,
            recorded,
        )
    assert list(calls._sources) == [("layers.py", "Sub")]
    # Read once: a second call of the class reuses them even when the tree changes under it.
    assert calls.choice(lambda module, expr: None, "layers.py", sub, frozenset({"sparse@layer"})) == (False, ANY)
