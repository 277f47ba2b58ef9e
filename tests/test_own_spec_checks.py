"""KV101 on a plugin's own spec classes (issue 28, "its own spec subclasses join the hierarchy"): a check of a
group spec against `class NpuFullSpec(FullAttentionSpec)`, defined in another module of the package, is judged
as the same check of the `FullAttentionSpec` it derives from — the plugin's layers stand where vLLM builds
those, so the containers the target's census proves built are its counterexamples — and one of a class whose
target ancestor no built container holds stays quiet. Offline, against tests/plugin_packages.py's fake
releases (the DSA model's MLA and indexer layers, FullAttentionSpec's family, make one container)."""

from __future__ import annotations

import json

import pytest

from tests.kvlint_runner import run_kvlint
from tests.mini_vllm import write_tree
from tests.plugin_packages import install_fake_releases
from tests.test_plugin_roles import PYPROJECT, line_of

SPECS = """
    from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheSpec, MambaSpec


    class NpuFullSpec(FullAttentionSpec):
        pass


    class NpuPagedSpec(NpuFullSpec):
        pass


    class NpuMambaSpec(MambaSpec):
        pass


    class NpuOpaqueSpec(KVCacheSpec):
        pass
    """

WORKER = """
    from plugin.specs import NpuMambaSpec, NpuOpaqueSpec, NpuPagedSpec


    def paged_groups(kv_cache_config):
        return [g for g in kv_cache_config.kv_cache_groups if isinstance(g.kv_cache_spec, NpuPagedSpec)]


    def mamba_groups(kv_cache_config):
        return [m for m in kv_cache_config.kv_cache_groups if isinstance(m.kv_cache_spec, NpuMambaSpec)]


    def opaque_groups(kv_cache_config):
        # A container is a KVCacheSpec too: the class stands for no layer class of the target's
        return [o for o in kv_cache_config.kv_cache_groups if isinstance(o.kv_cache_spec, NpuOpaqueSpec)]
    """


@pytest.fixture
def fake_releases(tmp_path, monkeypatch) -> list[str]:
    return install_fake_releases(tmp_path, monkeypatch)


def test_a_check_of_the_plugins_own_spec_class_is_judged_as_its_vllm_ancestors(tmp_path, fake_releases):
    files = {"pyproject.toml": PYPROJECT, "plugin/__init__.py": "", "plugin/specs.py": SPECS, "plugin/w.py": WORKER}
    package = write_tree(tmp_path / "pkg", files)
    completed = run_kvlint("check", "--no-cache", "--format", "json", "--select", "KV101", ".", cwd=package)
    assert completed.returncode == 1, completed.stderr
    paged, mamba = json.loads(completed.stdout)  # nothing of NpuOpaqueSpec
    assert paged["line"] == line_of(WORKER, "NpuPagedSpec)]") and paged["severity"] == "error"
    assert "`NpuPagedSpec` judged as the `FullAttentionSpec` it derives from" in paged["message"], paged
    # The census's Mamba containers are only possible (mixed page sizes): a warning, as for MambaSpec itself.
    assert mamba["line"] == line_of(WORKER, "NpuMambaSpec)]") and mamba["severity"] == "warning"
