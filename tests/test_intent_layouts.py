"""What the census reads of KV cache layouts and page alignment (kvlint.analysis.census.layouts): which layouts
put the block dimension outermost, the setting that picks one, and where the default platform pads a hybrid
model's Mamba pages. Each test a miniature module, named after the behaviour, written against the mutants
scripts/mutation.py made of that module (issue 31)."""

from __future__ import annotations

import textwrap

from kvlint.analysis.census.layouts import block_outermost, layout_setting, mamba_page_padding

ENUM = """
import enum

INNER, OUTER = 0, 1


class KVCacheLayout(enum.Enum):
    LBHNC = (0, 1, 2)
    BLHNC = (1, 0, 2)
    BHLNC = (1, 2, 0)
    SHORT = ()
    NOTE = "not a tuple"
    PAIR, OTHER = (1, 0), (1, 0)

    @property
    def is_block_outermost(self):
        return self.value[0] == OUTER
"""


def texts(**modules: str) -> dict[str, bytes]:
    return {path: textwrap.dedent(text).encode() for path, text in modules.items()}


def test_the_layouts_whose_value_names_the_outermost_constant_put_the_block_outermost():
    assert block_outermost(texts(**{"vllm/layout.py": ENUM})) == {"BLHNC", "BHLNC"}


def test_the_constant_bound_alone_is_read_as_well_as_in_a_tuple():
    alone = ENUM.replace("INNER, OUTER = 0, 1", "INNER = 0\nOUTER = 1")
    assert block_outermost(texts(**{"vllm/layout.py": alone})) == {"BLHNC", "BHLNC"}


def test_an_enum_whose_test_is_not_a_value_comparison_decides_nothing_and_the_next_is_read():
    odd = ENUM.replace("return self.value[0] == OUTER", "return self.value[0] < OUTER")
    chained = ENUM.replace("return self.value[0] == OUTER", "return self.value[0] == OUTER == 1")
    named = ENUM.replace("return self.value[0] == OUTER", "return self.value['k'] == OUTER")
    literal = ENUM.replace("return self.value[0] == OUTER", "return self.value[0] == 1")
    for wrong in (odd, chained, named, literal):
        assert block_outermost(texts(**{"vllm/a.py": wrong})) == frozenset()
        assert block_outermost(texts(**{"vllm/a.py": wrong, "vllm/b.py": ENUM})) == {"BLHNC", "BHLNC"}


def test_an_enum_whose_constant_is_not_bound_to_an_integer_decides_nothing():
    unbound = ENUM.replace("INNER, OUTER = 0, 1", "INNER, OUTER = 0, 'one'")
    assert block_outermost(texts(**{"vllm/a.py": unbound})) == frozenset()
    assert block_outermost(texts(**{"vllm/a.py": unbound, "vllm/b.py": ENUM})) == {"BLHNC", "BHLNC"}


def test_a_module_that_does_not_parse_is_skipped():
    broken = "def is_block_outermost(:\n"
    assert block_outermost(texts(**{"vllm/a.py": broken, "vllm/b.py": ENUM})) == {"BLHNC", "BHLNC"}


def test_the_setting_is_the_layout_variable_a_module_using_the_enum_reads():
    resolution = """
    import vllm.envs as envs
    from vllm.layout import KVCacheLayout

    def resolve():
        if envs.VLLM_OTHER:
            return None
        return KVCacheLayout[envs.VLLM_KV_CACHE_LAYOUT]
    """
    found = texts(**{"vllm/layout.py": ENUM, "vllm/resolve.py": resolution})
    assert layout_setting(found) == "VLLM_KV_CACHE_LAYOUT"
    unrelated = resolution.replace("KVCacheLayout", "Other")
    assert layout_setting(texts(**{"vllm/layout.py": ENUM, "vllm/resolve.py": unrelated})) == ""
    assert layout_setting(texts(**{"vllm/resolve.py": resolution})) == ""  # no enum: no setting of it


PLATFORM = """
def check_and_update_config(cache_config):
    if cache_config.mamba_page_size_padded is None:
        cache_config.block_size = 16
    cache_config.mamba_page_size_padded = 4096
"""


def test_the_default_platforms_assignment_of_the_padded_mamba_page_is_where_the_tree_pads():
    assert mamba_page_padding(texts(**{"vllm/platforms/interface.py": PLATFORM})) == "vllm/platforms/interface.py:5"


def test_another_platforms_own_module_a_read_only_or_a_module_outside_platforms_pads_nothing():
    assert mamba_page_padding(texts(**{"vllm/platforms/rocm.py": PLATFORM})) == ""
    assert mamba_page_padding(texts(**{"vllm/config/cache.py": PLATFORM})) == ""
    read_only = PLATFORM.replace("    cache_config.mamba_page_size_padded = 4096\n", "")
    assert mamba_page_padding(texts(**{"vllm/platforms/interface.py": read_only})) == ""
    broken = "mamba_page_size_padded = (\n"
    both = {"vllm/platforms/a.py": broken, "vllm/platforms/interface.py": PLATFORM}
    assert mamba_page_padding(texts(**both)) == "vllm/platforms/interface.py:5"
