"""Which spec classes one container of the tree can mix (kvlint.analysis.layer_mixes), as KV101's fix asks:
families below the roots, and a layer's answer to a class test. One behaviour a test, named after it; written
against the mutants scripts/mutation.py made of that module (issue 31)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kvlint.analysis.hierarchy import BUILTIN_BASES, SpecHierarchy
from kvlint.analysis.layer_mixes import class_test, spec_class_mixes

HIERARCHY = SpecHierarchy(bases=dict(BUILTIN_BASES))


def mixes_of(bases: dict[str, tuple[str, ...]]) -> set[frozenset[str]]:
    """The mixes of a tree with these spec classes, any of which a container can hold, and no model read."""
    containers = SimpleNamespace(member_classes=frozenset(bases), may_hold_instance_of=lambda name: True)
    index = SimpleNamespace(
        containers=containers, hierarchy=SpecHierarchy(bases=bases), container_compositions=lambda: ()
    )
    return set(spec_class_mixes(index))


def test_a_class_deriving_from_a_root_and_another_class_heads_its_own_family():
    bases = {"KVCacheSpec": (), "AttentionSpec": ("KVCacheSpec",), "Mixin": ()}
    bases |= {"Tagged": ("AttentionSpec", "Mixin"), "Marked": ("AttentionSpec", "Mixin"), "Full": ("AttentionSpec",)}
    assert mixes_of(bases) == {frozenset({name}) for name in ("Tagged", "Marked", "Full", "Mixin")}


@pytest.mark.parametrize(
    ("layer", "exact", "answer"),
    [
        ("MambaSpec", True, True),
        ("MLAAttentionSpec", True, False),  # exactly: a subclass is not the class
        ("SlidingWindowSpec", True, False),
        ("MLAAttentionSpec", False, True),  # isinstance: a subclass of one of them is enough
        ("SlidingWindowSpec", False, False),
    ],
)
def test_a_layer_answers_a_class_test_of_several_classes_by_any_of_them(layer, exact, answer):
    assert class_test(HIERARCHY, frozenset({"FullAttentionSpec", "MambaSpec"}), exact)(layer) is answer
