"""One view of "does this code have a resolver" per scan (TreeIndex.resolver_view), used by every rule: the
findings of one root cause never contradict each other — one comparing with vLLM's
`resolve_dcp_kv_block_size` while a related one says "this tree has no shared resolver".

Three trees: code outside vLLM (no tree: compared with vLLM's resolver as kvlint knows it), the miniature
vLLM with its resolver, and the miniature vLLM before the resolver existed (as 0.27/0.28)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from kvlint_runner import run_kvlint
from mini_vllm import MINI_VLLM, write_tree

HAND_SCALING = """
    from somewhere import AttentionSpec


    def build_offloading_config(vllm_config, kv_cache_config):
        dcp = vllm_config.parallel_config.decode_context_parallel_size
        return [
            group.kv_cache_spec.block_size * (dcp if isinstance(group.kv_cache_spec, AttentionSpec) else 1)
            for group in kv_cache_config.kv_cache_groups
        ]
    """
VLLM_RESOLVER = "vllm.v1.core.kv_cache_utils:resolve_dcp_kv_block_size"
SCHEDULER_WITHOUT_RESOLVER = """
    from vllm.v1.kv_cache_interface import AttentionSpec, iter_layer_specs

    def resolve_kv_cache_block_sizes(kv_cache_config, vllm_config):
        dcp = vllm_config.parallel_config.decode_context_parallel_size
        return [
            g.kv_cache_spec.block_size
            * (dcp if all(isinstance(s, AttentionSpec) for s in iter_layer_specs(g.kv_cache_spec)) else 1)
            for g in kv_cache_config.kv_cache_groups
        ]
    """


def root_causes(root: Path, target: str) -> list[dict]:
    completed = run_kvlint("check", "--no-cache", "--format", "json", target, cwd=root)
    assert completed.returncode == 1, completed.stderr
    return json.loads(completed.stdout)


def texts(finding: dict) -> list[str]:
    """Everything a reader is told about one root cause: its message, its related findings', its fix note."""
    return [finding["message"], *(r["message"] for r in finding["related"]), finding["fix_unavailable"] or ""]


def says_no_resolver(text: str) -> bool:
    return "no shared resolver" in text or "defines no shared" in text


def compares_with_a_resolver(text: str) -> bool:
    return "resolver `" in text or "call `resolve_dcp_kv_block_size(" in text


def assert_one_view(findings: list[dict]) -> None:
    assert findings
    for finding in findings:
        told = texts(finding)
        assert not (any(map(says_no_resolver, told)) and any(map(compares_with_a_resolver, told))), told


def test_code_outside_vllm_is_compared_with_vllms_resolver_by_every_rule(tmp_path):
    write_tree(tmp_path, {"pkg/conn.py": HAND_SCALING})
    findings = root_causes(tmp_path, "pkg")
    assert_one_view(findings)
    [finding] = findings
    told = texts(finding)
    assert {f["code"] for f in [finding, *finding["related"]]} >= {"KV102", "KV103", "KV105"}
    # the predicate, the path and the scaling name vLLM's resolver and scheduler, as vLLM's
    assert any(f"vLLM's resolver `{VLLM_RESOLVER}`" in text for text in told), told
    assert any("vLLM's scheduler `" in text for text in told), told
    scaling = next(r for r in [finding, *finding["related"]] if r["code"] == "KV102")
    assert "call vLLM's `resolve_dcp_kv_block_size(" in scaling["message"]
    assert not any(says_no_resolver(text) for text in told), told
    assert finding["fix"] is None and "not in a vLLM tree" in finding["fix_unavailable"]


def test_a_vllm_tree_with_the_resolver_is_compared_with_its_own(tmp_path):
    write_tree(tmp_path, MINI_VLLM)
    findings = root_causes(tmp_path, ".")
    assert_one_view(findings)
    told = [text for finding in findings for text in texts(finding)]
    assert any(f"the resolver `{VLLM_RESOLVER}`" in text for text in told)
    assert not any("vLLM's resolver" in text or "vLLM's scheduler" in text for text in told)


def test_a_vllm_tree_without_the_resolver_says_so_and_never_compares_with_one(tmp_path):
    files = {**MINI_VLLM, "vllm/v1/core/kv_cache_utils.py": textwrap.dedent(SCHEDULER_WITHOUT_RESOLVER)}
    write_tree(tmp_path, files)
    findings = root_causes(tmp_path, ".")
    assert_one_view(findings)
    told = [text for finding in findings for text in texts(finding)]
    assert any(says_no_resolver(text) for text in told)


def test_a_vllm_tree_with_neither_the_resolver_nor_a_scheduler_path_has_no_yardstick_for_a_hand_scaling(tmp_path):
    # 0.17.0 / 0.24.0 as kvlint reads them: the KV cache managers' own `block_size *= dcp_world_size`, with
    # nothing to compare it with and nothing to call, was a warning a maintainer could do nothing about.
    planning = "def get_kv_cache_groups(vllm_config, kv_cache_spec):\n    return []\n"
    files = {**MINI_VLLM, "vllm/v1/core/kv_cache_utils.py": planning, "vllm/conn.py": textwrap.dedent(HAND_SCALING)}
    write_tree(tmp_path, files)
    completed = run_kvlint("check", "--no-cache", "--format", "json", "--select", "KV102", ".", cwd=tmp_path)
    assert json.loads(completed.stdout) == [], completed.stdout
    # The same code beside the scheduler's path is compared with it.
    files["vllm/v1/core/kv_cache_utils.py"] = textwrap.dedent(SCHEDULER_WITHOUT_RESOLVER)
    write_tree(tmp_path, files)
    assert "vllm/conn.py" in {f["path"] for f in root_causes(tmp_path, ".")}
