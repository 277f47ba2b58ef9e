"""The sizing-path analysis: the static evaluator on fixture trees, then the real releases."""

from __future__ import annotations

import pickle
import textwrap
from pathlib import Path

import pytest

from kvlint.analysis.sizing.divergences import FirstLayerPick, PathDivergence, PredicateDivergence
from kvlint.analysis.sizing.results import SizingAnalysis
from kvlint.analysis.sizing.values import Container, Layer
from kvlint.engine.registry import all_rules
from kvlint.rules._sizing_report import sizing_findings
from kvlint.scan.config import Config
from kvlint.scan.index_cache import build_project_index
from kvlint.scan.runner import scan
from kvlint.types import Severity

OFFLOADING_CONFIG = "vllm/distributed/kv_transfer/kv_connector/v1/offloading/config.py"
KV_CACHE_UTILS = "vllm/v1/core/kv_cache_utils.py"
SIZING_RULES = ["KV103", "KV104", "KV105"]


@pytest.fixture(scope="session")
def real_tree(vllm_release):
    """real_tree("0.29.0") -> the folder holding that release's `vllm/` (conftest's cached fetch)."""
    return vllm_release


@pytest.fixture(scope="session")
def real_analysis(real_tree):
    cache: dict[str, SizingAnalysis] = {}

    def get(version: str) -> SizingAnalysis:
        if version not in cache:
            sizing = build_project_index([real_tree(version) / "vllm"]).sizing
            assert isinstance(sizing, SizingAnalysis)
            cache[version] = sizing
        return cache[version]

    return get


# ---------------------------------------------------------------------------------------------- fixtures

INTERFACE_029 = """
from dataclasses import dataclass

class KVCacheSpec:
    block_size: int

class AttentionSpec(KVCacheSpec):
    pass

class FullAttentionSpec(AttentionSpec):
    pass

class MLAAttentionSpec(FullAttentionSpec):
    pass

class SlidingWindowSpec(AttentionSpec):
    def max_memory_usage_bytes(self, vllm_config):
        assert vllm_config.parallel_config.decode_context_parallel_size == 1, "DCP not support sliding window."
        return 0

class MambaSpec(KVCacheSpec):
    pass

class UniformTypeKVCacheSpecs(KVCacheSpec):
    kv_cache_specs: dict

def iter_layer_specs(kv_cache_spec):
    if isinstance(kv_cache_spec, UniformTypeKVCacheSpecs):
        return kv_cache_spec.kv_cache_specs.values()
    return (kv_cache_spec,)
"""

RESOLVER_029 = """
def resolve_dcp_kv_block_size(spec, dcp_world_size):
    layer_specs = iter_layer_specs(spec)
    if len(layer_specs) > 0 and all(isinstance(layer_spec, AttentionSpec) for layer_spec in layer_specs):
        return spec.block_size * dcp_world_size
    return spec.block_size


def resolve_kv_cache_block_sizes(kv_cache_config, vllm_config):
    cache_config = vllm_config.cache_config
    dcp = vllm_config.parallel_config.decode_context_parallel_size
    groups = kv_cache_config.kv_cache_groups
    if len(groups) <= 1:
        bs = cache_config.block_size * dcp
        return bs, bs
    group_block_sizes = [resolve_dcp_kv_block_size(g.kv_cache_spec, dcp) for g in groups]
    return max(group_block_sizes), min(group_block_sizes)


def dcp_world_size_for_kv_cache_spec(spec, dcp_world_size):
    if dcp_world_size <= 1:
        return 1
    inner = spec
    if isinstance(spec, UniformTypeKVCacheSpecs):
        inner = next(iter(spec.kv_cache_specs.values()))
    if isinstance(inner, FullAttentionSpec):
        return dcp_world_size
    return 1
"""

CONNECTOR_029 = """
def build_offloading_config(vllm_config, kv_cache_config):
    parallel_config = vllm_config.parallel_config
    groups = tuple(
        group.kv_cache_spec.block_size
        * (parallel_config.decode_context_parallel_size if isinstance(group.kv_cache_spec, AttentionSpec) else 1)
        for group in kv_cache_config.kv_cache_groups
    )
    return groups
"""

CONNECTOR_030 = """
def build_offloading_config(vllm_config, kv_cache_config):
    parallel_config = vllm_config.parallel_config
    return tuple(
        resolve_dcp_kv_block_size(group.kv_cache_spec, parallel_config.decode_context_parallel_size)
        for group in kv_cache_config.kv_cache_groups
    )
"""

# 0.31+ style: the resolver reads a `dcp_sharded` attribute; containers copy it from their first layer.
INTERFACE_033 = """
from dataclasses import dataclass, field

@dataclass(frozen=True)
class KVCacheSpec:
    block_size: int
    dcp_sharded: bool = field(default=False, kw_only=True)

@dataclass(frozen=True, kw_only=True)
class AttentionSpec(KVCacheSpec):
    dcp_sharded: bool = True

class FullAttentionSpec(AttentionSpec):
    pass

class MLAAttentionSpec(FullAttentionSpec):
    pass

class MambaSpec(KVCacheSpec):
    pass

class UniformTypeKVCacheSpecs(KVCacheSpec):
    kv_cache_specs: dict

    def __post_init__(self):
        super().__post_init__()
        if self.kv_cache_specs:
            object.__setattr__(self, "dcp_sharded", self.first_spec.dcp_sharded)

    @property
    def first_spec(self):
        return next(iter(self.kv_cache_specs.values()))
"""

RESOLVER_033 = """
def resolve_dcp_kv_block_size(spec, dcp_world_size):
    return spec.block_size * (dcp_world_size if spec.dcp_sharded else 1)


def resolve_kv_cache_block_sizes(kv_cache_config, vllm_config):
    dcp = vllm_config.parallel_config.decode_context_parallel_size
    groups = kv_cache_config.kv_cache_groups
    if len(groups) <= 1:
        if groups and not groups[0].kv_cache_spec.dcp_sharded:
            dcp = 1
        bs = vllm_config.cache_config.block_size * dcp
        return bs, bs
    return [resolve_dcp_kv_block_size(g.kv_cache_spec, dcp) for g in groups]
"""

INDEXER = """
class DeepseekV32IndexerCache:
    def get_kv_cache_spec(self, vllm_config):
        return MLAAttentionSpec(block_size=self.block_size, num_kv_heads=1, head_size=self.head_dim)
"""


def make_tree(root: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return root


def analyse(root: Path) -> SizingAnalysis:
    sizing = build_project_index([root / "vllm"]).sizing
    assert isinstance(sizing, SizingAnalysis)
    return sizing


def column(analysis: SizingAnalysis, function: str):
    return next(p for p in analysis.paths if p.qualname == function)


def table(analysis: SizingAnalysis, function: str, view: str = "group") -> dict[str, str]:
    factors = column(analysis, function).factors(view)
    assert factors is not None
    return {kind.label: factor for kind, factor in zip(analysis.kinds, factors)}


@pytest.fixture
def tree_029(tmp_path):
    return make_tree(
        tmp_path,
        {
            "vllm/v1/kv_cache_interface.py": INTERFACE_029,
            KV_CACHE_UTILS: RESOLVER_029,
            OFFLOADING_CONFIG: CONNECTOR_029,
            "vllm/model_executor/models/deepseek_v2.py": INDEXER,
        },
    )


# ---------------------------------------------------------------------------------------------- evaluator


def test_kinds_come_from_the_tree(tree_029):
    analysis = analyse(tree_029)
    labels = [k.label for k in analysis.kinds]
    assert labels == [
        "FullAttentionSpec",
        "MLAAttentionSpec",
        "SlidingWindowSpec",
        "MambaSpec",
        "UniformTypeKVCacheSpecs{MLA, indexer}",
        "UniformTypeKVCacheSpecs{FullAttention×2}",
        "UniformTypeKVCacheSpecs{SlidingWindow, FullAttention}",
    ]
    dsa = analysis.kinds[4].spec
    assert isinstance(dsa, Container)
    # The indexer layer's class is read from the model that builds it, with its literal arguments.
    assert dsa.layers[1].cls == "MLAAttentionSpec" and ("num_kv_heads", 1) in dsa.layers[1].overrides
    rejected = {k.label: k.rejected_under_dcp for k in analysis.kinds}
    assert "SlidingWindowSpec.max_memory_usage_bytes asserts" in rejected["SlidingWindowSpec"]
    assert rejected["MambaSpec"] is None and rejected["UniformTypeKVCacheSpecs{MLA, indexer}"] is None
    assert rejected["UniformTypeKVCacheSpecs{SlidingWindow, FullAttention}"] is not None


def test_only_container_kinds_the_census_builds_are_compared(tree_029):
    # `from_specs` never holds sliding-window and full layers together: with a census, no such kind is
    # compared (the reader found KV105 listing it); without one, every standard kind is.
    from kvlint.analysis.sizing.matrix import build_sizing_analysis

    def labels(built):
        sizing = build_sizing_analysis(
            tree_029 / "vllm", analyse(tree_029) and _hierarchy(tree_029), None, built_containers=built
        )
        return [k.label for k in sizing.kinds if k.label.startswith("UniformTypeKVCacheSpecs")]

    assert labels((frozenset({"MLAAttentionSpec"}),)) == ["UniformTypeKVCacheSpecs{MLA, indexer}"]
    assert labels((frozenset({"MLAAttentionSpec", "FullAttentionSpec"}),)) == [
        "UniformTypeKVCacheSpecs{FullAttention×2}"
    ]
    assert len(labels(None)) == 3


def _hierarchy(root: Path):
    return build_project_index([root / "vllm"]).hierarchy


def test_resolver_all_over_unwrapped_layers(tree_029):
    resolver = table(analyse(tree_029), "resolve_dcp_kv_block_size")
    assert resolver == {
        "FullAttentionSpec": "dcp",
        "MLAAttentionSpec": "dcp",
        "SlidingWindowSpec": "dcp",
        "MambaSpec": "1",
        "UniformTypeKVCacheSpecs{MLA, indexer}": "dcp",
        "UniformTypeKVCacheSpecs{FullAttention×2}": "dcp",
        "UniformTypeKVCacheSpecs{SlidingWindow, FullAttention}": "dcp",
    }


def test_first_layer_pick_and_class_set_of_a_helper(tree_029):
    helper = table(analyse(tree_029), "dcp_world_size_for_kv_cache_spec")
    assert helper["SlidingWindowSpec"] == "1"  # FullAttentionSpec only
    assert helper["UniformTypeKVCacheSpecs{MLA, indexer}"] == "dcp"  # the first layer is MLA
    assert helper["UniformTypeKVCacheSpecs{SlidingWindow, FullAttention}"] == "1"  # the first layer decides


def test_inline_gate_loses_the_factor_for_containers_in_the_worker_view(tree_029):
    analysis = analyse(tree_029)
    worker = table(analysis, "build_offloading_config", "group")
    scheduler = table(analysis, "build_offloading_config", "scheduler")
    assert worker["UniformTypeKVCacheSpecs{MLA, indexer}"] == "1"
    assert scheduler["UniformTypeKVCacheSpecs{MLA, indexer}"] == "dcp"  # flattened to its MLA layer
    assert worker["MambaSpec"] == "1" and worker["FullAttentionSpec"] == "dcp"


def test_scheduler_reference_has_a_single_group_view(tree_029):
    analysis = analyse(tree_029)
    assert table(analysis, "resolve_kv_cache_block_sizes", "scheduler")["MambaSpec"] == "1"
    # One group: `cache_config.block_size * dcp`, whatever the kind.
    assert table(analysis, "resolve_kv_cache_block_sizes", "single-group")["MambaSpec"] == "dcp"


def test_divergences_on_the_fixture_tree(tree_029):
    analysis = analyse(tree_029)
    by_type = {(type(d), d.qualname): d for d in analysis.divergences}
    path = by_type[(PathDivergence, "build_offloading_config")]
    assert (path.kind, path.view, path.tokens, path.expected_tokens) == (
        "UniformTypeKVCacheSpecs{MLA, indexer}",
        "group",
        "16",
        "32",
    )
    assert path.scheduler.endswith(":resolve_kv_cache_block_sizes") and path.rejected_under_dcp is None
    predicate = by_type[(PredicateDivergence, "dcp_world_size_for_kv_cache_spec")]
    assert ("SlidingWindowSpec", "1", "dcp") in predicate.kinds and predicate.gate is None and predicate.column is None
    assert predicate.rejected_under_dcp  # every differing kind is rejected under DCP by the tree
    pick = by_type[(FirstLayerPick, "dcp_world_size_for_kv_cache_spec")]
    assert pick.column is not None and pick.answer != pick.reversed_answer


def test_rules_word_the_divergences_of_the_fixture_tree(tree_029):
    by_code = {(f.code, f.qualname): f for f in sizing_findings(analyse(tree_029), all_rules())}
    kv103 = by_code[("KV103", "build_offloading_config")]
    assert kv103.severity is Severity.ERROR
    assert "UniformTypeKVCacheSpecs{MLA, indexer} at DCP=2" in kv103.message
    assert "gives 16 tokens per block" in kv103.message and "gives 32" in kv103.message
    assert "resolve_kv_cache_block_sizes" in kv103.message
    kv105 = by_code[("KV105", "dcp_world_size_for_kv_cache_spec")]
    # Every differing kind is rejected under DCP by the tree: a warning that says so.
    assert kv105.severity is Severity.WARNING and "rejects under DCP" in kv105.message
    assert "SlidingWindowSpec (1, resolver dcp)" in kv105.message
    kv104 = by_code[("KV104", "dcp_world_size_for_kv_cache_spec")]
    assert kv104.column is not None and "first layer only" in kv104.message


def test_the_after_tree_agrees(tmp_path):
    root = make_tree(
        tmp_path,
        {
            "vllm/v1/kv_cache_interface.py": INTERFACE_029,
            KV_CACHE_UTILS: RESOLVER_029.split("def dcp_world_size_for_kv_cache_spec")[0],
            OFFLOADING_CONFIG: CONNECTOR_030,
        },
    )
    analysis = analyse(root)
    assert analysis.divergences == ()
    worker = table(analysis, "build_offloading_config", "group")
    assert worker["UniformTypeKVCacheSpecs{MLA, indexer}"] == "dcp"


def test_dcp_sharded_attribute_defaults_and_post_init(tmp_path):
    root = make_tree(
        tmp_path,
        {
            "vllm/v1/kv_cache_interface.py": INTERFACE_033,
            KV_CACHE_UTILS: RESOLVER_033,
            OFFLOADING_CONFIG: CONNECTOR_030,
        },
    )
    analysis = analyse(root)
    resolver = table(analysis, "resolve_dcp_kv_block_size")
    assert resolver["MambaSpec"] == "1"  # field(default=False) on KVCacheSpec
    assert resolver["FullAttentionSpec"] == "dcp"  # AttentionSpec overrides it with True
    assert resolver["UniformTypeKVCacheSpecs{MLA, indexer}"] == "dcp"  # __post_init__ copies the first layer's
    single = table(analysis, "resolve_kv_cache_block_sizes", "single-group")
    assert single["MambaSpec"] == "1" and single["MLAAttentionSpec"] == "dcp"
    assert analysis.divergences == ()


def test_what_cannot_be_evaluated_is_unknown(tmp_path):
    root = make_tree(
        tmp_path,
        {
            "vllm/v1/kv_cache_interface.py": INTERFACE_029,
            KV_CACHE_UTILS: """
                def resolve_dcp_kv_block_size(spec, dcp_world_size):
                    if registry_says_sharded(spec):  # not in the tree: cannot be evaluated
                        return spec.block_size * dcp_world_size
                    return spec.block_size
                """,
            OFFLOADING_CONFIG: CONNECTOR_029,
        },
    )
    analysis = analyse(root)
    assert set(table(analysis, "resolve_dcp_kv_block_size").values()) == {"?"}
    assert analysis.divergences == ()  # never a finding from a guess


def test_type_is_comparison(tmp_path):
    root = make_tree(
        tmp_path,
        {
            "vllm/v1/kv_cache_interface.py": INTERFACE_029,
            KV_CACHE_UTILS: RESOLVER_029,
            "vllm/v1/worker/foo.py": """
                def dcp_factor(spec, dcp_world_size):
                    return dcp_world_size if type(spec) is FullAttentionSpec else 1
                """,
        },
    )
    helper = table(analyse(root), "dcp_factor")
    assert helper["FullAttentionSpec"] == "dcp" and helper["MLAAttentionSpec"] == "1"


def test_analysis_is_plain_picklable_data(tree_029):
    analysis = analyse(tree_029)
    assert pickle.loads(pickle.dumps(analysis)) == analysis


def test_no_tree_no_analysis():
    assert build_project_index([]).sizing is None


# ---------------------------------------------------------------------------------------------- real releases


def _sizing_findings(root: Path, relative: str):
    result = scan([root / relative], Config(), SIZING_RULES, [])
    return result.findings


@pytest.mark.slow
def test_real_029_offloading_connector_diverges_from_the_scheduler(real_tree):
    root = real_tree("0.29.0")
    # The path's divergence is the effect of the gate's predicate (KV105) it computes its size with: one root
    # cause, the KV103 a related location of it (kvlint.engine.grouping).
    reported = _sizing_findings(root, OFFLOADING_CONFIG)
    findings = [f for f in reported if f.code == "KV103"] + [
        r for f in reported for r in f.related if r.code == "KV103"
    ]
    assert len(findings) == 1
    finding = findings[0]
    assert next(f for f in reported if finding in (f, *f.related)).severity is Severity.ERROR
    assert "build_offloading_config" in finding.message
    assert "UniformTypeKVCacheSpecs{MLA, indexer} at DCP=2" in finding.message
    assert "vllm.v1.core.kv_cache_utils:resolve_kv_cache_block_sizes` gives 32" in finding.message
    assert "gives 16 tokens per block" in finding.message
    source = (root / OFFLOADING_CONFIG).read_text().splitlines()
    assert source[finding.line - 1].startswith("def build_offloading_config(")


@pytest.mark.slow
def test_real_029_dcp_helper_disagrees_with_the_resolver(real_tree):
    root = real_tree("0.29.0")
    findings = _sizing_findings(root, KV_CACHE_UTILS)
    kv105 = [f for f in findings if f.code == "KV105"]
    assert len(kv105) == 1
    message = kv105[0].message
    assert "dcp_world_size_for_kv_cache_spec" in message and "resolve_dcp_kv_block_size" in message
    for kind in ("ChunkedLocalAttentionSpec", "SlidingWindowSpec", "CrossAttentionSpec", "EncoderOnlyAttentionSpec"):
        assert f"{kind} (1, resolver dcp)" in message
    assert "MLAAttentionSpec (" not in message and "MambaSpec (" not in message
    source = (root / KV_CACHE_UTILS).read_text().splitlines()
    assert source[kv105[0].line - 1].startswith("def dcp_world_size_for_kv_cache_spec(")
    # The helper's first-layer pick is part of its predicate's root cause: a related location of the KV105.
    kv104 = [r for r in kv105[0].related if r.code == "KV104"]
    assert len(kv104) == 1 and "next(iter(spec.kv_cache_specs.values()))" in source[kv104[0].line - 1]
    assert not [f for f in findings if f.code == "KV104"]


@pytest.mark.slow
def test_real_029_analysis(real_analysis):
    analysis = real_analysis("0.29.0")
    assert analysis.reference == "vllm.v1.core.kv_cache_utils:resolve_kv_cache_block_sizes"
    assert analysis.resolver == "vllm.v1.core.kv_cache_utils:resolve_dcp_kv_block_size"
    dsa = next(k for k in analysis.kinds if k.label == "UniformTypeKVCacheSpecs{MLA, indexer}")
    assert dsa.spec.layers[1].cls == "MLAAttentionSpec"  # DeepseekV32IndexerCache's spec
    found = {(type(d), d.qualname) for d in analysis.divergences}
    assert (PathDivergence, "build_offloading_config") in found
    assert (PredicateDivergence, "dcp_world_size_for_kv_cache_spec") in found


@pytest.mark.slow
def test_real_030_offloading_connector_agrees(real_tree, real_analysis):
    root = real_tree("0.30.0")
    assert [f for f in _sizing_findings(root, OFFLOADING_CONFIG) if f.code == "KV103"] == []
    analysis = real_analysis("0.30.0")
    assert not analysis.divergences_in(OFFLOADING_CONFIG)
    worker = table(analysis, "build_offloading_config", "group")
    assert worker["UniformTypeKVCacheSpecs{MLA, indexer}"] == "dcp"


@pytest.mark.slow
def test_real_033_reads_dcp_sharded(real_analysis):
    analysis = real_analysis("0.33.0")
    resolver = table(analysis, "resolve_dcp_kv_block_size")
    assert resolver["MambaSpec"] == "1"
    assert resolver["MLAAttentionSpec"] == "dcp"
    assert resolver["UniformTypeKVCacheSpecs{MLA, indexer}"] == "dcp"
    assert not analysis.divergences_in(OFFLOADING_CONFIG)


@pytest.mark.slow
@pytest.mark.parametrize("version", ["0.27.1", "0.28.0"])
def test_real_trees_without_a_resolver(real_tree, version):
    sizing = build_project_index([real_tree(version) / "vllm"]).sizing
    assert isinstance(sizing, SizingAnalysis)
    assert sizing.resolver is None
    paths = [d for d in sizing.divergences_in(OFFLOADING_CONFIG) if isinstance(d, PathDivergence)]
    assert paths and paths[0].kind == "UniformTypeKVCacheSpecs{MLA, indexer}"


@pytest.mark.slow
@pytest.mark.parametrize("version", ["0.27.1", "0.29.0", "0.33.0"])
def test_reading_only_files_that_could_matter_gives_the_same_analysis(real_tree, version):
    """A rebuild from the project cache reads only the files its snapshot marks as could-matter."""
    from kvlint.analysis.hierarchy import read_hierarchy
    from kvlint.analysis.sizing.matrix import build_sizing_analysis
    from kvlint.analysis.vocabulary import INTERFACE_MODULE
    from kvlint.scan.result_cache import stable_repr
    from kvlint.scan.tree_snapshot import could_matter

    root = real_tree(version)
    hierarchy = read_hierarchy(root / INTERFACE_MODULE)
    files = [p.relative_to(root).as_posix() for p in (root / "vllm").rglob("*.py")]
    verdicts = {f: could_matter(f, (root / f).read_bytes()) for f in files}
    only = frozenset(f for f, verdict in verdicts.items() if verdict)
    # Any change to these rebuilds the index; the model and layer modules the census reads by folder matter
    # only through a fingerprint of their class statements, imports and constructions (kvlint.analysis.census).
    assert sum(verdict is True for verdict in verdicts.values()) < len(files) / 4
    everything = build_sizing_analysis(root, hierarchy)
    assert everything is not None and everything.paths
    assert stable_repr(build_sizing_analysis(root, hierarchy, only)) == stable_repr(everything)


def test_loops_over_a_containers_layers_run_every_layer():
    import ast

    from kvlint.analysis.hierarchy import BUILTIN_BASES, SpecHierarchy
    from kvlint.analysis.sizing.evaluator import Evaluator
    from kvlint.analysis.sizing.program import Module, Program
    from kvlint.analysis.sizing.values import UNKNOWN

    source = textwrap.dedent(
        """
        def dcp_factor(spec, dcp_world_size):
            for layer in spec.kv_cache_specs.values():
                if not isinstance(layer, AttentionSpec):
                    return 1
            return dcp_world_size

        def opaque(spec, dcp_world_size):
            return dcp_world_size if registry[spec] else 1
        """
    )
    module = Module("vllm/x.py", ast.parse(source), source)
    evaluator = Evaluator(Program(SpecHierarchy(bases=dict(BUILTIN_BASES)), {}, {"vllm/x.py": module}))

    def answer(name, *layers):
        value, _ = evaluator.call(module, module.functions[name], [Container(tuple(Layer(c) for c in layers)), 2])
        return value

    assert answer("dcp_factor", "FullAttentionSpec", "MambaSpec") == 1  # the second layer decides too
    assert answer("dcp_factor", "FullAttentionSpec", "SlidingWindowSpec") == 2
    assert answer("opaque", "FullAttentionSpec") is UNKNOWN


@pytest.mark.slow
def test_scheduler_only_paths_from_the_configuration_reach_the_sizing_analysis(real_tree):
    """`scheduler-only-paths` decides roles for KV103–KV105 as it does for KV101: code declared to see only
    the scheduler's flattened config is compared on the scheduler's view alone."""
    from kvlint.analysis.vocabulary import DEFAULT_SCHEDULER_ONLY_PATHS

    offloading = real_tree("0.29.0") / OFFLOADING_CONFIG
    default = scan([offloading], Config(), ["KV103"], [], jobs=1, cache_dir=None)
    assert [f.code for f in default.findings] == ["KV103"]
    declared = Config(
        scheduler_only_paths=[
            *DEFAULT_SCHEDULER_ONLY_PATHS,
            "vllm/distributed/kv_transfer/kv_connector/v1/offloading/*",
        ]
    )
    assert scan([offloading], declared, ["KV103"], [], jobs=1, cache_dir=None).findings == []
    # `kvlint paths` reads the same setting: its offloading column then shows only the scheduler's view
    worker_view = table(default.project.sizing, "build_offloading_config", "group")
    assert worker_view["UniformTypeKVCacheSpecs{MLA, indexer}"] == "1"
    declared_index = build_project_index([offloading], scheduler_only_paths=tuple(declared.scheduler_only_paths))
    assert column(declared_index.sizing, "build_offloading_config").factors("group") is None
