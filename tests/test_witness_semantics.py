"""What a sizing finding is measured against, and which counterexamples count (issue 26, items 3 and 4):
the managers' allocation in a tree without the shared resolver; kinds the coordinator refuses under DCP;
the kinds a site's value really serves. Miniature trees, one per behaviour."""

from __future__ import annotations

from pathlib import Path

from kvlint.analysis.sizing.divergences import PathDivergence, PredicateDivergence
from kvlint.engine.registry import all_rules
from kvlint.rules._sizing_report import sizing_findings
from kvlint.scan.config import Config
from kvlint.scan.runner import scan
from kvlint.types import Severity
from tests.test_semantics import INTERFACE_029, KV_CACHE_UTILS, RESOLVER_029, analyse, make_tree

COORDINATOR = "vllm/v1/core/kv_cache_coordinator.py"
MANAGERS = "vllm/v1/core/single_type_kv_cache_manager.py"

# vLLM 0.27.1's scheduler path: attention groups scaled, Mamba not, and no shared resolver.
SCHEDULER_027 = """
def resolve_kv_cache_block_sizes(kv_cache_config, vllm_config):
    cache_config = vllm_config.cache_config
    dcp = vllm_config.parallel_config.decode_context_parallel_size
    groups = kv_cache_config.kv_cache_groups
    if len(groups) <= 1:
        bs = cache_config.block_size * dcp
        return bs, bs
    group_block_sizes = [
        g.kv_cache_spec.block_size * dcp if isinstance(g.kv_cache_spec, AttentionSpec) else g.kv_cache_spec.block_size
        for g in groups
    ]
    return max(group_block_sizes), min(group_block_sizes)
"""

# 0.27.1's coordinator hands every manager the DCP size; the manager scales its own block size by it.
COORDINATOR_RAW = """
class KVCacheCoordinator:
    def __init__(self, kv_cache_config, dcp_world_size):
        self.kv_cache_config = kv_cache_config
        self.single_type_managers = tuple(
            get_manager_for_kv_cache_spec(
                kv_cache_spec=kv_cache_group.kv_cache_spec,
                dcp_world_size=dcp_world_size,
            )
            for kv_cache_group in kv_cache_config.kv_cache_groups
        )
"""

COORDINATOR_PER_KIND = COORDINATOR_RAW.replace(
    "dcp_world_size=dcp_world_size,",
    "dcp_world_size=dcp_world_size if isinstance(kv_cache_group.kv_cache_spec, AttentionSpec) else 1,",
)

MANAGER = """
class SingleTypeKVCacheManager:
    def __init__(self, kv_cache_spec, dcp_world_size):
        self.block_size = kv_cache_spec.block_size
        if dcp_world_size > 1:
            self.block_size *= dcp_world_size


def get_manager_for_kv_cache_spec(kv_cache_spec, **kwargs):
    return SingleTypeKVCacheManager(kv_cache_spec, **kwargs)
"""

# A worker-side path that sizes every group as the managers allocate it (Mamba scaled too).
RUNNER = """
class GPUModelRunner:
    def initialize_kv_cache(self, kv_cache_config):
        return [g.kv_cache_spec.block_size * self.dcp_size for g in kv_cache_config.kv_cache_groups]
"""
RUNNER_PATH = "vllm/v1/worker/gpu/model_runner.py"


def _tree_027(root: Path, coordinator: str = COORDINATOR_RAW) -> Path:
    interface = INTERFACE_029.replace(
        "def iter_layer_specs", "def unused_iter_layer_specs"
    )  # 0.27.1 has no iter_layer_specs either
    return make_tree(
        root,
        {
            "vllm/v1/kv_cache_interface.py": interface,
            KV_CACHE_UTILS: SCHEDULER_027,
            COORDINATOR: coordinator,
            MANAGERS: MANAGER,
            RUNNER_PATH: RUNNER,
        },
    )


def _findings(root: Path, path: str):
    result = scan([root / path], Config(), None, [], jobs=1)
    return [f for r in result.files for f in r.findings]


def test_without_a_resolver_the_managers_allocation_is_the_yardstick(tmp_path):
    analysis = analyse(_tree_027(tmp_path))
    assert analysis.allocator == "vllm.v1.core.single_type_kv_cache_manager:SingleTypeKVCacheManager.__init__"
    paths = {d.qualname: d for d in analysis.divergences if isinstance(d, PathDivergence)}
    # The runner scales Mamba as the managers do: what vLLM allocates, no divergence.
    assert "GPUModelRunner.initialize_kv_cache" not in paths
    # The manager against the scheduler's path for several groups: the defect, with what it is handed.
    manager = paths["SingleTypeKVCacheManager.__init__"]
    assert manager.kind == "MambaSpec" and manager.tokens == "32" and manager.expected_tokens == "16"
    assert manager.handed_by == ("dcp_world_size", "kv_cache_coordinator.py:7")
    kv103 = next(f for f in sizing_findings(analysis, all_rules()) if f.qualname == "SingleTypeKVCacheManager.__init__")
    assert kv103.severity is Severity.ERROR
    assert "the coordinator hands each manager `dcp_world_size` (kv_cache_coordinator.py:7)" in kv103.message


def test_hand_written_scaling_that_matches_the_managers_is_no_error(tmp_path):
    root = _tree_027(tmp_path)
    findings = [f for f in _findings(root, RUNNER_PATH) if f.code == "KV102"]
    assert [f.severity for f in findings] == [Severity.WARNING]
    assert "restates `SingleTypeKVCacheManager.__init__` by hand" in findings[0].message
    assert "size it as the KV cache managers allocate" in findings[0].message


def test_managers_that_agree_with_the_scheduler_leave_the_runner_the_divergence(tmp_path):
    analysis = analyse(_tree_027(tmp_path, COORDINATOR_PER_KIND))
    paths = {d.qualname: d for d in analysis.divergences if isinstance(d, PathDivergence)}
    assert "SingleTypeKVCacheManager.__init__" not in paths
    runner = paths["GPUModelRunner.initialize_kv_cache"]
    assert runner.kind == "MambaSpec" and runner.tokens == "32" and runner.expected_tokens == "16"


# 0.29.0's hybrid coordinator: under DCP every group must be full attention or Mamba.
HYBRID_CHECK = """
class HybridKVCacheCoordinator:
    def __init__(self, kv_cache_config, dcp_world_size):
        if dcp_world_size > 1:
            for g in kv_cache_config.kv_cache_groups:
                assert isinstance(g.kv_cache_spec, (FullAttentionSpec, MambaSpec)), "DCP: full and Mamba only"
"""

INTERFACE_WITH_CHUNKED = INTERFACE_029.replace(
    "class MambaSpec(KVCacheSpec):",
    "class ChunkedLocalAttentionSpec(AttentionSpec):\n    pass\n\nclass MambaSpec(KVCacheSpec):",
)


def _predicate_tree(root: Path, coordinator: str | None) -> Path:
    files = {"vllm/v1/kv_cache_interface.py": INTERFACE_WITH_CHUNKED, KV_CACHE_UTILS: RESOLVER_029}
    if coordinator is not None:
        files[COORDINATOR] = coordinator
    return make_tree(root, files)


def test_kinds_the_coordinator_refuses_under_dcp_are_no_counterexample(tmp_path):
    analysis = analyse(_predicate_tree(tmp_path, HYBRID_CHECK))
    refused = {k.label: k.rejected_under_dcp for k in analysis.kinds}
    assert refused["ChunkedLocalAttentionSpec"] == (
        "HybridKVCacheCoordinator.__init__ asserts `isinstance(g.kv_cache_spec, (FullAttentionSpec, MambaSpec))` "
        "for every group when DCP > 1"
    )
    assert refused["FullAttentionSpec"] is None and refused["MambaSpec"] is None
    predicate = next(d for d in analysis.divergences if isinstance(d, PredicateDivergence))
    assert predicate.rejected_under_dcp  # every kind it differs for is refused: a warning
    kv105 = next(f for f in sizing_findings(analysis, all_rules()) if f.code == "KV105")
    assert kv105.severity is Severity.WARNING


def test_without_the_coordinator_check_the_same_predicate_is_an_error(tmp_path):
    analysis = analyse(_predicate_tree(tmp_path, None))
    kv105 = next(f for f in sizing_findings(analysis, all_rules()) if f.code == "KV105")
    assert kv105.severity is Severity.ERROR


# -- the kinds a check's or a site's value serves, and checks no user meets as a defect (kvlint.analysis) --

import libcst as cst  # noqa: E402

from kvlint.analysis.cst_walk import parent_map, preorder  # noqa: E402
from kvlint.analysis.deliberate import benchmark_only, fail_closed  # noqa: E402
from kvlint.analysis.value_uses import index_tests, single_group_binding, use_test  # noqa: E402


def _parsed(source: str):
    module = cst.parse_module(source)
    parents = parent_map(module)
    return module, parents.get


def _first(module, kind, test=lambda n: True):
    return next(n for n in preorder(module) if isinstance(n, kind) and test(n))


def _isinstance_call(module):
    return _first(module, cst.Call, lambda n: isinstance(n.func, cst.Name) and n.func.value == "isinstance")


FAIL_CLOSED = '''
def spec_certifiable(spec):
    """Conservative static mirror of the per-layer checks."""
    if not isinstance(spec, AttentionSpec):
        return False
    return True
'''


def test_a_conservative_refusal_is_a_deliberate_fail_closed_check():
    module, parent = _parsed(FAIL_CLOSED)
    words = fail_closed(_isinstance_call(module), parent, _first(module, cst.FunctionDef))
    assert words == "Conservative static mirror of the per-layer checks."


def test_a_check_that_lets_a_container_through_is_not_fail_closed():
    source = FAIL_CLOSED.replace("if not isinstance", "if isinstance")
    module, parent = _parsed(source)
    assert fail_closed(_isinstance_call(module), parent, _first(module, cst.FunctionDef)) is None


def test_a_refusal_the_code_does_not_call_deliberate_is_not_fail_closed():
    source = FAIL_CLOSED.replace("Conservative static mirror", "Mirror")
    module, parent = _parsed(source)
    assert fail_closed(_isinstance_call(module), parent, _first(module, cst.FunctionDef)) is None


def test_a_module_that_exists_for_benchmarks_says_so_in_its_docstring():
    source = '"""DecodeBenchConnector: fills the KV cache with dummy values.\n\nUse it for benchmarking."""\n'
    source += "def fill(spec):\n    return isinstance(spec, AttentionSpec)\n"
    module, parent = _parsed(source)
    assert benchmark_only(module, _isinstance_call(module), parent) == "Use it for benchmarking."
    plain, plain_parent = _parsed(source.replace("for benchmarking", "in production"))
    assert benchmark_only(plain, _isinstance_call(plain), plain_parent) is None


def test_a_single_group_binding_is_none_with_several_groups():
    source = (
        "def f(kv_cache_config):\n"
        "    single = kv_cache_config.kv_cache_groups[0].kv_cache_spec if len(kv_cache_config.kv_cache_groups) == 1"
        " else None\n"
        "    return isinstance(single, FullAttentionSpec)\n"
    )
    module, _ = _parsed(source)
    function = _first(module, cst.FunctionDef)
    assert single_group_binding("single", function)
    other, _ = _parsed(source.replace("== 1", ">= 1"))
    assert not single_group_binding("single", _first(other, cst.FunctionDef))


def test_a_group_index_an_isinstance_test_chose_narrows_the_kinds():
    source = (
        "def f(self, groups, dcp):\n"
        "    self.fa_gidx = -1\n"
        "    for i, g in enumerate(groups):\n"
        "        if isinstance(g.kv_cache_spec, FullAttentionSpec):\n"
        "            self.fa_gidx = i\n"
        "    return groups[self.fa_gidx].kv_cache_spec.block_size * dcp\n"
    )
    module, _ = _parsed(source)
    spec = _first(
        module, cst.Attribute, lambda n: n.attr.value == "kv_cache_spec" and isinstance(n.value, cst.Subscript)
    )
    tests = index_tests(spec, _first(module, cst.FunctionDef))
    assert [cst.Module([]).code_for_node(t) for t in tests] == ["isinstance(g.kv_cache_spec, FullAttentionSpec)"]
    chosen_otherwise, _ = _parsed(
        source.replace("self.fa_gidx = i", "self.fa_gidx = pick(i)").replace(
            "            self.fa_gidx = pick(i)", "            pass\n    self.fa_gidx = pick(0)"
        )
    )
    spec = _first(
        chosen_otherwise,
        cst.Attribute,
        lambda n: n.attr.value == "kv_cache_spec" and isinstance(n.value, cst.Subscript),
    )
    assert index_tests(spec, _first(chosen_otherwise, cst.FunctionDef)) == []


def test_a_value_only_some_branches_read_serves_only_their_kinds():
    source = (
        "def f(groups, dcp):\n"
        "    for g in groups:\n"
        "        spec = g.kv_cache_spec\n"
        "        block_size = spec.block_size * dcp\n"
        "        if isinstance(spec, MambaSpec):\n"
        "            target += 2\n"
        "        elif isinstance(spec, SlidingWindowSpec):\n"
        "            target += spec.sliding_window // block_size\n"
    )
    module, parent = _parsed(source)
    product = _first(module, cst.BinaryOperation, lambda n: isinstance(n.operator, cst.Multiply))
    test = use_test(product, parent)
    assert (
        cst.Module([]).code_for_node(test) == "not isinstance(spec, MambaSpec) and isinstance(spec, SlidingWindowSpec)"
    )
    read_after, parent_after = _parsed(source + "        use(block_size)\n")
    product = _first(read_after, cst.BinaryOperation, lambda n: isinstance(n.operator, cst.Multiply))
    assert use_test(product, parent_after) is None


# 0.27.1's managers: the tree maps each spec kind to a manager class, and the Mamba manager resets the block
# size its base scaled (vLLM 0.27.1 single_type_kv_cache_manager.py:1263).
MANAGERS_PER_KIND = (
    MANAGER.replace(
        "return SingleTypeKVCacheManager(kv_cache_spec, **kwargs)",
        "return spec_manager_map[type(kv_cache_spec)](kv_cache_spec, **kwargs)",
    )
    + """

class FullAttentionManager(SingleTypeKVCacheManager):
    pass


class MambaManager(SingleTypeKVCacheManager):
    def __init__(self, kv_cache_spec, **kwargs):
        super().__init__(kv_cache_spec, **kwargs)
        self.block_size = kv_cache_spec.block_size


spec_manager_map = {FullAttentionSpec: FullAttentionManager, MambaSpec: MambaManager}
"""
)

# The same mapping as 0.27.1 writes it: a registry the factory looks the manager class up in.
MANAGERS_REGISTERED = MANAGERS_PER_KIND.replace(
    "spec_manager_map = {FullAttentionSpec: FullAttentionManager, MambaSpec: MambaManager}",
    "def register_all_kvcache_specs():\n"
    "    KVCacheSpecRegistry.register(FullAttentionSpec, FullAttentionManager, uniform_type_base_spec=FullAttentionSpec)\n"
    "    KVCacheSpecRegistry.register(MambaSpec, MambaManager, uniform_type_base_spec=MambaSpec)\n",
)


def _tree_with_managers(root: Path, managers: str) -> Path:
    root = _tree_027(root)
    (root / MANAGERS).write_text(managers)
    return root


def test_a_manager_subclass_that_resets_the_block_size_allocates_it_unscaled(tmp_path):
    for index, managers in enumerate((MANAGERS_PER_KIND, MANAGERS_REGISTERED)):
        analysis = analyse(_tree_with_managers(tmp_path / str(index), managers))
        paths = {d.qualname: d for d in analysis.divergences if isinstance(d, PathDivergence)}
        # The Mamba manager allocates what the scheduler sizes: the managers are no defect ...
        assert "SingleTypeKVCacheManager.__init__" not in paths, managers
        # ... and the runner that scales Mamba as the base manager would is the one that disagrees.
        runner = paths["GPUModelRunner.initialize_kv_cache"]
        assert runner.kind == "MambaSpec" and runner.tokens == "32" and runner.expected_tokens == "16"
        assert runner.scheduler.endswith(":MambaManager.__init__")  # KV103's yardstick: the subclass allocates 16
        # The finding names the manager that allocates 16 (the subclass), not the base that would give 32.
        [kv102] = [f for f in _findings(tmp_path / str(index), RUNNER_PATH) if f.code == "KV102"]
        assert "a MambaSpec group at DCP=2 where `MambaManager.__init__` gives 16" in kv102.message, kv102.message


def test_a_subclass_override_that_keeps_the_scaling_changes_nothing(tmp_path):
    scaled = MANAGERS_PER_KIND.replace(
        "self.block_size = kv_cache_spec.block_size\n\n\nspec",
        "self.block_size = kv_cache_spec.block_size * 2\n\n\nspec",
    )
    assert scaled != MANAGERS_PER_KIND
    analysis = analyse(_tree_with_managers(tmp_path, scaled))
    manager = next(d for d in analysis.divergences if d.qualname == "SingleTypeKVCacheManager.__init__")
    assert manager.kind == "MambaSpec" and manager.tokens == "32"


# Every release's Mamba manager: its cache lookup (run with prefix caching, on by default) refuses DCP > 1.
MAMBA_MANAGER = """
class MambaManager(SingleTypeKVCacheManager):
    @classmethod
    def find_longest_cache_hit(cls, block_hashes, kv_cache_spec, dcp_world_size=1):
        assert isinstance(kv_cache_spec, MambaSpec), "MambaManager can only be used for mamba groups"
        assert dcp_world_size == 1, "DCP not support mamba now."
        return [], 0
"""

LOOKUP = """

    def find_longest_cache_hit(self, block_hashes):
        return self.single_type_managers[0].find_longest_cache_hit(block_hashes, self.spec, self.dcp_world_size)
"""


def test_a_kind_whose_manager_asserts_dcp_one_is_no_counterexample(tmp_path):
    root = _tree_027(tmp_path, COORDINATOR_RAW + LOOKUP)
    (root / MANAGERS).write_text(MANAGER + MAMBA_MANAGER)
    analysis = analyse(root)
    refused = {k.label: k.rejected_under_dcp for k in analysis.kinds}
    assert refused["MambaSpec"] == (
        "MambaManager.find_longest_cache_hit asserts `dcp_world_size == 1` for a MambaSpec group"
    )
    assert refused["FullAttentionSpec"] is None
    kv103 = next(f for f in sizing_findings(analysis, all_rules()) if f.qualname == "SingleTypeKVCacheManager.__init__")
    assert kv103.severity is Severity.WARNING
    assert "MambaManager.find_longest_cache_hit asserts `dcp_world_size == 1`" in kv103.message


def test_an_uncalled_manager_method_refuses_nothing(tmp_path):
    root = _tree_027(tmp_path)
    (root / MANAGERS).write_text(MANAGER + MAMBA_MANAGER)
    refused = {k.label: k.rejected_under_dcp for k in analyse(root).kinds}
    assert refused["MambaSpec"] is None


# A lookup given the manager's own DCP size (vLLM 0.29.0 and later), not the coordinator's.
LOOKUP_HELD = """

    def find_longest_cache_hit(self, block_hashes):
        manager = self.single_type_managers[0]
        return manager.find_longest_cache_hit(block_hashes, self.spec, dcp_world_size=manager.dcp_world_size)
"""
# vLLM 0.34.0's manager: it keeps the DCP size it is handed only for a sharded spec.
MANAGER_KEEPS_ONE = MANAGER.replace(
    "        self.block_size = kv_cache_spec.block_size\n",
    "        self.block_size = kv_cache_spec.block_size\n"
    "        self.dcp_world_size = dcp_world_size if isinstance(kv_cache_spec, AttentionSpec) else 1\n",
)


def _refusals(root: Path, coordinator: str, managers: str) -> dict:
    root = _tree_027(root, coordinator)
    (root / MANAGERS).write_text(managers + MAMBA_MANAGER)
    return {k.label: k.rejected_under_dcp for k in analyse(root).kinds}


def test_a_manager_the_coordinator_hands_dcp_one_refuses_nothing(tmp_path):
    # 0.29.0: the coordinator hands a Mamba group's manager a per-kind size of 1, and the lookup passes it on.
    refused = _refusals(tmp_path, COORDINATOR_PER_KIND + LOOKUP_HELD, MANAGER)
    assert refused["MambaSpec"] is None
    # Handed the process's size, the same lookup refuses a Mamba group.
    refused = _refusals(tmp_path / "raw", COORDINATOR_RAW + LOOKUP_HELD, MANAGER)
    assert "MambaManager.find_longest_cache_hit asserts" in refused["MambaSpec"]


def test_a_manager_that_keeps_dcp_one_for_its_kind_refuses_nothing(tmp_path):
    # 0.34.0: the coordinator hands every manager the process's size; the manager keeps 1 for an unsharded spec.
    assert MANAGER_KEEPS_ONE != MANAGER
    refused = _refusals(tmp_path, COORDINATOR_RAW + LOOKUP_HELD, MANAGER_KEEPS_ONE)
    assert refused["MambaSpec"] is None
    assert refused["FullAttentionSpec"] is None


def test_a_lookup_given_the_coordinators_own_size_still_refuses(tmp_path):
    # The lookup passes the coordinator's copy of the process's size: what the manager keeps does not matter.
    coordinator = COORDINATOR_RAW.replace(
        "        self.kv_cache_config = kv_cache_config\n",
        "        self.kv_cache_config = kv_cache_config\n        self.dcp_world_size = dcp_world_size\n",
    )
    lookup = LOOKUP_HELD.replace("dcp_world_size=manager.dcp_world_size", "dcp_world_size=self.dcp_world_size")
    refused = _refusals(tmp_path, coordinator + lookup, MANAGER_KEEPS_ONE)
    assert "MambaManager.find_longest_cache_hit asserts" in refused["MambaSpec"]
    # Copied from a manager instead (0.29.0's unitary coordinator), the size is the manager's own again.
    copied = coordinator.replace(
        "self.dcp_world_size = dcp_world_size\n", "self.dcp_world_size = self.single_type_managers[0].dcp_world_size\n"
    )
    refused = _refusals(tmp_path / "copied", copied + lookup, MANAGER_KEEPS_ONE)
    assert refused["MambaSpec"] is None


def test_a_constructor_that_keeps_the_process_size_makes_the_refusal_stand(tmp_path):
    # One constructor of the managers' module keeps the size it is handed for any kind: that manager can see DCP > 1.
    keeps_it = MANAGER_KEEPS_ONE + (
        "\n\nclass RawManager(SingleTypeKVCacheManager):\n"
        "    def __init__(self, kv_cache_spec, dcp_world_size):\n"
        "        self.dcp_world_size = dcp_world_size\n"
    )
    refused = _refusals(tmp_path, COORDINATOR_RAW + LOOKUP_HELD, keeps_it)
    assert "MambaManager.find_longest_cache_hit asserts" in refused["MambaSpec"]


# vLLM 0.27.1: the hybrid coordinator's lookup passes 1 for every group but full attention; the coordinator of
# one group passes the process's size.
HYBRID_LOOKUP = """

    def find_longest_cache_hit(self, block_hashes, spec):
        return self.managers[0].find_longest_cache_hit(
            block_hashes, spec, dcp_world_size=self.dcp_world_size if isinstance(spec, FullAttentionSpec) else 1
        )


class UnitaryCoordinator:
    def __init__(self, dcp_world_size):
        self.dcp_world_size = dcp_world_size

    def find_longest_cache_hit(self, block_hashes):
        return self.managers[0].find_longest_cache_hit(block_hashes, self.spec, dcp_world_size=self.dcp_world_size)
"""


def test_a_kind_one_lookup_passes_dcp_one_is_accepted_and_refused_only_on_the_other_s_code(tmp_path):
    root = _tree_027(tmp_path, COORDINATOR_RAW + HYBRID_LOOKUP)
    (root / MANAGERS).write_text(MANAGER + MAMBA_MANAGER)
    kinds = {k.label: k for k in analyse(root).kinds}
    mamba = kinds["MambaSpec"]
    # A Mamba group beside attention groups is accepted (the hybrid lookup passes it 1) ...
    assert mamba.rejected_under_dcp is None
    # ... and refused alone, on the code of the coordinator of one group.
    why = "MambaManager.find_longest_cache_hit asserts `dcp_world_size == 1` for a MambaSpec group"
    assert mamba.rejected_in == (("UnitaryCoordinator", why),)
    assert mamba.rejection_for(["UnitaryCoordinator"]) == why and mamba.rejection_for(["GPUModelRunner"]) is None
    # Full attention is passed the process's size by both: the assert is not about it.
    assert kinds["FullAttentionSpec"].rejected_under_dcp is None and kinds["FullAttentionSpec"].rejected_in == ()


# The coordinator of one group scales its own block size by what its callers pass (vLLM 0.27.1's
# `UnitaryKVCacheCoordinator.__init__`): a Mamba group would get 32, but alone under DCP its lookup refuses it.
UNITARY_SCALES = HYBRID_LOOKUP.replace(
    "        self.dcp_world_size = dcp_world_size\n",
    "        self.dcp_world_size = dcp_world_size\n"
    "        self.block_size = self.spec.block_size\n"
    "        if dcp_world_size > 1:\n"
    "            self.block_size *= dcp_world_size\n",
)


# The same scaling in a class whose code hands the lookup nothing.
OTHER_SCALES = (
    HYBRID_LOOKUP
    + """

class OtherCoordinator:
    def __init__(self, dcp_world_size):
        self.block_size = self.spec.block_size
        if dcp_world_size > 1:
            self.block_size *= dcp_world_size
"""
)


def test_a_kind_refused_on_the_scaling_code_s_own_class_is_no_counterexample_there(tmp_path):
    assert UNITARY_SCALES != HYBRID_LOOKUP
    for name, refused_here in (("unitary", True), ("other", False)):
        coordinator = UNITARY_SCALES if refused_here else OTHER_SCALES
        root = _tree_027(tmp_path / name, COORDINATOR_PER_KIND + coordinator)
        (root / MANAGERS).write_text(MANAGER + MAMBA_MANAGER)
        [finding] = [f for f in _findings(root, COORDINATOR) if f.code == "KV102" and f.line > 20]
        # Elsewhere a Mamba group is the would-be counterexample; on the refusing class' code it is none.
        assert ("a MambaSpec group gets 32" in finding.message) is not refused_here, finding.message
        assert ("agrees with it for every kind that reaches it" in finding.message) is refused_here


def test_a_divergence_in_runner_code_a_setting_selects_is_a_warning_that_names_the_setting(tmp_path):
    from tests.test_runner_reach import WORKER

    root = _tree_with_managers(tmp_path, MANAGERS_PER_KIND)
    errors = [f for f in _findings(root, RUNNER_PATH) if f.severity is Severity.ERROR]
    assert errors  # the runner scales Mamba as the base manager would; the Mamba manager does not
    (root / "vllm/v1/worker/gpu_worker.py").write_bytes(WORKER)
    findings = _findings(root, RUNNER_PATH)
    assert findings and all(f.severity is Severity.WARNING for f in findings)
    assert any("it is selected by `self.use_v2_model_runner` (gpu_worker.py:4)" in f.message for f in findings)


# 0.29.0's managers: each constructor scales by the DCP size the coordinator hands it, and the coordinator hands
# each group's manager a per-kind size (`dcp_world_size_for_kv_cache_spec`: 1 for Mamba and sliding window).
COORDINATOR_029 = COORDINATOR_RAW.replace(
    "dcp_world_size=dcp_world_size,",
    "dcp_world_size=dcp_world_size_for_kv_cache_spec(kv_cache_group.kv_cache_spec, dcp_world_size),",
)


def _tree_029_managers(root: Path, coordinator: str) -> Path:
    return make_tree(
        root,
        {
            "vllm/v1/kv_cache_interface.py": INTERFACE_029,
            KV_CACHE_UTILS: RESOLVER_029,
            COORDINATOR: coordinator,
            MANAGERS: MANAGER,
        },
    )


def test_a_managers_dcp_size_is_what_the_coordinator_hands_it_per_kind(tmp_path):
    root = _tree_029_managers(tmp_path, COORDINATOR_029)
    [kv102] = [f for f in _findings(root, MANAGERS) if f.code == "KV102"]
    assert kv102.severity is Severity.WARNING
    assert "`dcp_world_size` is what the coordinator hands each manager for its kind" in kv102.message
    assert "kv_cache_coordinator.py:" in kv102.message
    # Mamba gets 1 from the coordinator, as from the resolver: the kinds that differ are those vLLM refuses.
    assert "MambaSpec" not in kv102.message and "comes from the callers" not in kv102.message


def test_a_coordinator_handing_every_manager_the_dcp_size_makes_mamba_the_counterexample(tmp_path):
    root = _tree_029_managers(tmp_path, COORDINATOR_RAW)
    [kv102] = [f for f in _findings(root, MANAGERS) if f.code == "KV102"]
    assert "`dcp_world_size` is what the coordinator hands each manager for its kind" in kv102.message
    assert kv102.severity is Severity.ERROR
    assert "gives 32 tokens per block for a MambaSpec group at DCP=2" in kv102.message, kv102.message


MANAGER_WITH_A_CLASSMETHOD = MANAGER.replace(
    "            self.block_size *= dcp_world_size\n",
    "            self.block_size *= dcp_world_size\n"
    "        self.dcp_world_size = dcp_world_size\n"
    "        self.mask = self.span(kv_cache_spec, dcp_world_size=self.dcp_world_size)\n"
    "\n"
    "    @classmethod\n"
    "    def span(cls, kv_cache_spec, dcp_world_size=1):\n"
    "        return kv_cache_spec.block_size * dcp_world_size\n",
)


def test_a_manager_method_other_modules_may_call_is_not_sized_by_what_the_coordinator_hands(tmp_path):
    # 0.30.0's `reachable_block_mask`: the manager passes its own size, connectors call it with theirs.
    root = _tree_029_managers(tmp_path, COORDINATOR_029)
    (root / MANAGERS).write_text(MANAGER_WITH_A_CLASSMETHOD)
    found = {f.line: f for f in _findings(root, MANAGERS) if f.code == "KV102"}
    source = MANAGER_WITH_A_CLASSMETHOD.splitlines()
    [span] = [f for line, f in found.items() if "return kv_cache_spec.block_size" in source[line - 1]]
    assert "what the coordinator hands" not in span.message, span.message
    [init] = [f for line, f in found.items() if "self.block_size *=" in source[line - 1]]
    assert "what the coordinator hands each manager for its kind" in init.message
