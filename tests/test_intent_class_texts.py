"""The classes of a module read as text (kvlint.analysis.census.class_texts): headers, bodies, methods, returned
constants and attribute values, one snippet per behaviour (written against the mutation gate's survivors)."""

from __future__ import annotations

import pytest

from kvlint.analysis.census.class_texts import attribute_values, classes_of, returned_constant, returned_texts

MODULE = b"""import x
pass; class AfterCode: pass
x = "class Quoted:"
class Layer(base.Attention, Generic[T], metaclass=Meta, *extra):
    kind = AttnType.DECODER  # a comment
    window: int = Sizes.SMALL
    flag == 3

    # a comment at the margin of the body
    def get_kv_cache_spec(self):
        return FullAttentionSpec

    def get_kv_cache_spec(self):
        return Other

    class Inner(object):
        def inside(self):
            pass

def after():
    pass
"""


def _layer():
    return next(c for c in classes_of("m.py", MODULE) if c.name == "Layer")


def test_a_class_statement_is_one_at_the_start_of_a_line_with_its_line_and_bases():
    found = {c.name: c for c in classes_of("m.py", MODULE)}
    assert set(found) == {"Layer", "Inner"}  # not one after code on its line
    layer = found["Layer"]
    assert (layer.line, layer.indent, layer.where) == (4, 0, "m.py:4")
    # The last dotted part of each base, generics cut, keywords and starred bases dropped.
    assert layer.bases == ("Attention", "Generic")
    assert (found["Inner"].line, found["Inner"].indent, found["Inner"].bases) == (16, 4, ("object",))


def test_a_body_runs_past_comments_and_blank_lines_to_the_next_line_at_its_indentation():
    layer = _layer()
    assert layer.body.splitlines()[0].startswith("class Layer(")
    assert layer.body.splitlines()[-1] == "            pass"
    assert "def after" not in layer.body
    # The first definition of a method is its text; a nested class's methods are the class's own, not deeper.
    assert layer.methods["get_kv_cache_spec"].strip().endswith("return FullAttentionSpec")
    assert "inside" in layer.methods and set(layer.methods) == {"get_kv_cache_spec", "inside"}
    inner = next(c for c in classes_of("m.py", MODULE) if c.name == "Inner")
    assert set(inner.methods) == {"inside"}


@pytest.mark.parametrize(
    ("method", "texts", "constant"),
    [
        ("def f(self):\n    return E.MEMBER\n", ["E.MEMBER"], "MEMBER"),
        ("def f(self):\n    return  True \n", ["True"], "True"),
        ("def f(self):\n    if x:\n        return A\n    return B\n", ["A", "B"], None),
        ("def f(self):\n    return make(1)\n", ["make(1)"], None),
        ("def f(self):\n    return\n", [], None),
        ("def f(self):\n    returns = 1\n", [], None),
    ],
)
def test_what_a_method_returns_and_its_one_returned_constant(method, texts, constant):
    assert returned_texts(method) == texts
    assert returned_constant(method) == constant


def test_an_attribute_is_what_the_class_sets_it_to_or_none_when_it_says_nothing():
    layer = _layer()
    assert attribute_values(layer, "kind") == {"DECODER"}  # the constant's last part, comment dropped
    assert attribute_values(layer, "window") == {"SMALL"}  # annotated
    assert attribute_values(layer, "flag") is None  # `==` compares, sets nothing
    assert attribute_values(layer, "missing") is None
    assert attribute_values(layer, "get_kv_cache_spec") == {"FullAttentionSpec"}  # a method returning a constant
    made = next(
        c
        for c in classes_of(
            "m.py",
            b"class A:\n    def __init__(self):\n        self.mode = make()\n        self.on = False\n        self.empty =  # nothing\n",
        )
    )
    assert attribute_values(made, "mode") == {"?"}  # set at run time
    assert attribute_values(made, "on") == {"False"}
    assert attribute_values(made, "empty") is None


def test_a_return_of_several_words_is_returned_whole():
    assert returned_texts("def f(self):\n    return A if x else B\n") == ["A if x else B"]


def test_a_one_line_class_ends_on_its_header():
    [one] = classes_of("m.py", b"class A: pass\nx = 1\n")
    assert one.body == "class A: pass"


@pytest.mark.parametrize(
    ("source", "values"),
    [
        (b"class B:\n  kind = E.X\n    other = 1\n", {"X"}),  # its depth is its first line's
        (b"class C:\n# a comment\n    kind = E.Y\n", {"Y"}),  # comments do not set the depth
        (b"class D:\n\n    kind = E.Z\n", {"Z"}),  # nor blank lines
        (b"class G:\n    kind = 4\n", {"?"}),  # a number is no constant it reads
    ],
)
def test_a_class_attribute_is_read_at_the_depth_of_the_class_body(source, values):
    [cls] = classes_of("m.py", source)
    assert attribute_values(cls, "kind") == values
