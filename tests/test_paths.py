"""`kvlint paths`: the sizing-path matrix, on fixture trees and real releases."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from kvlint.cli import main
from mini_vllm import MINI_VLLM, write_tree
from test_text_layout import located

OFFLOADING_CONFIG = "vllm/distributed/kv_transfer/kv_connector/v1/offloading/config.py"


@pytest.fixture(scope="session")
def real_tree(vllm_release):
    """real_tree("0.29.0") -> the folder holding that release's `vllm/` (conftest's cached fetch)."""
    return vllm_release


def run(*args: str):
    return CliRunner().invoke(main, ["paths", *args], catch_exceptions=False)


@pytest.fixture
def fixture_tree(tmp_path):
    return write_tree(tmp_path, MINI_VLLM)


def test_text_matrix_on_a_fixture_tree(fixture_tree):
    result = run(str(fixture_tree))
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == f"kvlint paths: {fixture_tree}"
    legend = {
        line.split("]")[0].strip(" ["): line.split("]", 1)[1].split("(")[0].strip()
        for line in lines
        if line.startswith("  [")
    }
    assert legend == {
        "A": "vllm.v1.core.kv_cache_utils:resolve_kv_cache_block_sizes",
        "B": "vllm.v1.core.kv_cache_utils:resolve_dcp_kv_block_size",
        "C": "vllm.distributed.kv_transfer.kv_connector.v1.offloading.config:build_offloading_config",
    }
    header = next(i for i, line in enumerate(lines) if line.startswith("kind"))
    assert lines[header].split() == ["kind", "A", "B", "C"]
    rows = {}
    for line in lines[header + 2 :]:
        if not line.strip():
            break
        cells = line.split()
        rows[" ".join(cells[:-3])] = cells[-3:]
    assert rows == {
        "FullAttentionSpec": ["dcp", "dcp", "dcp"],
        "MLAAttentionSpec": ["dcp", "dcp", "dcp"],
        "MambaSpec": ["1", "1", "1"],
        "UniformTypeKVCacheSpecs{MLA, indexer}": ["dcp", "dcp", "w:1/s:dcp*"],
        "UniformTypeKVCacheSpecs{FullAttention×2}": ["dcp", "dcp", "w:1/s:dcp*"],
    }
    # check's findings in these paths, in check's words and layout (tests/test_paths_agree_with_check.py)
    assert f"{OFFLOADING_CONFIG}:6:9 KV102" in located(result.output)
    assert "\nrelated: line 3: KV103 " in result.output


def test_json_matrix(fixture_tree):
    result = run(str(fixture_tree), "--format", "json")
    assert result.exit_code == 0
    document = json.loads(result.output)
    assert document["dcp"] == 2 and document["block_size"] == 16
    assert document["reference"] == "vllm.v1.core.kv_cache_utils:resolve_kv_cache_block_sizes"
    kinds = [k["label"] for k in document["kinds"]]
    connector = next(p for p in document["paths"] if p["function"] == "build_offloading_config")
    assert connector["role"] == "both"
    dsa = kinds.index("UniformTypeKVCacheSpecs{MLA, indexer}")
    assert connector["views"]["group"][dsa] == "1" and connector["views"]["scheduler"][dsa] == "dcp"
    assert connector["differs"][dsa] is True
    assert connector["differs"][kinds.index("MambaSpec")] is False
    assert {f["code"] for f in document["findings"]} >= {"KV103", "KV105"}


def test_not_a_vllm_tree_is_a_usage_error(tmp_path):
    result = CliRunner().invoke(main, ["paths", str(tmp_path)])
    assert result.exit_code == 2
    assert "not in a vLLM tree" in result.output


def test_missing_path_is_an_error(tmp_path):
    result = CliRunner().invoke(main, ["paths", str(tmp_path / "nope")])
    assert result.exit_code == 2


@pytest.mark.slow
def test_real_029_matrix(real_tree):
    result = run(str(real_tree("0.29.0")))
    assert result.exit_code == 0, result.output
    output = result.output
    assert "vllm.distributed.kv_transfer.kv_connector.v1.offloading.config:build_offloading_config" in output
    assert "vllm.v1.core.kv_cache_utils:dcp_world_size_for_kv_cache_spec" in output
    dsa_row = next(line for line in output.splitlines() if line.startswith("UniformTypeKVCacheSpecs{MLA, indexer}"))
    assert "w:1/s:dcp*" in dsa_row
    assert "† rejected under DCP: SlidingWindowSpec.max_memory_usage_bytes" in output


@pytest.mark.slow
def test_real_033_matrix(real_tree):
    result = run(str(real_tree("0.33.0") / "vllm"), "--format", "json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    kinds = [k["label"] for k in document["kinds"]]
    resolver = next(p for p in document["paths"] if p["name"] == document["resolver"])
    assert resolver["views"]["group"][kinds.index("MambaSpec")] == "1"
    assert resolver["views"]["group"][kinds.index("UniformTypeKVCacheSpecs{MLA, indexer}")] == "dcp"
    connector = next(p for p in document["paths"] if p["function"] == "build_offloading_config")
    assert not any(connector["differs"])
    text = run(str(real_tree("0.33.0")))
    assert text.exit_code == 0 and text.output.startswith("kvlint paths: ")


def test_layer_specs_copied_into_a_list_read_as_vllms_own_form(tmp_path):
    """`list(spec.kv_cache_specs.values())` and `[spec]` instead of vLLM's `.values()` and `(spec,)`: the
    resolver's container cells stay known (they were `?`, and KV105 went unreported)."""
    interface = "vllm/v1/kv_cache_interface.py"
    listed = dict(MINI_VLLM)
    listed[interface] = (
        MINI_VLLM[interface]
        .replace("return kv_cache_spec.kv_cache_specs.values()", "return list(kv_cache_spec.kv_cache_specs.values())")
        .replace("return (kv_cache_spec,)", "return [kv_cache_spec]")
    )
    assert listed[interface] != MINI_VLLM[interface]
    as_vllm = run(str(write_tree(tmp_path / "as_vllm", MINI_VLLM)), "--format", "json")
    as_list = run(str(write_tree(tmp_path / "as_list", listed)), "--format", "json")
    assert as_list.exit_code == as_vllm.exit_code == 0, as_list.output
    ours, theirs = json.loads(as_list.output), json.loads(as_vllm.output)
    assert [p["views"] for p in ours["paths"]] == [p["views"] for p in theirs["paths"]]
    assert {f["code"] for f in ours["findings"]} == {f["code"] for f in theirs["findings"]} >= {"KV103", "KV105"}
