"""The lint of one file costs work linear in the checks a pull request can put in it: what a rule reads of a whole
function or module for one check (its bindings, the names one value with the subject, the tests that raise, the
module's DCP aliases) is read once per function or module, not once per check. A function of 800 checks took 87 s
when each check walked the function again; 13 s for 800 small functions, each check reading the whole module.

Measured by the Python calls a lint makes (sys.setprofile), not by the clock: four times the checks must cost
about four times the calls. The function of checks tells a walk per check apart (fourteen times the calls then);
at these sizes the many small functions, whose per-check reads were of a module still small, only guard against a
gross regression (five times the calls before, 4.4 now)."""

from __future__ import annotations

import sys

import pytest

from kvlint.analysis.tree_index import build_tree_index
from kvlint.engine.lint import LintRequest, lint_bytes
from kvlint.engine.registry import all_rules
from tests.mini_vllm import CONFIG_PATH, MINI_VLLM, write_tree

HEADER = ["from vllm.v1.kv_cache_interface import AttentionSpec", ""]


def many_functions(count: int) -> bytes:
    """`count` functions, each scaling a group's block size by hand behind a container check."""
    lines = list(HEADER)
    for i in range(count):
        lines += [
            f"def f{i}(kv_cache_config):",
            "    for group in kv_cache_config.kv_cache_groups:",
            "        spec = group.kv_cache_spec",
            "        if isinstance(spec, AttentionSpec):",
            "            return spec.block_size * kv_cache_config.dcp_world_size",
            "",
        ]
    return "\n".join(lines).encode()


def one_function(count: int) -> bytes:
    """One function of `count` such loops."""
    lines = [*HEADER, "def f(kv_cache_config, dcp_world_size):", "    out = []"]
    for i in range(count):
        lines += [
            f"    for group{i} in kv_cache_config.kv_cache_groups:",
            f"        if isinstance(group{i}.kv_cache_spec, AttentionSpec):",
            f"            out.append(group{i}.kv_cache_spec.block_size * dcp_world_size)",
        ]
    return "\n".join([*lines, "    return out"]).encode()


@pytest.fixture(scope="module")
def request_(tmp_path_factory) -> LintRequest:
    tree = write_tree(tmp_path_factory.mktemp("linear") / "mini", MINI_VLLM)
    request = LintRequest(CONFIG_PATH, CONFIG_PATH, build_tree_index(tree), all_rules())
    lint_bytes(request, one_function(2))  # what is made once per process (classes, caches) is made before counting
    return request


def calls_and_findings(request: LintRequest, data: bytes) -> tuple[int, int]:
    count = 0

    def count_calls(frame, event, arg):
        nonlocal count
        if event == "call":
            count += 1

    previous = sys.getprofile()
    sys.setprofile(count_calls)
    try:
        result = lint_bytes(request, data)
    finally:
        sys.setprofile(previous)
    return count, len(result.findings)


@pytest.mark.parametrize("shape", [many_functions, one_function])
def test_four_times_the_checks_cost_about_four_times_the_work(request_, shape):
    small, small_findings = calls_and_findings(request_, shape(40))
    large, large_findings = calls_and_findings(request_, shape(160))
    assert (small_findings, large_findings) == (80, 320)  # each loop: its check and its scaling reported
    assert large / small < 6, f"{large / small:.1f} times the calls for four times the checks"
