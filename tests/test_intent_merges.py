"""Which spec classes' `merge` tells layers of different shapes apart, and which settings a settings-only merge
asserts one value of (kvlint.analysis.census.merges): each test a miniature module, named after the behaviour,
written against the mutants scripts/mutation.py made of that module (issue 31)."""

from __future__ import annotations

import textwrap

from kvlint.analysis.census.merges import settings_merges

SPECS = frozenset({"Base", "Shaped", "Settings", "Handed", "Sub", "Mixed", "Cycle1", "Cycle2", "Lengths", "Elsewhere"})
INTERFACE = """
import dataclasses

class Base:
    @classmethod
    def merge(cls, specs):
        assert len({spec.cache_dtype_str for spec in specs}) == 1
        return specs[0]

class Shaped(Base):
    @classmethod
    def merge(cls, specs):
        assert all(0 < spec.head_size == specs[0].head_size for spec in specs)  # a chained comparison
        return specs[0]

class Settings(Base):
    @classmethod
    def merge(cls, specs):
        windows = set(spec.sliding_window for spec in specs)
        assert len(windows) == 1
        return specs[0]

class Handed(Base):
    @classmethod
    def merge(cls, specs):
        return super().merge(specs)

class Lengths(Base):
    @classmethod
    def merge(cls, specs):
        if len(specs) != 1:
            pass
        return specs[0]

class Sub(Settings):
    pass

class Other:
    pass

class Mixed(Other, Settings):
    pass

class Cycle1(Cycle2):
    pass

class Cycle2(Cycle1):
    pass

def merge(specs):
    return specs[0] == specs[1]
"""


def merges(**modules: str) -> dict[str, frozenset[str]]:
    texts = {"vllm/v1/kv_cache_interface.py": INTERFACE, **modules}
    return dict(settings_merges({p: textwrap.dedent(t).encode() for p, t in texts.items()}, SPECS))


def test_a_merge_that_compares_a_field_with_equality_tells_shapes_apart():
    assert "Shaped" not in merges()


def test_a_merge_that_only_counts_distinct_settings_is_settings_only_with_the_fields_it_reads():
    found = merges()
    assert found["Base"] == {"cache_dtype_str"}
    assert found["Settings"] == {"sliding_window"}
    assert found["Lengths"] == frozenset()  # `len(specs) != 1` compares a count, not a shape


def test_a_merge_handing_the_layers_to_another_merge_tells_shapes_apart():
    assert "Handed" not in merges()


def test_a_class_without_a_merge_inherits_its_nearest_bases():
    found = merges()
    assert found["Sub"] == {"sliding_window"}
    assert found["Mixed"] == {"sliding_window"}  # its first base defines none: the second's


def test_bases_that_name_each_other_decide_nothing_and_end():
    found = merges()
    assert "Cycle1" not in found and "Cycle2" not in found


def test_a_spec_class_in_a_module_without_a_merge_inherits_one():
    assert merges(**{"vllm/other.py": "class Elsewhere(Settings):\n    pass\n"})["Elsewhere"] == {"sliding_window"}


def test_a_module_that_does_not_parse_is_skipped():
    assert merges(**{"vllm/broken.py": "class Elsewhere(Base):\n    def merge(cls, specs:\n"}).keys() == {
        "Base",
        "Settings",
        "Lengths",
        "Sub",
        "Mixed",
    }


def test_a_spec_class_anywhere_in_a_module_without_a_merge_inherits_one_whatever_its_last_byte():
    """Its `class` line is found at the start of any line, the file's first or a later one, and the file may
    end without a line break (the reader finds top-level classes by the literal `class`, then looks back)."""
    first = "class Elsewhere(Settings):\n    pass"
    later = "import os\nclass Elsewhere(Settings):\n    pass"
    for module in (first, later):
        assert merges(**{"vllm/other.py": module})["Elsewhere"] == {"sliding_window"}, module
