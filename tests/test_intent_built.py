"""How the census combines what constructors build (kvlint.analysis.census.built): statements that both run
multiply their alternatives, branches add them, too many are merged into one; a layer class built by two calls
that both run (or with a per-layer argument) is configured apart. Named after the behaviour; written against
the mutants scripts/mutation.py made of that module (issue 31)."""

from __future__ import annotations

from kvlint.analysis.census.built import NOTHING, Built, either, layer_built, product


def _branches(count: int) -> Built:
    return either([layer_built(f"L{i}", f"m.py:{i}", False) for i in range(count)])


def test_statements_that_both_run_build_every_pair_of_their_alternatives():
    left = either([layer_built("A", "m.py:1", False), layer_built("B", "m.py:2", False)])
    right = layer_built("C", "m.py:3", False)
    both = product(left, right)
    assert set(both.alternatives) == {frozenset({"A", "C"}), frozenset({"B", "C"})} and not both.merged
    assert both.sites == {("A", "m.py:1"), ("B", "m.py:2"), ("C", "m.py:3")}
    assert product(NOTHING, right).alternatives == right.alternatives


def test_sixteen_alternatives_are_kept_apart_and_seventeen_merged():
    assert len(_branches(16).alternatives) == 16 and not _branches(16).merged
    merged = _branches(17)
    assert merged.merged and merged.alternatives == (frozenset(f"L{i}" for i in range(17)),)
    four, five = _branches(4), either([_branches(4), layer_built("X", "m.py:99", False)])
    assert not product(four, four).merged  # 4 x 4 pairs, 10 of them distinct
    others = either([layer_built(f"O{i}", f"o.py:{i}", False) for i in range(4)])
    assert len(product(four, others).alternatives) == 16 and not product(four, others).merged
    wide = product(four, either([layer_built(f"R{i}", f"r.py:{i}", False) for i in range(5)]))
    assert wide.merged and len(wide.alternatives) == 1 and len(five.alternatives) == 5
    assert wide.sites == four.sites | {(f"R{i}", f"r.py:{i}") for i in range(5)}


def test_a_merged_branch_or_statement_leaves_the_whole_merged():
    merged = _branches(17)
    assert either([merged, layer_built("A", "m.py:1", False)]).merged
    assert either([layer_built("A", "m.py:1", False), merged]).merged
    assert product(layer_built("A", "m.py:1", False), merged).merged


def test_a_class_two_calls_that_both_run_build_is_configured_apart_and_one_call_reached_twice_is_not():
    first, second = layer_built("Attention", "m.py:1", False), layer_built("Attention", "m.py:2", False)
    assert product(first, second).varied == {"Attention"}
    assert product(first, first).varied == frozenset()  # the same line: one call
    assert either([first, second]).varied == frozenset()  # the two branches of an `if`
    assert product(first, layer_built("Mamba", "m.py:3", False)).varied == frozenset()


def test_a_per_layer_argument_configures_apart_through_branches_and_statements():
    apart = layer_built("Attention", "m.py:1", True)
    assert apart.varied == {"Attention"}
    assert product(apart, layer_built("Mamba", "m.py:3", False)).varied == {"Attention"}
    assert either([layer_built("Mamba", "m.py:3", False), apart]).varied == {"Attention"}
    assert _branches(17).varied == frozenset() and either([_branches(17), apart]).varied == {"Attention"}


def test_a_class_object_named_twice_is_no_second_construction():
    # 0.31.0's Transformers backend: `attn_cls is MLAAttention` at two lines and `return MLAAttention` name the
    # class; it is built once, by `attn_cls(**kwargs)`.
    from kvlint.analysis.census.built import referenced

    named = [referenced(layer_built("Mla", f"base.py:{line}", False)) for line in (585, 634)]
    assert product(*named).varied == frozenset()
    assert product(named[0], layer_built("Mla", "base.py:668", False)).varied == frozenset()
    assert product(layer_built("Mla", "a.py:1", False), layer_built("Mla", "a.py:2", False)).varied == {"Mla"}
    # Either of two calls, then the class named: one construction per checkpoint still.
    calls = either([layer_built("Mla", "a.py:1", False), layer_built("Mla", "a.py:2", False)])
    assert product(calls, named[0]).varied == frozenset() and product(named[0], calls).varied == frozenset()


def test_a_class_one_statement_calls_once_is_built_twice_only_with_a_later_call_at_another_line():
    # The calls are joined per class across statements: a class one side calls and the other does not keeps its
    # one site (not "several"), and a class only the smaller side calls is kept, so a third statement that calls
    # it at another line builds it twice.
    attention, mamba = layer_built("Attention", "m.py:1", False), layer_built("Mamba", "m.py:2", False)
    both = product(attention, mamba)
    assert product(both, layer_built("Attention", "m.py:1", False)).varied == frozenset()  # the same call
    assert product(both, layer_built("Mamba", "m.py:2", False)).varied == frozenset()
    assert product(both, layer_built("Mamba", "m.py:9", False)).varied == {"Mamba"}
    wide = product(product(mamba, layer_built("Linear", "m.py:3", False)), layer_built("Conv", "m.py:4", False))
    assert product(product(attention, wide), layer_built("Attention", "m.py:7", False)).varied == {"Attention"}
    assert product(product(wide, attention), layer_built("Attention", "m.py:1", False)).varied == frozenset()
    # One call reached by two statements stays one site; either of two calls, then one of them, is two calls.
    assert product(product(attention, attention), attention).varied == frozenset()
    other = layer_built("Attention", "m.py:5", False)
    assert product(either([attention, other]), attention).varied == {"Attention"}
