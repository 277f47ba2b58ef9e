"""The one DCP-alias reader that both analyses (per-file libcst rules, cross-file sizing) use."""

from __future__ import annotations

from kvlint.analysis.vocabulary import dcp_aliases, is_dcp_name


def test_a_keyword_argument_passing_a_dcp_size_names_an_alias():
    # Once read by the per-file rules only: the sizing reader matched at the start of a line and missed it.
    source = "self.impl = Impl(cp_world_size=dcp_world_size)\n"
    assert dcp_aliases(source) == {"cp_world_size"}


def test_a_union_annotation_does_not_make_its_last_member_an_alias():
    # Once the per-file reader stopped at `|` and took `None` for the assigned name.
    assert dcp_aliases("x: int | None = dcp_size\n") == {"x"}


def test_aliases_of_aliases_and_what_is_not_one():
    source = "self.cp_world_size = dcp_world_size\nranks = self.cp_world_size\nblock_size = 16\nsame = a == dcp\n"
    assert dcp_aliases(source) == {"cp_world_size", "ranks"}


def test_dcp_names():
    assert is_dcp_name("decode_context_parallel_size") and is_dcp_name("dcp_local_world_size")
    assert not is_dcp_name("dcp_rank") and not is_dcp_name(None)
    assert is_dcp_name("cp_world_size", {"cp_world_size"})
