"""A connector's role argument in code outside the vLLM tree (issue 28, "Roles in plugin code"): under a test of
the role (`role == KVConnectorRole.SCHEDULER`, `is`, `!= KVConnectorRole.WORKER`, `not …`, an `and`, an early
exit, a conditional expression; the constructor's `role` parameter, a function's, or the `self._role`/
`self.role` the constructor stores it in) the SCHEDULER branch sees the scheduler's flattened config and is no
KV101 finding, the WORKER branch keeps the worker's. Offline, against tests/plugin_packages.py's fake releases."""

from __future__ import annotations

import json

import libcst as cst
import pytest

from kvlint.analysis.connector_role import SCHEDULER, WORKER
from kvlint.analysis.plugin_roles import FileRoles, TreeRoles
from tests.kvlint_runner import run_kvlint
from tests.mini_vllm import write_tree
from tests.plugin_packages import install_fake_releases
from tests.test_plugin_roles import kv101_lines, line_of


def check(name: str, config: str = "kv_cache_config") -> str:
    """A check of the groups a config holds, its subject named after `name` (one finding per subject)."""
    return f"[{name} for {name} in {config}.kv_cache_groups if isinstance({name}.kv_cache_spec, AttentionSpec)]"


CONNECTOR = f"""
    from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1, KVConnectorRole
    from vllm.v1.kv_cache_interface import AttentionSpec


    class SplitConnector(KVConnectorBase_V1):
        def __init__(self, vllm_config, role, kv_cache_config=None):
            super().__init__(vllm_config, role, kv_cache_config)
            self.kv_cache_config = kv_cache_config
            if role == KVConnectorRole.SCHEDULER:
                self.scheduler_groups = {check("s1")}
            else:
                self.worker_groups = {check("w1")}
            if role is not KVConnectorRole.WORKER and vllm_config is not None:
                self.also_scheduler = {check("s2")}
            self.either = {check("s3")} if self._role is KVConnectorRole.SCHEDULER else {check("w2")}

        def shared_helper(self):
            if not self.role == KVConnectorRole.SCHEDULER:
                return {check("w3", "self.kv_cache_config")}
            return {check("s4", "self.kv_cache_config")}


    class Halves:
        def __init__(self, kv_cache_config, role):
            self.kind = role
            self.kv_cache_config = kv_cache_config

        def groups(self):
            if self.kind == KVConnectorRole.WORKER:
                return {check("w4", "self.kv_cache_config")}
            elif self.kind == KVConnectorRole.SCHEDULER:
                return {check("s5", "self.kv_cache_config")}
            return None


    def build(role, kv_cache_config):
        if role != KVConnectorRole.SCHEDULER:
            raise ValueError("scheduler only")
        return {check("s6")}


    def unrelated(kv_cache_config, other):
        if other == KVConnectorRole.SCHEDULER:  # not this code's role: decides nothing
            return {check("w5")}
        return None
    """


@pytest.fixture
def fake_releases(tmp_path, monkeypatch) -> list[str]:
    return install_fake_releases(tmp_path, monkeypatch)


def test_the_scheduler_branches_of_a_role_test_are_quiet_and_the_worker_branches_reported(tmp_path, fake_releases):
    found = kv101_lines(tmp_path, CONNECTOR)
    worker = {line_of(CONNECTOR, f"if isinstance(w{n}.kv_cache_spec") for n in range(1, 4)}
    worker |= {line_of(CONNECTOR, "isinstance(w4.kv_cache_spec"), line_of(CONNECTOR, "isinstance(w5.kv_cache_spec")}
    assert set(found) == worker, (found, worker)


def role_of(source: str, marker: str) -> str | None:
    module = cst.parse_module(source)
    parents: dict[cst.CSTNode, cst.CSTNode] = {}
    stack = [module]
    while stack:
        node = stack.pop()
        for child in node.children:
            parents[child] = node
            stack.append(child)
    target = next(n for n in parents if isinstance(n, cst.Name) and n.value == marker)
    roles = FileRoles(module, TreeRoles(connector_classes=frozenset({"KVConnectorBase_V1"})))
    return roles.role_tests.role_side(target, parents.get)


def test_the_role_a_statement_runs_in_is_the_innermost_test_of_the_role():
    source = (
        "def f(role):\n"
        "    if role == KVConnectorRole.SCHEDULER:\n"
        "        if role == KVConnectorRole.WORKER:\n"
        "            inner\n"
        "        outer\n"
        "    elif x:\n"
        "        neither\n"
        "    if role is KVConnectorRole.SCHEDULER or x:\n"
        "        either\n"
    )
    assert role_of(source, "inner") == WORKER
    assert role_of(source, "outer") == SCHEDULER
    assert role_of(source, "neither") == WORKER  # the `elif` is the first test's false branch
    assert role_of(source, "either") is None  # an `or` decides no branch


HALVES = f"""
    from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorBase_V1, KVConnectorRole
    from vllm.v1.kv_cache_interface import AttentionSpec


    class PluginConnector(KVConnectorBase_V1):
        def __init__(self, vllm_config, role, kv_cache_config=None):
            if role == KVConnectorRole.SCHEDULER:
                self.connector_scheduler = PluginLookup(kv_cache_config)
                self.connector_worker = None
            elif role == KVConnectorRole.WORKER:
                self.connector_scheduler = None
                self.connector_worker = PluginTransfer(kv_cache_config)


    class PluginLookup:
        def __init__(self, kv_cache_config):
            self.groups = {check("s1")}


    class PluginTransfer:
        def __init__(self, kv_cache_config):
            self.groups = {check("w1")}
    """


def test_a_class_built_only_in_the_scheduler_branch_is_the_scheduler_half(tmp_path, fake_releases):
    found = kv101_lines(tmp_path, HALVES)
    assert list(found) == [line_of(HALVES, "isinstance(w1.kv_cache_spec")], found


def test_without_a_target_the_role_tests_still_decide(tmp_path, fake_releases):
    package = write_tree(tmp_path / "pkg", {"plugin/m.py": CONNECTOR})  # no requirement: the built-in reference
    completed = run_kvlint("check", "--no-cache", "--format", "json", "--select", "KV101", ".", cwd=package)
    found = {f["line"] for f in json.loads(completed.stdout)}
    assert line_of(CONNECTOR, "isinstance(w1.kv_cache_spec") in found
    assert not any(line_of(CONNECTOR, f"isinstance(s{n}.kv_cache_spec") in found for n in (1, 2, 5, 6)), found
