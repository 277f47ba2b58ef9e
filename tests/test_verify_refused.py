"""`kvlint verify`: a configuration vLLM's scheduler refuses when it starts is "refused", not a disagreement
(issue 29, item 4). Its coordinator, built from the scheduler's config alone, raising in vLLM's own code (an
assert or a ValueError: 0.29.0's `UnitaryKVCacheCoordinator assumes hash_block_size == block_size` for a
sliding-window or Mamba group under DCP) stops the engine at start, so no path of that configuration ever
runs; an error anywhere else, or one kvlint's harness raised, stays a disagreement.

Then, on the real vLLM 0.29.0 (slow): `kvlint fix --unsafe-fixes` and `kvlint verify` exits 0.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import types

import pytest

from kvlint.verify import child
from kvlint.verify.matrix import parse_report, render_json, render_text

REFUSAL = "AssertionError: UnitaryKVCacheCoordinator assumes hash_block_size == block_size"


def raw_result(cells: list[dict]) -> dict:
    return {
        "vllm": {"version": "0.29.0", "path": "/x/vllm"},
        "python": "3.11.7",
        "setup": {"block_size": 16},
        "paths": {"scheduler": "…:resolve_kv_cache_block_sizes", "managers": "…:get_kv_cache_coordinator"},
        "unavailable_paths": {},
        "notes": {},
        "cells": cells,
    }


AGREEING = {"kind": "full_attention", "dcp": 2, "paths": {"scheduler": [32], "managers": [32]}, "agree": True}
REFUSED = {
    "kind": "sliding_window",
    "dcp": 2,
    "paths": {"scheduler": [32], "managers": REFUSAL},
    "agree": None,
    "refused": REFUSAL,
}


def test_a_refused_cell_is_said_as_refused_and_does_not_fail_the_run():
    report = parse_report(raw_result([AGREEING, REFUSED]))
    lines = render_text(report).splitlines()
    row = next(line for line in lines if line.startswith("sliding_window"))
    assert row.split(None, 2)[1:] == ["2", "refused by vLLM's scheduler at start[1]"]
    assert f"  [1] {REFUSAL}" in lines
    assert lines[-1] == "1 of 1 cells agree; 1 refused by vLLM's scheduler at start (not compared)."
    assert report.exit_code == 0
    cell = json.loads(render_json(report))["cells"][1]
    assert cell["agree"] is None and cell["refused"] == REFUSAL


def module(name: str, source: str) -> types.ModuleType:
    made = types.ModuleType(name)
    exec(compile(source, f"<{name}>", "exec"), made.__dict__)
    return made


def managers_of(coordinator_source: str, name: str = child.COORDINATOR) -> list:
    """The managers path of the harness, asked of a coordinator module with this source (named `name`)."""
    paths = child.SizingPaths({"utils": object(), "coordinator": module(name, coordinator_source)})
    config = types.SimpleNamespace(parallel_config=types.SimpleNamespace(decode_context_parallel_size=2))
    cell = child.Cell("sliding_window", 2, None, types.SimpleNamespace(), config, scheduler_sizes=(32, 32))
    return paths.managers(cell)


REFUSING = """
def get_kv_cache_coordinator(kv_cache_config, hash_block_size):
    assert hash_block_size == 16, "UnitaryKVCacheCoordinator assumes hash_block_size == block_size"
"""


def test_the_coordinator_refusing_in_vllms_code_is_a_refusal():
    with pytest.raises(child.Refused, match="^AssertionError: UnitaryKVCacheCoordinator assumes"):
        managers_of(REFUSING)


@pytest.mark.parametrize(
    "source,name,raised",
    [
        # a crash, not a refusal: still a disagreement
        ("def get_kv_cache_coordinator(kv_cache_config):\n    return None.x\n", child.COORDINATOR, AttributeError),
        # an assertion outside vLLM's code (kvlint's harness or stand-ins) is never vLLM refusing
        (REFUSING, "kvlint_stand_in", AssertionError),
    ],
)
def test_other_errors_stay_errors(source, name, raised):
    with pytest.raises(raised):
        managers_of(source, name)


# ------------------------------------------------------------------ the real vLLM 0.29.0


@pytest.mark.slow
def test_fix_with_unsafe_fixes_then_verify_exits_0_on_0_29_0(vllm_runtime_env, vllm_release, tmp_path):
    tree = tmp_path / "vllm-0.29.0"
    shutil.copytree(vllm_release("0.29.0"), tree)
    command = [sys.executable, "-m", "kvlint"]
    fixed = subprocess.run(
        [*command, "fix", "--unsafe-fixes", "--no-cache", "vllm"], cwd=tree, capture_output=True, text=True, timeout=900
    )
    assert fixed.returncode in (0, 1), fixed.stderr
    assert "fixed 4 file(s)" in fixed.stderr
    verify = [*command, "verify", "--python", str(vllm_runtime_env.python), "--vllm", str(tree)]
    text = subprocess.run(verify, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert text.returncode == 0, text.stdout + text.stderr
    assert (
        text.stdout.splitlines()[-1] == "22 of 22 cells agree; 6 refused by vLLM's scheduler at start (not compared)."
    )
    document = json.loads(
        subprocess.run([*verify, "--format", "json"], capture_output=True, text=True, timeout=900, cwd=tmp_path).stdout
    )
    refused = {(cell["kind"], cell["dcp"]) for cell in document["cells"] if "refused" in cell}
    assert refused == {(kind, dcp) for kind in ("sliding_window", "mamba") for dcp in (2, 4, 8)}
    assert document["agree"] is True
