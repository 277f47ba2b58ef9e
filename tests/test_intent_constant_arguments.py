"""Branches a constructor's caller decides by a constant argument (kvlint.analysis.census.constant_arguments):
which constants a call gives, and when a constructor's test on them is decided. One snippet per behaviour."""

from __future__ import annotations

import ast

import pytest

from kvlint.analysis.census.constant_arguments import UNKNOWN_ARGUMENTS, _same, constant_arguments, decide

INIT = """
class Attention:
    def __init__(self, num_heads, attn_type=AttentionType.DECODER, /, *, window=None, flag=True):
        self.attn_type = attn_type
        self.twice = attn_type
        self.twice = num_heads
        self.derived = compute(attn_type)
        self.copied = num_heads
        local = attn_type
        other.elsewhere = attn_type
        self.table[0] = attn_type
"""


def _init() -> ast.FunctionDef:
    return ast.parse(INIT).body[0].body[0]  # type: ignore[attr-defined]


def _call(code: str) -> ast.Call:
    return ast.parse(code, mode="eval").body  # type: ignore[return-value]


def _decide(test: str, passed: set[str] | frozenset[str]) -> bool | None:
    return decide(ast.parse(test, mode="eval").body, frozenset(passed), _init())


# ------------------------------------------------------------------------------------ what a call gives


def test_keyword_constants_are_given_and_other_values_are_not():
    given = constant_arguments(_call("Attention(window=4, attn_type=AttentionType.ENCODER, flag=make())"), None)
    assert given == {"window=4", "attn_type=AttentionType.ENCODER"}


def test_positional_arguments_take_the_constructors_parameter_names_after_self():
    given = constant_arguments(_call("Attention(8, AttentionType.ENCODER)"), _init())
    assert given == {"num_heads=8", "attn_type=AttentionType.ENCODER"}
    # Without the constructor read, a position names no parameter.
    assert constant_arguments(_call("Attention(8, AttentionType.ENCODER)"), None) == frozenset()


def test_more_positions_than_parameters_stop_at_the_last_parameter():
    init = ast.parse("def __init__(self, a):\n    pass\n").body[0]
    assert constant_arguments(_call("Layer(1, 2, 3)"), init) == {"a=1"}  # type: ignore[arg-type]


@pytest.mark.parametrize("call", ["Attention(8, *rest)", "Attention(8, **options)", "Attention(*rest, 8)"])
def test_what_star_arguments_hand_on_is_unknown(call):
    given = constant_arguments(_call(call), _init())
    assert UNKNOWN_ARGUMENTS <= given
    # Positions after a starred argument are not the parameters they would be without it.
    assert ("num_heads=8" in given) is (call != "Attention(*rest, 8)")


def test_a_plain_call_hands_on_nothing_unknown():
    assert not UNKNOWN_ARGUMENTS & constant_arguments(_call("Attention(8, window=2)"), _init())


@pytest.mark.parametrize(
    ("code", "constant"),
    [
        ("'full'", True),
        ("3", True),
        ("False", True),
        ("None", False),
        ("2.5", False),
        ("ENCODER", False),
        ("AttentionType.ENCODER", True),
        ("a.AttentionType.ENCODER", True),
        ("make().ENCODER", False),
    ],
)
def test_constants_are_literals_and_dotted_names_of_two_parts_or_more(code, constant):
    given = constant_arguments(_call(f"Attention(window={code})"), None)
    assert (given == {f"window={code}"}) is constant


# ------------------------------------------------------------------------------------ comparing constants


@pytest.mark.parametrize(
    ("given", "other", "same"),
    [
        ("AttentionType.ENCODER", "AttentionType.ENCODER", True),
        ("'a'", "'a'", True),
        ("'a'", "'b'", False),
        ("-1", "2", False),
        ("True", "'a'", False),
        ("3", "AttentionType.ENCODER", None),  # a literal against a name: whatever the name holds
        ("AttentionType.ENCODER", "3", None),
        ("AttentionType.ENCODER", "AttentionType.ENCODER_DECODER", False),  # two members of one class
        ("vllm.AttentionType.ENCODER", "AttentionType.DECODER", False),  # one class, reached through its module
        ("AttentionType.ENCODER", "vllm.AttentionType.DECODER", False),
        ("vllm.AttentionType.ENCODER", "vllm.AttentionType.DECODER", False),
        ("AttentionType.ENCODER", "Other.DECODER", None),  # another class: an alias may name the same member
        ("AttentionType.ENCODER", None, None),
    ],
)
def test_two_constants_are_compared_by_value_or_as_members_of_one_class(given, other, same):
    assert _same(given, other) is same


# ---------------------------------------------------------------------------------- deciding a test


@pytest.mark.parametrize(
    ("test", "answer"),
    [
        ("attn_type == AttentionType.ENCODER", True),
        ("attn_type is AttentionType.ENCODER", True),
        ("attn_type == AttentionType.DECODER", False),
        ("attn_type != AttentionType.ENCODER", False),
        ("attn_type is not AttentionType.DECODER", True),
        ("attn_type in (AttentionType.DECODER, AttentionType.ENCODER)", True),
        ("attn_type in [AttentionType.DECODER]", False),
        ("attn_type not in {AttentionType.DECODER}", True),
        ("attn_type not in (AttentionType.ENCODER,)", False),
        ("attn_type not in (AttentionType.ENCODER, AttentionType.DECODER)", False),
        ("attn_type != other_value", None),
        ("attn_type in (AttentionType.ENCODER, other_value)", None),
        ("attn_type == (AttentionType.ENCODER, AttentionType.DECODER)", None),  # a tuple compared whole
        ("attn_type < AttentionType.DECODER", None),
        ("attn_type == other_value", None),  # the other side is no constant
        ("attn_type == AttentionType.ENCODER == x", None),  # a chain
        ("check(attn_type)", None),
    ],
)
def test_a_comparison_of_a_given_constant_is_decided(test, answer):
    assert _decide(test, {"attn_type=AttentionType.ENCODER"}) is answer


@pytest.mark.parametrize(
    ("test", "answer"),
    [
        ("not attn_type == AttentionType.ENCODER", False),
        ("not unknown_name", None),
        ("attn_type == AttentionType.ENCODER and window == 4", True),
        ("attn_type == AttentionType.ENCODER and unknown_name", None),
        ("attn_type == AttentionType.DECODER and unknown_name", False),
        ("attn_type == AttentionType.ENCODER or unknown_name", True),
        ("attn_type == AttentionType.DECODER or unknown_name", None),
        ("attn_type == AttentionType.DECODER or window == 5", False),
    ],
)
def test_not_and_or_combine_what_is_decided(test, answer):
    assert _decide(test, {"attn_type=AttentionType.ENCODER", "window=4"}) is answer


def test_an_attribute_the_constructor_copies_a_parameter_to_is_that_parameter():
    passed = {"attn_type=AttentionType.ENCODER", "num_heads=8"}
    assert _decide("self.attn_type == AttentionType.ENCODER", passed) is True
    assert _decide("self.copied == 8", passed) is True
    # Assigned twice, from something else, or from nowhere: not the parameter.
    assert _decide("self.twice == AttentionType.ENCODER", passed) is None
    assert _decide("self.derived == AttentionType.ENCODER", passed) is None
    assert _decide("self.missing == AttentionType.ENCODER", passed) is None
    assert _decide("other.attn_type == AttentionType.ENCODER", passed) is None
    assert _decide("self.elsewhere == AttentionType.ENCODER", passed) is None  # another object's attribute


def test_a_parameter_not_given_takes_its_default_unless_the_call_hands_on_unknown_arguments():
    assert _decide("attn_type == AttentionType.DECODER", set()) is True
    assert _decide("flag == True", set()) is True  # a keyword-only default
    assert _decide("window == 4", set()) is None  # its default is None: no constant
    assert _decide("num_heads == 8", set()) is None  # no default
    assert _decide("attn_type == AttentionType.DECODER", UNKNOWN_ARGUMENTS) is None
    # Passed, but not as a constant: what it holds is not known.
    assert _decide("attn_type == AttentionType.DECODER", {"attn_type"}) is None
    assert _decide("self.attn_type == AttentionType.DECODER", {"attn_type"}) is None


def test_a_name_that_is_no_parameter_is_not_decided():
    assert _decide("local == AttentionType.ENCODER", {"local=AttentionType.ENCODER"}) is None


# ------------------------------------------------------------------------------------ a name's truth

TRUTH = """
class DecoderLayer:
    def __init__(self, config, layer_id, shadow, force_sparse=False, count=2, other=None, rebound=False):
        self.forced = force_sparse
        is_sparse = force_sparse or layer_id in sparse_ids(config)
        both = force_sparse and layer_id
        again = force_sparse
        again = layer_id
        for looped in range(count):
            pass
        with open(config) as held:
            pass
        loop_a = loop_b
        loop_b = loop_a
        copied = is_sparse
        numbered = count
        import os as imported
        imported = True
        def defined():
            pass
        defined = True
        try:
            pass
        except ValueError as caught:
            pass
        caught = True
        layer_id = True
        shadow = force_sparse  # a parameter, then assigned a decided value
        import flag_alias as aliased
        aliased = force_sparse
        import dotted_flag.sub
        dotted_flag = force_sparse
        global shared_flag
        shared_flag = force_sparse
        chain1 = force_sparse
        chain2 = chain1
        chain3 = chain2
        chain4 = chain3
        chain5 = chain4
        chain6 = chain5
        chain7 = chain6
        chain8 = chain7
        chain9 = chain8
        rebound = rebound or config.always
"""


def _truth(test: str, passed: set[str]) -> bool | None:
    init = ast.parse(TRUTH).body[0].body[0]  # type: ignore[attr-defined]
    return decide(ast.parse(test, mode="eval").body, frozenset(passed), init)


@pytest.mark.parametrize(
    ("test", "passed", "expected"),
    [
        ("force_sparse", {"force_sparse", "force_sparse=True"}, True),  # MiniMax-M3's MTP block
        ("force_sparse", {"force_sparse", "force_sparse=False"}, False),
        ("force_sparse", set(), False),  # not passed: its default
        ("force_sparse", {"force_sparse"}, None),  # passed, not a constant
        ("self.forced", {"force_sparse", "force_sparse=True"}, True),  # the attribute the constructor copies it to
        ("not force_sparse", {"force_sparse", "force_sparse=True"}, False),
        ("is_sparse", {"force_sparse", "force_sparse=True"}, True),  # a local assigned once: `True or …`
        ("is_sparse", set(), None),  # `False or <the layer's position>`: not decided
        ("copied", {"force_sparse", "force_sparse=True"}, True),  # a local of a local
        ("both", {"force_sparse", "force_sparse=False"}, False),  # `False and …`
        ("again", {"force_sparse", "force_sparse=True"}, None),  # assigned twice
        ("looped", set(), None),  # bound by a loop
        ("held", set(), None),  # bound by `with … as`
        ("loop_a", set(), None),  # locals that read each other: stopped, not decided
        ("numbered", set(), None),  # a literal that is not a boolean: its truth is not read
        ("count", set(), None),
        ("unbound", set(), None),
        ("imported", set(), None),  # an import binds it too
        ("defined", set(), None),  # a def binds it too
        ("caught", set(), None),  # `except … as` binds it too
        ("layer_id", set(), None),  # a parameter, then assigned
        ("loop_b", set(), None),
        ("shadow", {"force_sparse", "force_sparse=True"}, None),  # bound twice: the parameter and the assignment
        ("aliased", {"force_sparse", "force_sparse=True"}, None),  # an import alias binds it too
        ("dotted_flag", {"force_sparse", "force_sparse=True"}, None),  # `import a.b` binds `a`
        ("shared_flag", {"force_sparse", "force_sparse=True"}, None),  # a global, not a local
        ("chain8", {"force_sparse", "force_sparse=True"}, True),  # eight locals deep: followed
        ("chain9", {"force_sparse", "force_sparse=True"}, None),  # nine: past the bound, not decided
        ("rebound", set(), None),  # a parameter the constructor binds again holds more than its default
        ("rebound == False", {"rebound", "rebound=False"}, None),  # compared too: not what the caller gave
        ("self.unset", set(), None),
    ],
)
def test_a_name_tested_alone_is_decided_by_the_constant_it_holds(test, passed, expected):
    assert _truth(test, passed) is expected
