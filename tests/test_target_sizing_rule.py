"""The sizing rule of the release a plugin targets decides its KV103 and KV105 (issue 28), offline.

Three miniature releases, each with one rule: 0.29.0 scales every attention spec by class (its resolver's
`isinstance(…, AttentionSpec)`), 0.33.0 by the spec's `dcp_sharded` flag (sliding window not sharded), 0.17.0
has no resolver and its KV cache managers allocate what the coordinator hands them (every kind scaled). One
connector file is judged against each, as the release would judge a module of its own.
"""

from __future__ import annotations

import json

import pytest

from kvlint.errors import ReleaseError
from tests.kvlint_runner import run_kvlint
from tests.mini_vllm import write_tree

CLASSES = """
    class KVCacheSpec:
        block_size: int
        dcp_sharded: bool = False

    class AttentionSpec(KVCacheSpec):
        dcp_sharded: bool = True

    class FullAttentionSpec(AttentionSpec):
        pass

    class SlidingWindowSpec(AttentionSpec):
        dcp_sharded: bool = {sliding}

    class MambaSpec(KVCacheSpec):
        pass
    """

BY_CLASS = """
    from vllm.v1.kv_cache_interface import AttentionSpec

    def resolve_dcp_kv_block_size(spec, dcp_world_size):
        if isinstance(spec, AttentionSpec):
            return spec.block_size * dcp_world_size
        return spec.block_size

    def resolve_kv_cache_block_sizes(kv_cache_config, vllm_config):
        dcp = vllm_config.parallel_config.decode_context_parallel_size
        return [resolve_dcp_kv_block_size(g.kv_cache_spec, dcp) for g in kv_cache_config.kv_cache_groups]
    """

BY_FLAG = BY_CLASS.replace("isinstance(spec, AttentionSpec)", "spec.dcp_sharded")

# Before the shared resolver: the scheduler's own path, and managers that scale what the coordinator hands them.
OLD_UTILS = """
    def resolve_kv_cache_block_sizes(kv_cache_config, vllm_config):
        dcp = vllm_config.parallel_config.decode_context_parallel_size
        return [g.kv_cache_spec.block_size * dcp for g in kv_cache_config.kv_cache_groups]
    """
OLD_MANAGERS = {
    "vllm/v1/core/kv_cache_coordinator.py": """
        class KVCacheCoordinator:
            def __init__(self, kv_cache_config, dcp_world_size):
                self.managers = [
                    get_manager_for_kv_cache_spec(kv_cache_spec=g.kv_cache_spec, dcp_world_size=dcp_world_size)
                    for g in kv_cache_config.kv_cache_groups
                ]
        """,
    "vllm/v1/core/single_type_kv_cache_manager.py": """
        class SingleTypeKVCacheManager:
            def __init__(self, kv_cache_spec, dcp_world_size):
                self.block_size = kv_cache_spec.block_size
                if dcp_world_size > 1:
                    self.block_size *= dcp_world_size

        def get_manager_for_kv_cache_spec(kv_cache_spec, **kwargs):
            return SingleTypeKVCacheManager(kv_cache_spec, **kwargs)
        """,
}

RELEASES = {
    "0.17.0": {"vllm/v1/kv_cache_interface.py": CLASSES.format(sliding="True"), **OLD_MANAGERS},
    "0.29.0": {"vllm/v1/kv_cache_interface.py": CLASSES.format(sliding="True")},
    "0.33.0": {"vllm/v1/kv_cache_interface.py": CLASSES.format(sliding="False")},
}
UTILS = {"0.17.0": OLD_UTILS, "0.29.0": BY_CLASS, "0.33.0": BY_FLAG}

# Scales every attention spec, by class: the 0.29.0 rule, not 0.33.0's (sliding window is not sharded there).
CONNECTOR = """
    from vllm.v1.kv_cache_interface import AttentionSpec


    def connector_dcp_factor(spec, dcp_world_size):
        if isinstance(spec, AttentionSpec):
            return dcp_world_size
        return 1


    def connector_block_sizes(kv_cache_config, vllm_config):
        dcp = vllm_config.parallel_config.decode_context_parallel_size
        return [g.kv_cache_spec.block_size * connector_dcp_factor(g.kv_cache_spec, dcp) for g in kv_cache_config.kv_cache_groups]
    """


@pytest.fixture
def releases(tmp_path, monkeypatch):
    def release_sources(version, quiet=False, cache_dir=None):
        if version not in RELEASES:
            raise ReleaseError(f"the index lists no vllm {version}")
        tree = {**RELEASES[version], "vllm/v1/core/kv_cache_utils.py": UTILS[version]}
        return write_tree(tmp_path / "releases" / f"vllm-{version}", tree)

    monkeypatch.setattr("kvlint.scan.releases.release_sources", release_sources)
    return tmp_path


def findings_against(package, version: str) -> dict[str, dict]:
    completed = run_kvlint("check", "--no-cache", "--format", "json", "--vllm-release", version, ".", cwd=package)
    assert completed.returncode in (0, 1), completed.stderr
    return {f["code"]: f for f in json.loads(completed.stdout) if f["code"] in ("KV103", "KV105")}


@pytest.fixture
def connector(releases):
    return write_tree(releases / "pkg", {"connector/__init__.py": "", "connector/sizing.py": CONNECTOR})


def test_the_targets_resolver_by_class_agrees_with_a_connector_its_flag_rule_does_not(connector):
    assert findings_against(connector, "0.29.0") == {}
    found = findings_against(connector, "0.33.0")
    assert set(found) == {"KV103", "KV105"}
    assert "SlidingWindowSpec (dcp, resolver 1)" in found["KV105"]["message"]
    assert found["KV105"]["line"] == 4 and found["KV103"]["line"] == 10
    assert "SlidingWindowSpec" in found["KV103"]["message"]


def test_a_target_without_the_resolver_judges_by_what_its_managers_allocate(connector):
    found = findings_against(connector, "0.17.0")
    # No resolver to compare a predicate with; the managers scale Mamba too, where the connector does not.
    assert set(found) == {"KV103"}
    assert "MambaSpec" in found["KV103"]["message"] and "SingleTypeKVCacheManager.__init__" in found["KV103"]["message"]


def test_a_release_changed_under_one_root_is_read_again_for_the_plugins_analysis(connector, monkeypatch):
    # The rule behind a helper of the resolver: the release's index differs only in its sizing analysis.
    rule = BY_CLASS.replace("isinstance(spec, AttentionSpec)", "_sharded(spec, dcp_world_size)")
    helper = rule + "\n    def _sharded(spec, dcp_world_size):\n        return isinstance(spec, {cls})\n"
    monkeypatch.setitem(UTILS, "0.29.0", helper.format(cls="AttentionSpec"))
    cache = str(connector.parent / "cache")
    arguments = ("check", "--cache-dir", cache, "--format", "json", "--vllm-release", "0.29.0", ".")
    sizing = ("KV103", "KV105")
    assert [f for f in json.loads(run_kvlint(*arguments, cwd=connector).stdout) if f["code"] in sizing] == []
    monkeypatch.setitem(UTILS, "0.29.0", helper.format(cls="FullAttentionSpec"))
    found = json.loads(run_kvlint(*arguments, cwd=connector).stdout)
    assert {f["code"] for f in found if f["code"] in sizing} == {"KV103", "KV105"}


def test_the_plugins_own_spec_class_is_a_kind_judged_by_the_targets_rule(releases):
    own = """
        from vllm.v1.kv_cache_interface import MambaSpec, SlidingWindowSpec


        class NpuSlidingSpec(SlidingWindowSpec):
            pass


        def npu_dcp_factor(spec, dcp_world_size):
            if isinstance(spec, NpuSlidingSpec):
                return dcp_world_size
            return 1 if isinstance(spec, (SlidingWindowSpec, MambaSpec)) else dcp_world_size
        """
    package = write_tree(releases / "npu", {"npu/__init__.py": "", "npu/sizing.py": own})
    # 0.33.0 does not shard sliding window, nor the plugin's class that inherits its flag.
    assert "NpuSlidingSpec (dcp, resolver 1)" in findings_against(package, "0.33.0")["KV105"]["message"]
    # 0.29.0 shards every attention spec: the plugin's class agrees, its sliding window rule does not.
    by_class = findings_against(package, "0.29.0")["KV105"]["message"]
    assert "SlidingWindowSpec (1, resolver dcp)" in by_class and "NpuSlidingSpec" not in by_class


# ------------------------------------------------------------------------------------------ `kvlint paths` of a plugin


def connector_column(document: dict) -> dict:
    return next(p for p in document["paths"] if p["function"] == "connector_dcp_factor")


def test_paths_of_a_plugin_show_its_paths_against_the_target_check_chooses(connector, monkeypatch):
    write_tree(connector, {"pyproject.toml": '[project]\nname = "c"\ndependencies = ["vllm==0.33.0"]\n'})
    pinned = run_kvlint("paths", "--format", "json", "connector", cwd=connector)
    assert pinned.returncode == 0, pinned.stderr
    assert "judging against vLLM 0.33.0, from the requirement `vllm==0.33.0`" in pinned.stderr.splitlines()[0]
    document = json.loads(pinned.stdout)
    roles = [(p["name"], p["role"]) for p in document["paths"]]
    assert roles[:2] == [
        ("vllm.v1.core.kv_cache_utils:resolve_kv_cache_block_sizes", "reference"),
        ("vllm.v1.core.kv_cache_utils:resolve_dcp_kv_block_size", "resolver"),
    ]
    sliding = [k["label"] for k in document["kinds"]].index("SlidingWindowSpec")
    column = connector_column(document)
    assert column["cells"][sliding] == "dcp" and column["differs"][sliding] and column["reported"][sliding]
    text = run_kvlint("paths", "connector", cwd=connector).stdout
    assert f"(paths relative to {connector}):" in text and " --> connector/sizing.py:4:1" in text
    # The option wins over the requirement, as in `check`: by class, the connector agrees.
    by_class = json.loads(
        run_kvlint("paths", "--format", "json", "--vllm-release", "0.29.0", "connector", cwd=connector).stdout
    )
    assert not any(connector_column(by_class)["differs"])
    # A range: a matrix per release, oldest first.
    monkeypatch.setattr("kvlint.scan.release_listing.listed_versions", lambda cache_dir, quiet=False: tuple(RELEASES))
    ranged = run_kvlint("paths", "--format", "json", "--vllm-release", ">=0.29,<0.34", "connector", cwd=connector)
    assert [connector_column(d)["differs"][sliding] for d in json.loads(ranged.stdout)] == [False, True]


def test_paths_of_a_plugin_without_a_target_is_one_line_exit_2(connector):
    completed = run_kvlint("paths", "connector", cwd=connector)
    assert completed.returncode == 2 and "--vllm-release VERSION" in completed.stderr
    assert len(completed.stderr.splitlines()) == 1
