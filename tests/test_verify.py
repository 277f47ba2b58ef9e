"""`kvlint verify`: rendering and exit codes, then the real vLLM 0.29.0 before and after `kvlint fix`.

The runtime tests (marked slow) import the real vLLM 0.29.0 for CPU from a cached
virtualenv (tests/vllm_runtime.py builds it on first use, in minutes) in verify's
child process; kvlint itself runs in this interpreter and never imports vLLM.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from kvlint.commands.verify import verify
from kvlint.verify import child
from kvlint.verify.matrix import parse_report, render_json, render_text, report_to_json

sys.path.insert(0, str(Path(__file__).parent))
import vllm_runtime  # noqa: E402  (tests/ helper, not a package)

OFFLOADING_CONFIG = "vllm/distributed/kv_transfer/kv_connector/v1/offloading/config.py"
DIVISIBILITY = "AssertionError: tokens_per_block=16 not divisible by tokens_per_hash=32."


def make_runner() -> CliRunner:
    try:
        return CliRunner(mix_stderr=False)  # click < 8.2 mixes stderr in unless told
    except TypeError:
        return CliRunner()


def raw_result(cells: list[dict]) -> dict:
    return {
        "vllm": {"version": "0.29.0", "path": "/x/vllm"},
        "python": "3.11.7",
        "setup": {"tensor_parallel_size": 8, "block_size": 16, "num_blocks": 64},
        "paths": {
            "scheduler": "vllm.v1.core.kv_cache_utils:resolve_kv_cache_block_sizes (scheduler config)",
            "offloading[worker]": "…:build_offloading_config (worker config)",
        },
        "unavailable_paths": {},
        "notes": {},
        "cells": cells,
    }


AGREEING = {
    "kind": "hybrid_attention_mamba",
    "dcp": 2,
    "container": False,
    "paths": {"scheduler": [32, 16, 16], "offloading[worker]": [32, 16, 16]},
    "agree": True,
    "scheduler_block_size": 32,
    "hash_block_size": 16,
}
DISAGREEING = {
    "kind": "dsa_container",
    "dcp": 2,
    "container": True,
    "paths": {"scheduler": [32], "offloading[worker]": DIVISIBILITY + " Hybrid models…"},
    "agree": False,
    "scheduler_block_size": 32,
    "hash_block_size": 32,
}


# The JSON contract: what a consumer of `kvlint verify --format json` may rely on.
SPAN = {"type": "integer", "minimum": 1}
VERIFY_SCHEMA = {
    "type": "object",
    "required": ["vllm", "paths", "cells", "agree"],
    "properties": {
        "vllm": {"type": "object", "required": ["version", "path"]},
        "paths": {"type": "object", "additionalProperties": {"type": "string"}},
        "agree": {"type": "boolean"},
        "cells": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["kind", "dcp", "paths", "agree"],
                "properties": {
                    "kind": {"type": "string"},
                    "dcp": {"type": "integer", "minimum": 1},
                    "agree": {"type": ["boolean", "null"]},
                    "paths": {
                        "type": "object",
                        "additionalProperties": {
                            "oneOf": [
                                SPAN,
                                {"type": "array", "items": {"oneOf": [SPAN, {"type": "null"}]}},
                                {"type": "string"},
                            ]
                        },
                    },
                },
            },
        },
    },
}


# ---------------------------------------------------------------- no vLLM needed


def test_compare_needs_equal_spans_and_no_errors():
    assert child.compare({"a": [32], "b": [32]}) is True
    assert child.compare({"a": [32], "b": [16]}) is False
    assert child.compare({"a": [32], "b": "AssertionError: x"}) is False
    # A path that does not size a group (None) is not compared on it.
    assert child.compare({"a": [32, 16], "b": [32, None]}) is True
    assert child.compare({"a": [32]}) is None


def test_text_matrix_marks_disagreement_and_lists_the_message():
    report = parse_report(raw_result([AGREEING, DISAGREEING]))
    text = render_text(report)
    lines = text.splitlines()
    hybrid = next(line for line in lines if line.startswith("hybrid_attention_mamba"))
    assert hybrid.split()[1:] == ["2", "32,16,16", "32,16,16", "yes"]
    dsa = next(line for line in lines if line.startswith("dsa_container"))
    assert dsa.split()[1:] == ["2", "32", "!error[1]", "NO"]
    assert f"  [1] {DIVISIBILITY} Hybrid models…" in lines
    assert lines[-1] == "1 of 2 cells agree; 1 disagree."
    assert report.exit_code == 1


def test_json_gives_one_span_per_group_and_errors_as_messages():
    document = json.loads(render_json(parse_report(raw_result([AGREEING, DISAGREEING]))))
    hybrid, dsa = document["cells"]
    assert hybrid["paths"] == {"scheduler": [32, 16, 16], "offloading[worker]": [32, 16, 16]}
    assert hybrid["agree"] is True
    assert dsa["paths"]["scheduler"] == 32  # one group: a number
    assert dsa["paths"]["offloading[worker]"].startswith(DIVISIBILITY)
    assert dsa["agree"] is False
    assert {"kind", "dcp", "paths", "agree"} <= set(dsa)
    assert document["agree"] is False
    jsonschema.validate(document, VERIFY_SCHEMA)


def test_cells_a_release_cannot_express_are_reported_not_failed():
    skipped = {
        "kind": "dsa_container",
        "dcp": 2,
        "paths": {},
        "agree": None,
        "not_expressible": "kvlint.verify: no UniformTypeKVCacheSpecs",
    }
    report = parse_report(raw_result([AGREEING, skipped]))
    assert report.exit_code == 0
    text = render_text(report)
    assert "cannot express: kvlint.verify: no UniformTypeKVCacheSpecs" in text
    assert text.splitlines()[-1] == "1 of 1 cells agree; 1 could not be compared in this release."
    assert report_to_json(report)["cells"][1]["agree"] is None


def test_nothing_compared_is_an_error_not_a_pass():
    skipped = {"kind": "mla", "dcp": 2, "paths": {}, "agree": None, "not_expressible": "vLLM rejects DCP=2: …"}
    assert parse_report(raw_result([skipped])).exit_code == 2


def test_a_folder_without_vllm_exits_2_with_one_line(tmp_path):
    result = make_runner().invoke(verify, ["--vllm", str(tmp_path)])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1
    assert "holds no vllm package" in result.stderr


def test_a_tree_that_fails_to_import_exits_2_without_traceback(tmp_path):
    package = tmp_path / "vllm"
    package.mkdir()
    (package / "__init__.py").write_text("raise RuntimeError('half-installed tree')\n")
    result = make_runner().invoke(verify, ["--vllm", str(tmp_path), "--python", sys.executable])
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1
    assert "cannot import vLLM from" in result.stderr
    assert "RuntimeError: half-installed tree" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout


def test_a_missing_interpreter_exits_2(tmp_path):
    (tmp_path / "vllm").mkdir()
    (tmp_path / "vllm" / "__init__.py").write_text("")
    result = make_runner().invoke(verify, ["--vllm", str(tmp_path), "--python", str(tmp_path / "nope")])
    assert result.exit_code == 2
    assert "cannot run the child interpreter" in result.stderr


def test_the_harness_runs_isolated_from_kvlint():
    # The child is run by path with -I: it must not need kvlint (stdlib and vLLM only).
    tree = ast.parse(Path(child.__file__).read_text(encoding="utf-8"))
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not {name for name in imported if name.split(".")[0] == "kvlint"}
    assert all(name.split(".")[0] in sys.stdlib_module_names | {"vllm"} for name in imported if name)


# ------------------------------------------------------- the real vLLM 0.29.0


@pytest.fixture(scope="session")
def runtime(vllm_runtime_env):
    return vllm_runtime_env  # conftest: built once per session, and only for tests marked slow


def run_verify(runtime, *arguments: str) -> tuple[int, str]:
    result = make_runner().invoke(verify, ["--python", str(runtime.python), *arguments])
    assert result.exit_code in (0, 1), result.stderr
    return result.exit_code, result.stdout


def cells_by_key(document: dict) -> dict[tuple[str, int], dict]:
    return {(cell["kind"], cell["dcp"]): cell for cell in document["cells"]}


@pytest.fixture(scope="module")
def installed_matrix(runtime):
    """verify --format json on the venv's installed vLLM (no --vllm: the installed one)."""
    code, out = run_verify(runtime, "--format", "json")
    return code, json.loads(out)


@pytest.mark.slow
def test_installed_0_29_0_dsa_container_disagrees_at_dcp_2(installed_matrix):
    code, document = installed_matrix
    jsonschema.validate(document, VERIFY_SCHEMA)
    assert document["vllm"]["version"] == "0.29.0"
    assert code == 1
    cell = cells_by_key(document)[("dsa_container", 2)]
    assert cell["agree"] is False
    # The scheduler-side paths scale the flattened MLA spec by DCP ...
    assert cell["paths"]["scheduler"] == 32
    assert cell["paths"]["managers"] == 32
    assert cell["paths"]["offloading[scheduler]"] == 32
    # ... the worker-side connector sees the container, drops DCP, and trips vLLM's own assert.
    assert cell["paths"]["offloading[worker]"].startswith(DIVISIBILITY)


@pytest.mark.slow
def test_installed_0_29_0_plain_kinds_agree(installed_matrix):
    _, document = installed_matrix
    cells = cells_by_key(document)
    for kind in ("full_attention", "mla", "hybrid_attention_mamba"):
        for dcp in (1, 2, 4, 8):
            assert cells[(kind, dcp)]["agree"] is True, cells[(kind, dcp)]
    # Every kind is expressible in 0.29.0 (compared, or refused by its scheduler at start), and DCP=1 never disagrees.
    assert all(cell["agree"] is not None or "refused" in cell for cell in document["cells"])
    assert all(cells[(kind, 1)]["agree"] for kind, _ in cells)


@pytest.mark.slow
def test_text_matrix_of_0_29_0(runtime):
    code, text = run_verify(runtime, "--dcp", "1", "--dcp", "2")
    assert code == 1
    lines = text.splitlines()
    assert lines[0].startswith("vLLM 0.29.0 at ")
    header = next(line for line in lines if line.startswith("kind "))
    row = next(line for line in lines if line.startswith("dsa_container") and line.split()[1] == "2")
    columns = dict(zip(header.split(), row.split()))
    assert columns["scheduler"] == columns["managers"] == columns["offloading[scheduler]"] == "32"
    assert columns["agree"] == "NO"
    number = columns["offloading[worker]"].removeprefix("!error[").removesuffix("]")
    assert any(line.startswith(f"  [{number}] {DIVISIBILITY}") for line in lines)


@pytest.mark.slow
def test_kvlint_fix_on_a_copy_makes_every_container_cell_agree(runtime, tmp_path):
    tree = vllm_runtime.copy_vllm_tree(runtime.site_packages, tmp_path / "tree")
    offloading = tree / OFFLOADING_CONFIG
    original = offloading.read_text(encoding="utf-8")

    _, before_out = run_verify(runtime, "--vllm", str(tree), "--format", "json")
    before = json.loads(before_out)
    assert before["vllm"]["path"] == str((tree / "vllm").resolve())
    assert cells_by_key(before)[("dsa_container", 2)]["agree"] is False

    fixed = subprocess.run(
        [sys.executable, "-m", "kvlint", "fix", str(tree)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert fixed.returncode in (0, 1), fixed.stderr
    rewritten = offloading.read_text(encoding="utf-8")
    assert rewritten != original, "kvlint fix left the offloading connector unchanged"
    assert "resolve_dcp_kv_block_size(" in rewritten

    _, after_out = run_verify(runtime, "--vllm", str(tree), "--format", "json")
    after = json.loads(after_out)
    containers = [cell for cell in after["cells"] if cell["container"]]
    assert {cell["kind"] for cell in containers} == {"dsa_container", "full_attention_container"}
    for cell in containers:
        assert cell["agree"] is True, cell
        assert cell["paths"]["offloading[worker]"] == 16 * cell["dcp"]
    # No regression elsewhere: every cell that agreed before still agrees.
    before_cells = cells_by_key(before)
    for cell in after["cells"]:
        if before_cells[(cell["kind"], cell["dcp"])]["agree"]:
            assert cell["agree"] is True, cell


# ------------------------------------------------------------------------------------------ the runtime


def test_without_torch_one_error_line_names_the_setup_step(tmp_path):
    """An interpreter without torch (this one): one `kvlint: error:` line that says what to run next."""
    (tmp_path / "vllm").mkdir()
    (tmp_path / "vllm" / "__init__.py").write_text("import torch\n")
    result = make_runner().invoke(verify, ["--vllm", str(tmp_path), "--python", sys.executable])
    assert result.exit_code == 2 and result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith("kvlint: error: cannot import vLLM from ") and "No module named 'torch'" in line
    assert "run `kvlint verify --setup`" in line and vllm_runtime.environment_key() in line


def test_the_tests_and_verify_share_one_runtime_recipe():
    from kvlint.verify import runtime_env

    assert vllm_runtime.vllm_runtime is runtime_env.vllm_runtime
    assert vllm_runtime.environment_key() == runtime_env.environment_key()


@pytest.mark.slow
def test_setup_then_verify_runs_on_029(vllm_runtime_env, tmp_path):
    """`verify --setup` finds (or builds) the tests' environment and says where and how large; then `verify
    --vllm-release 0.29.0` with no --python runs in it and shows the 0.29.0 disagreement."""
    command = [sys.executable, "-m", "kvlint", "verify"]
    setup = subprocess.run([*command, "--setup"], capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert setup.returncode == 0, setup.stderr
    ready = setup.stderr.splitlines()[-1]
    assert ready.startswith("kvlint: the verify runtime is ready (") and " GiB): " in ready
    assert ready.endswith(str(vllm_runtime_env.python))
    run = subprocess.run([*command, "--vllm-release", "0.29.0"], capture_output=True, text=True, timeout=900)
    assert run.returncode == 1, run.stderr  # 0.29.0 disagrees: the runtime imported it and compared
    assert DIVISIBILITY in run.stdout
