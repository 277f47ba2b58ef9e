"""Roles inherited across a plugin package's own modules (issue 28, "Roles in plugin code"): a class deriving
from a class another module of the package derives from the target's scheduler, KV cache manager or connector
base has that class's role, however it is imported (absolute, relative, renamed). Offline, against
tests/plugin_packages.py's fake releases."""

from __future__ import annotations

import json

import pytest

from kvlint.analysis.package_classes import derived_from, read_package_classes
from tests.kvlint_runner import run_kvlint
from tests.mini_vllm import write_tree
from tests.plugin_packages import install_fake_releases
from tests.test_connector_role import check
from tests.test_plugin_roles import PYPROJECT, line_of

BASES = """
    from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1
    from vllm.v1.core.sched.scheduler import Scheduler


    class NpuPolicy(Scheduler):
        pass


    class NpuConnectorBase(KVConnectorBase_V1):
        pass


    class Plain:
        pass
    """

DERIVED = f"""
    from vllm.v1.kv_cache_interface import AttentionSpec

    from plugin.core import bases
    from plugin.core.bases import NpuConnectorBase
    from .core.bases import NpuPolicy as Policy, Plain


    class TunedPolicy(Policy):
        def tune(self, kv_cache_config):
            return {check("s1")}


    class LaterPolicy(TunedPolicy):
        def tune_more(self, kv_cache_config):
            return {check("s2")}


    class NpuConnector(NpuConnectorBase):
        def get_num_new_matched_tokens(self, request, num_computed_tokens):
            return len({check("s3", "self.kv_cache_config")}), False

        def register_kv_caches(self, kv_caches):
            return {check("w1", "self.kv_cache_config")}


    class Helper(Plain):
        def groups(self, kv_cache_config):
            return {check("w2")}


    class ThroughTheModule(bases.NpuPolicy):
        def groups(self, kv_cache_config):
            return {check("s4")}


    def _patched_schedule(self, kv_cache_config):
        return {check("s5")}


    Policy.schedule = _patched_schedule
    """


@pytest.fixture
def fake_releases(tmp_path, monkeypatch) -> list[str]:
    return install_fake_releases(tmp_path, monkeypatch)


def test_a_class_deriving_from_the_packages_scheduler_subclass_in_another_module_is_scheduler_side(
    tmp_path, fake_releases
):
    files = {
        "pyproject.toml": PYPROJECT,
        "plugin/__init__.py": "",
        "plugin/core/__init__.py": "",
        "plugin/core/bases.py": BASES,
        "plugin/derived.py": DERIVED,
    }
    package = write_tree(tmp_path / "pkg", files)
    completed = run_kvlint("check", "--no-cache", "--format", "json", "--select", "KV101", ".", cwd=package)
    assert completed.returncode in (0, 1), completed.stderr
    found = {f["line"] for f in json.loads(completed.stdout)}
    assert found == {line_of(DERIVED, "isinstance(w1."), line_of(DERIVED, "isinstance(w2.")}, found


def test_the_packages_classes_derive_through_its_modules_by_name():
    classes = read_package_classes(
        [
            b"import vllm.v1.core.sched.scheduler as s\nclass A(s.Scheduler):\n    pass\n",
            b"from .a import A as Renamed\nfrom torch import Module\nclass B(Renamed):\n    pass\nclass C(Module):\n"
            b"    pass\nclass D(B):\n    pass\n",
            b"class Scheduler:\n    pass\nclass E(Scheduler):\n    pass\n",  # the package's own Scheduler
            b"from . import a as module_a\nimport plugin.a\nclass F(module_a.A):\n    pass\n"
            b"class G(plugin.a.A, metaclass=Meta):\n    pass\n",
        ]
    )
    assert derived_from(classes, frozenset({"Scheduler"})) == {"A", "B", "D", "F", "G"}
