"""Roles in code outside the vLLM tree (issue 28, "Roles in plugin code"): a plugin's class that derives from
the target's scheduler or KV cache manager, a function it patches onto one, and a connector's scheduler-side
methods only ever receive the scheduler's flattened KV cache config, so a container check there is no finding;
a connector's worker-side methods and `__init__` (built for both roles), and a patch of a worker class, keep
theirs. Resolved through the TARGET release's classes (tests/plugin_packages.py's fake releases), offline."""

from __future__ import annotations

import json
import textwrap
from dataclasses import replace

import libcst as cst
import pytest

from kvlint.analysis.plugin_roles import FileRoles, TreeRoles, read_tree_roles
from kvlint.analysis.vocabulary import DEFAULT_SCHEDULER_ONLY_PATHS
from tests.kvlint_runner import run_kvlint
from tests.mini_vllm import write_tree
from tests.plugin_packages import ROLE_MODULES, install_fake_releases

PYPROJECT = """
    [project]
    name = "roles"
    version = "1.0"
    dependencies = ["vllm==0.29.0"]
    """

# Each check reads the groups of a KV cache config the method (or the class) was handed.
CHECK = "[g for g in {config}.kv_cache_groups if isinstance(g.kv_cache_spec, AttentionSpec)]"

CONNECTOR = f"""
    from vllm.distributed.kv_transfer.kv_connector.v1.offloading_connector import OffloadingConnector
    from vllm.v1.kv_cache_interface import AttentionSpec


    class PluginConnector(OffloadingConnector):
        def __init__(self, vllm_config, role, kv_cache_config=None):
            super().__init__(vllm_config, role, kv_cache_config)
            self.kv_cache_config = kv_cache_config
            self.both = {CHECK.format(config="kv_cache_config")}

        def register_kv_caches(self, kv_caches):
            return {CHECK.format(config="self.kv_cache_config")}

        def get_num_new_matched_tokens(self, request, num_computed_tokens):
            return len({CHECK.format(config="self.kv_cache_config")}), False

        def update_state_after_alloc(self, request, blocks, num_external_tokens):
            def attention():
                return {CHECK.format(config="self.kv_cache_config")}

            return attention()
    """

PLATFORM = f"""
    import vllm.v1.core.kv_cache_manager as managers
    from vllm.v1.core.sched.scheduler import Scheduler as Base
    from vllm.v1.kv_cache_interface import AttentionSpec
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner


    class NpuPolicy(Base):
        def __init__(self, vllm_config, kv_cache_config):
            self.groups = {CHECK.format(config="kv_cache_config")}


    class TunedNpuPolicy(NpuPolicy):
        def tune(self):
            return {CHECK.format(config="self.kv_cache_config")}


    def _allocate_slots(self, request, num_new_tokens):
        return {CHECK.format(config="self.kv_cache_config")}


    def _initialize_kv_cache(self, kv_cache_config):
        self.attention = {CHECK.format(config="kv_cache_config")}


    def patch():
        managers.KVCacheManager.allocate_slots = _allocate_slots
        setattr(GPUModelRunner, "initialize_kv_cache", _initialize_kv_cache)
    """


@pytest.fixture
def fake_releases(tmp_path, monkeypatch) -> list[str]:
    return install_fake_releases(tmp_path, monkeypatch)


def kv101_lines(tmp_path, module: str) -> dict[int, str]:
    package = write_tree(
        tmp_path / "pkg", {"pyproject.toml": PYPROJECT, "plugin/__init__.py": "", "plugin/m.py": module}
    )
    completed = run_kvlint("check", "--no-cache", "--format", "json", "--select", "KV101", ".", cwd=package)
    assert completed.returncode in (0, 1), completed.stderr
    return {f["line"]: f["severity"] for f in json.loads(completed.stdout)}


def line_of(module: str, text: str) -> int:
    lines = textwrap.dedent(module).lstrip("\n").splitlines()
    return next(number for number, line in enumerate(lines, 1) if text in line)


def test_a_connectors_scheduler_side_methods_are_quiet_and_its_worker_side_ones_reported(tmp_path, fake_releases):
    found = kv101_lines(tmp_path, CONNECTOR)
    # `__init__` runs for both roles and register_kv_caches on the worker: the worker's config, a container.
    assert line_of(CONNECTOR, "self.both =") in found
    assert line_of(CONNECTOR, "def register_kv_caches") + 1 in found
    # The base's scheduler-side methods (and what they define) run with role SCHEDULER: nothing to report.
    assert len(found) == 2, found


def test_a_platform_plugins_scheduler_subclass_and_patch_are_quiet_its_worker_patch_reported(tmp_path, fake_releases):
    found = kv101_lines(tmp_path, PLATFORM)
    # Only the function patched onto the model runner (a worker class) meets the worker's config.
    assert list(found) == [line_of(PLATFORM, "self.attention =")], found


def test_without_a_target_nothing_resolves_and_every_check_is_reported(tmp_path, fake_releases):
    package = write_tree(tmp_path / "pkg", {"plugin/m.py": PLATFORM})
    completed = run_kvlint("check", "--no-cache", "--format", "json", "--select", "KV101", ".", cwd=package)
    assert len(json.loads(completed.stdout)) == 4  # the built-in reference knows no scheduler classes


def test_the_target_trees_classes_are_read_with_their_derived_classes():
    texts = {path: textwrap.dedent(text).lstrip("\n").encode() for path, text in ROLE_MODULES.items()}
    texts["vllm/v1/core/sched/async_scheduler.py"] = b"class AsyncScheduler(\n    Scheduler,\n):\n    pass\n"
    roles = read_tree_roles(texts, DEFAULT_SCHEDULER_ONLY_PATHS)
    assert {"Scheduler", "AsyncScheduler", "KVCacheManager", "SchedulerInterface"} <= roles.scheduler_classes
    assert "GPUModelRunner" not in roles.scheduler_classes
    assert roles.connector_classes == {"KVConnectorBase_V1", "OffloadingConnector"}
    assert roles.scheduler_methods == {"get_num_new_matched_tokens", "update_state_after_alloc"}


def test_a_class_name_the_plugin_defines_itself_is_not_the_targets():
    module = cst.parse_module("class Scheduler:\n    pass\n\nclass Mine(Scheduler):\n    pass\n")
    roles = FileRoles(module, TreeRoles(scheduler_classes=frozenset({"Scheduler"})))
    assert not roles.is_scheduler_class(cst.Name("Mine"))  # its own Scheduler, not imported from vllm


# ------------------------------------------------------------------------------------------ the plugin's own spec classes

OWN_SPECS = """
    from vllm.v1.kv_cache_interface import AttentionSpec, FullAttentionSpec


    class NpuAttentionSpec(AttentionSpec):
        pass


    class NpuPagedSpec(NpuAttentionSpec):
        pass
    """

SCALING = """
    from vllm.v1.kv_cache_interface import FullAttentionSpec


    def npu_block_size(spec, dcp):
        return spec.block_size * (dcp if isinstance(spec, FullAttentionSpec) else 1)
    """


def test_the_plugins_own_spec_classes_are_kinds_the_scaling_is_judged_on(tmp_path, fake_releases):
    package = write_tree(
        tmp_path / "pkg",
        {"pyproject.toml": PYPROJECT, "plugin/specs.py": OWN_SPECS, "plugin/sizing.py": SCALING},
    )
    completed = run_kvlint("check", "--no-cache", "--format", "json", "--select", "KV102", ".", cwd=package)
    (finding,) = json.loads(completed.stdout)
    # The resolver scales every AttentionSpec; the gate only FullAttentionSpec: the plugin's own classes,
    # declared in another file of the package, are kinds it gets wrong.
    assert {"NpuAttentionSpec", "NpuPagedSpec"} <= set(finding["kinds"]), finding["kinds"]


def test_own_spec_classes_join_the_hierarchy_with_their_kinds_alone_and_in_a_container():
    from kvlint.analysis.hierarchy import builtin_hierarchy
    from kvlint.analysis.own_specs import class_headers, own_spec_bases, with_own_specs
    from kvlint.analysis.tree_index import TreeIndex

    headers = class_headers([textwrap.dedent(OWN_SPECS).encode(), b"class Unrelated(Base):\n    pass\n"])
    index = TreeIndex(
        root=None,
        hierarchy=builtin_hierarchy(),
        resolver_module="vllm.v1.core.kv_cache_utils",
        resolver_layer_classes=frozenset({"AttentionSpec"}),
    )
    index = replace(index, kinds=index.kind_table())  # a tree's kinds, as its sizing analysis gives them
    own = own_spec_bases(headers, index.hierarchy)
    assert own == {"NpuAttentionSpec": ("AttentionSpec",), "NpuPagedSpec": ("NpuAttentionSpec",)}
    extended = with_own_specs(index, own)
    assert extended.hierarchy.is_subclass("NpuPagedSpec", "AttentionSpec")
    rows = {row.label: row.reference for row in extended.kind_table().rows}
    assert rows["NpuPagedSpec"] == "dcp" and rows["UniformTypeKVCacheSpecs{NpuPagedSpec×2}"] == "dcp"


# ------------------------------------------------------------------------------------------ the release's index, kept


def test_a_releases_index_is_built_once_and_kept_beside_it_even_with_no_cache(tmp_path, fake_releases, monkeypatch):
    import kvlint.analysis.tree_index as tree_index

    built = []
    real = tree_index.build_tree_index
    monkeypatch.setattr(tree_index, "build_tree_index", lambda root, *a, **k: built.append(root) or real(root, *a, **k))
    first = kv101_lines(tmp_path / "one", CONNECTOR)
    second = kv101_lines(tmp_path / "two", CONNECTOR)  # another package, the same release
    assert first == second and len(built) == 1
    assert list((tmp_path / "results").glob("project-*-index.json"))  # beside releases/, signed like any index
