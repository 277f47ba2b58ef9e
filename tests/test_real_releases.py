"""`kvlint check` on real vLLM releases fetched from PyPI (sources only, cached between runs)."""

from __future__ import annotations

import json
import subprocess
import sys

import jsonschema
import pytest

from conftest import OFFLOADING_CONFIG
from test_cli import sarif_schema

pytestmark = pytest.mark.slow  # every test here scans a real release


# The golden files' scan (tests/test_golden.py), shared through conftest: one full scan per release and session.
CHECK_JSON = ("check", "--no-cache", "--format", "json", ".")


def check(kvlint_in_release, version: str, codes: tuple[str, ...] = ()) -> tuple[int, list[dict]]:
    """Exit code and findings (paths relative to the release folder) of a full check, `codes` only if given."""
    completed = kvlint_in_release(version, *CHECK_JSON)
    assert completed.returncode in (0, 1), completed.stderr
    findings = json.loads(completed.stdout)
    return completed.returncode, [f for f in findings if not codes or f["code"] in codes]


def at_offloading_config(findings):
    return [f for f in findings if f["path"] == OFFLOADING_CONFIG]


@pytest.fixture(scope="module")
def scan_029(kvlint_in_release):
    return check(kvlint_in_release, "0.29.0", ("KV000", "KV101", "KV102"))


def test_029_flags_the_offloading_tokens_per_block(scan_029):
    code, findings = scan_029
    assert code == 1
    site = [f for f in at_offloading_config(findings) if 43 <= f["line"] <= 50]
    # One root cause: the scaling, with its isinstance gate (and what else it causes) as related locations.
    assert [f["code"] for f in site] == ["KV102"] and "KV101" in {r["code"] for r in site[0]["related"]}
    kv102 = site[0]
    assert kv102["fix"]["applicability"] == "safe"
    assert "UniformTypeKVCacheSpecs" in kv102["message"]


def test_029_precision_against_the_naive_pattern(scan_029, vllm_release):
    """A naive grep flags hundreds of places; kvlint reports a short, explained list."""
    tree = vllm_release("0.29.0")
    _, findings = scan_029
    naive = subprocess.run(
        [
            "grep",
            "-rnE",
            r"isinstance\(.*(Attention|MLA|SlidingWindow|ChunkedLocal)[A-Za-z]*Spec|block_size \*",
            str(tree / "vllm"),
        ],
        capture_output=True,
        text=True,
    ).stdout.splitlines()
    assert len(naive) > 150
    assert 5 <= len(findings) <= 30
    paths = {f["path"].removeprefix("vllm/") for f in findings}
    # Layer-level checks (iter_layer_specs, per-layer dicts) and scheduler-only code are not reported.
    assert "v1/core/kv_cache_coordinator.py" not in paths
    assert "distributed/kv_transfer/kv_connector/v1/nixl/base_scheduler.py" not in paths
    assert "distributed/kv_transfer/kv_connector/v1/offloading/worker.py" not in paths
    # Known worker-side group checks are.
    assert "v1/worker/cpu_model_runner.py" in paths


def test_029_sarif_and_json_are_valid(vllm_release):
    tree = vllm_release("0.29.0")
    target = str(tree / OFFLOADING_CONFIG)
    sarif = subprocess.run(
        [sys.executable, "-m", "kvlint", "check", "--no-cache", "--format", "sarif", target],
        capture_output=True,
        text=True,
    )
    assert sarif.returncode == 1
    document = json.loads(sarif.stdout)
    jsonschema.validate(document, sarif_schema())
    ids = {r["id"] for r in document["runs"][0]["tool"]["driver"]["rules"]}
    results = document["runs"][0]["results"]
    assert results and all(r["ruleId"] in ids for r in results)
    lines = {r["locations"][0]["physicalLocation"]["region"]["startLine"] for r in results}
    assert lines & set(range(43, 51))


def test_030_resolver_call_is_not_flagged(vllm_release, kvlint_in_release):
    tree = vllm_release("0.30.0")
    _, findings = check(kvlint_in_release, "0.30.0", ("KV101", "KV102"))
    site = [f for f in at_offloading_config(findings) if f["line"] < 100]
    assert site == []
    source = (tree / OFFLOADING_CONFIG).read_text()
    assert "tokens_per_block=resolve_dcp_kv_block_size(" in source  # the upstream fix is really there


@pytest.mark.parametrize("version", ["0.27.1", "0.28.0"])
def test_older_releases_are_flagged_without_a_fix(kvlint_in_release, version):
    code, findings = check(kvlint_in_release, version, ("KV101", "KV102"))
    assert code == 1
    site = [f for f in at_offloading_config(findings) if f["code"] == "KV102"]
    assert site, f"{version}: offloading tokens_per_block not flagged"
    assert all(f["fix"] is None and "no shared" in f["fix_unavailable"] for f in site)


def test_033_scans_without_a_crash(kvlint_in_release):
    code, findings = check(kvlint_in_release, "0.33.0")
    assert code in (0, 1)
    assert not [f for f in findings if f["code"] == "KV000" and "internal error" in f["message"]]
