"""What an `assert` of test code asserts is the test's own expectation, not a check a container silently
misleads (issue 28): a plugin test asserting that the scheduler's config was flattened is no finding, in a
plugin's tests as in vLLM's own tests; the same assertion in production code, and a branch in a test, still are.
"""

from __future__ import annotations

import json

import pytest

from tests.kvlint_runner import run_kvlint
from tests.mini_vllm import write_tree
from tests.plugin_packages import fake_release, install_fake_releases

FLATTENED = """
    from vllm.v1.kv_cache_interface import AttentionSpec


    def test_the_scheduler_sees_a_flattened_config(kv_cache_config, flatten_for_scheduler):
        sched_config = flatten_for_scheduler(kv_cache_config)
        assert isinstance(sched_config.kv_cache_groups[0].kv_cache_spec, AttentionSpec), "flattened"
    """

BRANCH = """
    from vllm.v1.kv_cache_interface import AttentionSpec


    def test_attention_groups_are_zeroed(kv_cache_config):
        for group in kv_cache_config.kv_cache_groups:
            if isinstance(group.kv_cache_spec, AttentionSpec):
                assert group.zeroed
    """


@pytest.fixture
def fake_releases(tmp_path, monkeypatch) -> list[str]:
    return install_fake_releases(tmp_path, monkeypatch)


def reported(folder, *arguments) -> list[tuple[str, int, str]]:
    completed = run_kvlint("check", "--no-cache", "--format", "json", *arguments, cwd=folder)
    assert completed.returncode in (0, 1), completed.stderr
    return [(f["path"], f["line"], f["severity"]) for f in json.loads(completed.stdout) if f["code"] == "KV101"]


@pytest.mark.parametrize("test_file", ["tests/test_scheduler.py", "plugin/scheduler_test.py", "conftest.py"])
def test_a_plugin_tests_assertion_of_the_flattened_config_is_no_finding(tmp_path, fake_releases, test_file):
    package = write_tree(
        tmp_path / "pkg",
        {test_file: FLATTENED, "plugin/__init__.py": "", "plugin/checks.py": FLATTENED.replace("def test_", "def ")},
    )
    # The same assertion in the package's own code: a container the target's census proves built fails it.
    assert reported(package, "--vllm-release", "0.30.0", ".") == [("plugin/checks.py", 6, "error")]


def test_a_branch_of_a_test_is_still_judged(tmp_path, fake_releases):
    package = write_tree(tmp_path / "pkg", {"tests/test_zeroing.py": BRANCH})
    assert reported(package, "--vllm-release", "0.30.0", ".") == [("tests/test_zeroing.py", 6, "error")]


def test_vllms_own_tests_are_read_alike(tmp_path):
    tree = fake_release(tmp_path, "0.30.0")
    production = FLATTENED.replace("def test_", "def ")
    write_tree(tree, {"tests/v1/core/test_flattening.py": FLATTENED, "vllm/v1/worker/flat_checks.py": production})
    found = reported(tree, "tests", "vllm/v1/worker/flat_checks.py")
    assert found == [("vllm/v1/worker/flat_checks.py", 6, "error")]
