"""The guards the census reads off a grouping path (kvlint.analysis.census.guards): which layer classes make it
return early, whether its container ends the grouping, whether it runs only with mixed page sizes, what it
promotes and under which setting, and which classes a grouped-first loop hands it. Each test a miniature
vllm/v1/core module, named after the behaviour, written against the mutants scripts/mutation.py made of that
module (issue 31)."""

from __future__ import annotations

import textwrap

import pytest

from kvlint.analysis.census.guards import Guards
from kvlint.analysis.census.paths import GroupingPath, read_grouping_paths

CONTAINER = "UniformTypeKVCacheSpecs"
MODULE = "vllm/v1/core/kv_cache_utils.py"
SPECS = frozenset(
    {
        "FullAttentionSpec",
        "SlidingWindowSpec",
        "SlidingWindowMLASpec",
        "MLAAttentionSpec",
        "ChunkedLocalAttentionSpec",
        "MambaSpec",
        "HiddenStateCacheSpec",
    }
)


def path_at(source: str, call: str = "UniformTypeKVCacheSpecs.from_specs(") -> GroupingPath:
    """The grouping path whose `from_specs` call is on the first line holding `call`."""
    text = textwrap.dedent(source)
    line = next(number for number, content in enumerate(text.splitlines(), 1) if call in content)
    paths = read_grouping_paths({MODULE: text.encode()}, CONTAINER, spec_classes=SPECS)
    return next(path for path in paths if path.line == line)


def guards_of(source: str) -> Guards:
    return path_at(source).guards


def edited(source: str, old: str, new: str) -> str:
    """`source` with `old` replaced: a variant that is the original by mistake would prove nothing."""
    assert old in source
    return source.replace(old, new)


def test_a_path_in_a_module_that_does_not_parse_claims_no_guard_while_the_others_are_read():
    whole_model = """
    def get_kv_cache_groups(kv_cache_spec):
        if uniform_spec := UniformTypeKVCacheSpecs.from_specs(kv_cache_spec):
            return [uniform_spec]
    """
    texts = {
        "vllm/v1/core/kv_cache_planning.py": textwrap.dedent(whole_model).encode(),
        "vllm/v1/core/kv_cache_utils.py": textwrap.dedent(
            edited(whole_model, "[uniform_spec]", "[uniform_spec")
        ).encode(),
    }
    paths = {path.module: path.guards for path in read_grouping_paths(texts, CONTAINER, spec_classes=SPECS)}
    assert paths["vllm/v1/core/kv_cache_planning.py"].returns_container
    # Unread, the broken module's path neither ends the grouping nor waits for mixed page sizes.
    assert not paths["vllm/v1/core/kv_cache_utils.py"].returns_container
    assert not paths["vllm/v1/core/kv_cache_utils.py"].page_gated


def test_a_refusal_that_logs_before_returning_none_still_refuses():
    guards = guards_of("""
    def _get_packed_kv_cache_groups(kv_cache_spec):
        if any(isinstance(spec, MambaSpec) for spec in kv_cache_spec.values()):
            logger.debug("state layers are not packed")
            return None
        return [UniformTypeKVCacheSpecs.from_specs(kv_cache_spec)]
    """)
    assert guards.refuses == {"MambaSpec"}


def test_a_bare_return_refuses_and_a_return_of_other_groups_does_not():
    guards = guards_of("""
    def get_kv_cache_groups(kv_cache_spec):
        if any(isinstance(spec, HiddenStateCacheSpec) for spec in kv_cache_spec.values()):
            return
        if any(isinstance(spec, MambaSpec) for spec in kv_cache_spec.values()):
            return _get_hybrid_groups(kv_cache_spec)
        return [UniformTypeKVCacheSpecs.from_specs(kv_cache_spec)]
    """)
    assert guards.refuses == {"HiddenStateCacheSpec"}


def test_an_early_return_on_a_test_that_is_no_isinstance_check_refuses_no_class():
    guards = guards_of("""
    def _get_packed_kv_cache_groups(kv_cache_spec, flag):
        if any(getattr(spec, flag) for spec in kv_cache_spec.values()):
            return None
        return [UniformTypeKVCacheSpecs.from_specs(kv_cache_spec)]
    """)
    assert guards.refuses == frozenset()


def test_the_whole_model_path_returns_its_container_even_when_it_logs_first():
    guards = guards_of("""
    def get_kv_cache_groups(vllm_config, kv_cache_spec):
        if is_kv_cache_spec_uniform(kv_cache_spec):
            return _get_kv_cache_groups_uniform_spec(kv_cache_spec)
        elif uniform_spec := UniformTypeKVCacheSpecs.from_specs(kv_cache_spec):
            logger.debug("one group of every layer")
            return _get_kv_cache_groups_uniform_type(uniform_spec)
        return _get_kv_cache_groups_uniform_page_size(kv_cache_spec)
    """)
    assert guards.returns_container


PACKED = """
def _get_packed_kv_cache_groups(vllm_config, kv_cache_spec):
    layout = vllm_config.cache_config.get_resolved_kv_cache_layout()
    page_sizes = {spec.page_size_bytes for spec in kv_cache_spec.values()}
    if not layout.is_block_outermost or len(page_sizes) <= 1:
        return None
    groups = []
    for bucket in _buckets(kv_cache_spec):
        uniform_spec = UniformTypeKVCacheSpecs.from_specs(bucket)
        groups.append(uniform_spec)
    return groups
"""


def test_a_container_built_outside_an_if_test_does_not_end_the_grouping():
    # The packed path's early `return None` is another `if`'s: its container is one of several groups.
    guards = guards_of(PACKED)
    assert not guards.returns_container
    assert guards.page_gated


def test_a_page_size_check_that_does_not_return_none_gates_nothing():
    logged = edited(
        PACKED,
        "if not layout.is_block_outermost or len(page_sizes) <= 1:\n        return None",
        'if len(page_sizes) <= 1:\n        logger.debug("one page size")',
    )
    assert not guards_of(logged).page_gated


def test_a_path_that_returns_early_on_the_layout_alone_is_not_page_gated():
    layout_only = edited(
        PACKED, "if not layout.is_block_outermost or len(page_sizes) <= 1:", "if not layout.is_block_outermost:"
    )
    assert not guards_of(layout_only).page_gated


PROMOTING = """
def unify_hybrid_kv_cache_specs(kv_cache_spec):
    promotions = {SlidingWindowSpec: FullAttentionSpec, ChunkedLocalAttentionSpec: FullAttentionSpec}
    for name, spec in kv_cache_spec.items():
        kv_cache_spec[name] = promotions.get(type(spec), type(spec))(spec)


def get_kv_cache_groups(vllm_config, kv_cache_spec):
    if vllm_config.scheduler_config.disable_hybrid_kv_cache_manager:
        unify_hybrid_kv_cache_specs(kv_cache_spec)
    unify_hybrid_kv_cache_specs(kv_cache_spec)
    if uniform_spec := UniformTypeKVCacheSpecs.from_specs(kv_cache_spec):
        return _get_kv_cache_groups_uniform_type(uniform_spec)
"""


def test_a_promotion_made_on_every_run_holds_without_the_setting_it_is_also_made_under():
    guards = guards_of(PROMOTING)
    assert guards.promotions == (
        ("SlidingWindowSpec", "FullAttentionSpec"),
        ("ChunkedLocalAttentionSpec", "FullAttentionSpec"),
    )
    assert guards.promoted_when == ""


@pytest.mark.parametrize(
    "table",
    [
        "{KVCacheLayout: DEFAULT_LAYOUT}",  # names, no spec class
        "{SlidingWindowSpec: fallback}",  # a spec class to something else
        "{SlidingWindowSpec: FullAttentionSpec, KVCacheLayout: DEFAULT_LAYOUT}",  # one entry of several
    ],
)
def test_a_mapping_promotes_only_when_every_entry_maps_a_spec_class_to_a_spec_class(table):
    guards = guards_of(f"""
    def get_kv_cache_groups(kv_cache_spec, fallback):
        table = {table}
        if uniform_spec := UniformTypeKVCacheSpecs.from_specs(kv_cache_spec):
            return [uniform_spec]
    """)
    assert guards.promotions == ()


@pytest.mark.parametrize(
    "rebuilt",
    [
        "kv_cache_spec[name] = replace(spec, sliding_window=None)",  # a helper, no spec class
        "kv_cache_spec[name] = SlidingWindowSpec(spec.block_size)",  # the same class again
        "full = FullAttentionSpec(spec.block_size)",  # built, never stored in the layers' specs
        "window = spec.sliding_window",  # only read
    ],
)
def test_a_branch_promotes_only_when_it_stores_another_spec_class_for_the_layer(rebuilt):
    guards = guards_of(f"""
    def get_kv_cache_groups(kv_cache_spec):
        for name, spec in kv_cache_spec.items():
            if isinstance(spec, SlidingWindowSpec):
                {rebuilt}
        if uniform_spec := UniformTypeKVCacheSpecs.from_specs(kv_cache_spec):
            return [uniform_spec]
    """)
    assert guards.promotions == ()


GROUPED_FIRST = """
def _get_swa_mla_groups(kv_cache_spec):
    mla_specs = {}
    grouped_swa_mla_specs = defaultdict(dict)
    for name, spec in kv_cache_spec.items():
        if isinstance(spec, SlidingWindowMLASpec):
            grouped_swa_mla_specs[(spec.block_size, spec.sliding_window)][name] = spec
        elif isinstance(spec, MLAAttentionSpec):
            mla_specs[name] = spec
    mla_uniform_spec = UniformTypeKVCacheSpecs.from_specs(mla_specs)
    for spec_dict in grouped_swa_mla_specs.values():
        uniform_spec = UniformTypeKVCacheSpecs.from_specs(spec_dict)
"""
FILED = "            grouped_swa_mla_specs[(spec.block_size, spec.sliding_window)][name] = spec\n"


def grouped_loop_sees(source: str) -> frozenset[str]:
    return path_at(source, "from_specs(spec_dict)").only


def test_a_loop_over_grouped_layers_sees_only_the_class_its_branch_files_there():
    # vLLM 0.27.1's SWA-MLA path: the MLA layers go to another dict, another path's.
    assert grouped_loop_sees(GROUPED_FIRST) == {"SlidingWindowMLASpec"}


def test_a_branch_that_logs_before_filing_its_layers_still_files_them():
    logged = edited(GROUPED_FIRST, FILED, '            logger.debug("grouped by block size and window")\n' + FILED)
    assert grouped_loop_sees(logged) == {"SlidingWindowMLASpec"}


def test_a_branch_that_files_nothing_adds_no_class_to_the_grouped_layers():
    mamba = edited(
        GROUPED_FIRST,
        "    mla_uniform_spec",
        '        elif isinstance(spec, MambaSpec):\n            logger.debug("state layers keep their own groups")\n'
        "    mla_uniform_spec",
    )
    assert grouped_loop_sees(mamba) == {"SlidingWindowMLASpec"}
