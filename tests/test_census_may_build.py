"""The layer sieve (kvlint.analysis.census.may_build): a definition is skipped only when none of its words can
lead to a layer, and what the walk finds through a class attribute, a module's attribute, an alias, a
parameter's default or a module-level value is still found."""

from __future__ import annotations

from textwrap import dedent

from kvlint.analysis.census.budget import Budget
from kvlint.analysis.census.instantiation import Program
from kvlint.analysis.census.may_build import LayerReach
from kvlint.analysis.census.reading import model_layers

LAYERS = {"Attention", "MLAAttention"}
LAYER_MODULE = b"class Attention:\n    pass\n\n\nclass MLAAttention:\n    pass\n"


def _program(**modules: str) -> Program:
    # `from ns import layers` names a namespace package's submodule; `from pkg import layers` a package's
    # submodule its __init__ does not bind.
    texts = {"pkg/__init__.py": b"", "pkg/layers.py": LAYER_MODULE, "ns/layers.py": LAYER_MODULE}
    # A double underscore stands for a folder (`ns__blocks`: ns/blocks.py, in the namespace package `ns`).
    texts.update({f"{name.replace('__', '/')}.py": dedent(text).encode() for name, text in modules.items()})
    return Program(texts, LAYERS, Budget())


def _built(program: Program, model: str = "Model") -> set[str]:
    built = model_layers(program, "m.py", model)
    assert built is not None
    return set().union(*built.alternatives)


def _could_build(program: Program, name: str, module: str = "m.py") -> bool:
    found = program.binding(module, name)
    assert found is not None
    return LayerReach(program.layers).could_build(program, found[0], found[2])


def test_a_helper_that_builds_no_layer_is_neither_followed_nor_parsed():
    program = _program(
        m="""
        from pkg.layers import Attention

        class Helper:
            def __init__(self, size):
                self.weight = [0] * size

        class Model:
            def __init__(self, config):
                self.helper = Helper(config.size)
                self.attn = Attention()
        """
    )
    assert _built(program) == {"Attention"}
    helper = program.bindings("m.py")["Helper"][1]
    assert type(helper).__name__ == "Deferred"  # never parsed: the sieve answered for it
    assert not _could_build(program, "Helper")


def test_a_base_whose_subclass_names_the_layer_class_is_followed_for_that_subclass():
    program = _program(
        m="""
        from pkg.layers import MLAAttention

        class Base:
            def __init__(self):
                self.attn = self.attn_cls()

        class Model(Base):
            attn_cls = MLAAttention
        """
    )
    assert not _could_build(program, "Base")
    assert _could_build(program, "Model")
    assert _built(program) == {"MLAAttention"}


def test_a_layer_reached_through_a_module_attribute_an_alias_a_default_or_a_module_value_is_found():
    program = _program(
        blocks="""
        from ns import layers
        from pkg import layers as package_layers
        from pkg.layers import Attention as Attn
        from pkg.layers import MLAAttention

        KINDS = {"mla": MLAAttention}

        class ByModule:
            def __init__(self):
                self.attn = layers.Attention()

        class ByPackage:
            def __init__(self):
                self.attn = package_layers.MLAAttention()

        class ByAlias:
            def __init__(self):
                self.attn = Attn()

        class ByDefault:
            def __init__(self, attn_cls=MLAAttention):
                self.attn = attn_cls()

        def by_value():
            return KINDS["mla"]()
        """,
        m="""
        from blocks import ByAlias, ByDefault, ByModule, ByPackage, by_value

        class One:
            def __init__(self):
                self.block = ByModule()

        class Two:
            def __init__(self):
                self.block = ByAlias()

        class Three:
            def __init__(self):
                self.block = ByDefault()

        class Four:
            def __init__(self):
                self.block = by_value()

        class Five:
            def __init__(self):
                self.block = ByPackage()
        """,
    )
    assert _built(program, "One") == {"Attention"}
    assert _built(program, "Two") == {"Attention"}
    assert _built(program, "Three") == {"MLAAttention"}
    assert _built(program, "Four") == {"MLAAttention"}
    assert _built(program, "Five") == {"MLAAttention"}


CYCLE = """
from pkg.layers import Attention

class A:
    def __init__(self):
        self.b = B()

class B:
    def __init__(self):
        self.a = A()
        self.c = C()

class C:
    def __init__(self):
        self.attn = {layer}

class Model:
    def __init__(self):
        self.a = A()
"""


def test_definitions_that_name_each_other_are_answered_together_whichever_is_asked_first():
    for first, second in (("A", "B"), ("B", "A"), ("C", "A")):
        reach = LayerReach(LAYERS)
        building = _program(m=CYCLE.format(layer="Attention()"))
        assert reach.could_build(building, *building.binding("m.py", first)[::2])
        assert reach.could_build(building, *building.binding("m.py", second)[::2])
        reach = LayerReach(LAYERS)
        inert = _program(m=CYCLE.format(layer="None"))
        assert not reach.could_build(inert, *inert.binding("m.py", first)[::2])
        assert not reach.could_build(inert, *inert.binding("m.py", second)[::2])
    assert _built(_program(m=CYCLE.format(layer="Attention()"))) == {"Attention"}
    assert _built(_program(m=CYCLE.format(layer="None"))) == set()


def test_a_chain_deeper_than_the_sieve_reads_is_left_to_the_walk():
    chain = "".join(f"class C{i}:\n    def __init__(self):\n        self.x = C{i + 1}()\n\n" for i in range(80))
    header = "from pkg.layers import Attention\n\n"
    inert = _program(m=header + chain + "class C80:\n    pass\n")
    assert _could_build(inert, "C0")  # past its depth: "could" (the walk decides, and finds nothing)
    assert _built(inert, "C0") == set()
    building = _program(m=header + chain + "class C80:\n    def __init__(self):\n        self.attn = Attention()\n")
    assert _built(building, "C0") == {"Attention"}
    shallow = _program(m=header + chain[: chain.index("class C20")] + "class C20:\n    pass\n")
    assert not _could_build(shallow, "C0")
    # Read 60 deep (C60 is the sixty-first definition): one more, and the sieve leaves the chain to the walk.
    at_the_limit = _program(m=header + chain[: chain.index("class C60")] + "class C60:\n    pass\n")
    assert not _could_build(at_the_limit, "C0")
    past_it = _program(m=header + chain[: chain.index("class C61")] + "class C61:\n    pass\n")
    assert _could_build(past_it, "C0")


def test_a_word_in_a_comment_or_a_method_the_walk_never_follows_keeps_a_definition_in():
    # The sieve reads every word: it may follow more than the walk needs, never less.
    program = _program(
        m="""
        from pkg.layers import Attention

        class Norm:
            def __init__(self):
                self.eps = 1e-6  # unlike Attention, no cache

            def forward(self, x):
                return x
        """
    )
    assert _could_build(program, "Norm")


def test_a_layer_class_named_but_bound_nowhere_keeps_a_definition_in():
    # A word no binding resolves (a string, a comment, a name from elsewhere) still counts: the sieve may
    # follow more than the walk, never less.
    program = _program(m='class Lookup:\n    def __init__(self):\n        self.kind = "Attention"\n')
    assert _could_build(program, "Lookup")


def test_a_class_reached_as_a_modules_attribute_is_read_in_that_module():
    # `blocks.Block()`: `Block` is bound in `blocks` only; it builds the layer there.
    program = _program(
        ns__blocks="""
        from pkg.layers import MLAAttention

        class Block:
            def __init__(self):
                self.attn = MLAAttention()

        class Inert:
            pass
        """,
        m="""
        from ns import blocks

        class Model:
            def __init__(self):
                self.block = blocks.Block()

        class Plain:
            def __init__(self):
                self.part = blocks.Inert()
        """,
    )
    assert _could_build(program, "Model")
    assert not _could_build(program, "Plain")  # every word read in `blocks` too, none leads to a layer
    assert _built(program) == {"MLAAttention"}


def test_a_definition_already_parsed_is_read_to_its_last_line():
    program = _program(
        m="""
        from pkg.layers import Attention

        @decorated
        class Late:
            def __init__(self):
                self.size = 1

            def later(self):
                return Attention()
        """
    )
    parsed = program.resolve("m.py", "Late")
    assert parsed is not None and type(parsed[2]).__name__ == "ClassDef"
    assert LayerReach(program.layers).could_build(program, "m.py", parsed[2])


def test_a_definition_on_a_modules_first_line_is_read_from_its_first_character():
    program = _program(
        m="class Block:\n    def __init__(self):\n        self.attn = Attention()\n\n\nfrom pkg.layers import Attention\n"
    )
    assert _could_build(program, "Block")
    program = _program(m="Block = Attention\n\n\nfrom pkg.layers import Attention\n")
    assert _could_build(program, "Block")


def test_a_definition_naming_more_modules_than_any_vllm_class_is_left_to_the_walk():
    # Every word is read in every module a definition names (`modN.Inert`): past 16 modules the sieve says
    # "could" rather than pay their product; the walk then reads only the attributes it calls.
    def program(count: int) -> Program:
        modules = {f"ns__mod{i}": "class Inert:\n    pass\n" for i in range(count)}
        imports = "".join(f"from ns import mod{i}\n" for i in range(count))
        calls = "".join(f"        self.part{i} = mod{i}.Inert()\n" for i in range(count))
        return _program(m=f"{imports}\nclass Plain:\n    def __init__(self):\n{calls}", **modules)

    assert not _could_build(program(16), "Plain")
    assert _could_build(program(17), "Plain")
    assert _built(program(17), "Plain") == set()
