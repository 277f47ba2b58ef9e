"""`kvlint verify --upstream-tests`: vLLM's own tests, before and after `kvlint fix`.

The fast tests use a miniature vLLM that really runs (its offloading config scales a block size by hand,
which `kvlint fix` rewrites) and a tests/ folder of its own, run with this interpreter's pytest. The slow
test runs the real vLLM 0.29.0's tests (from its sdist) in the CPU runtime virtualenv (tests/vllm_runtime.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from kvlint.commands.verify import verify
from kvlint.scan.config import Config
from kvlint.verify import pytest_child
from kvlint.verify.selection import dotted_module, select_test_modules
from kvlint.verify.upstream import run_upstream_tests
from kvlint.verify.upstream_report import render_json, render_text
from mini_vllm import CONFIG_MODULE, CONFIG_PATH, MINI_VLLM, write_tree
from test_fix import FIXED_IN_0_29_0

MINI_TESTS = {
    "tests/__init__.py": "",
    "tests/helpers.py": """
        from types import SimpleNamespace as Namespace

        def configs(spec, dcp=2):
            vllm_config = Namespace(parallel_config=Namespace(decode_context_parallel_size=dcp))
            return vllm_config, Namespace(kv_cache_groups=[Namespace(kv_cache_spec=spec)])
        """,
    "tests/offloading/__init__.py": "",
    "tests/offloading/test_config.py": f"""
        import pytest

        from {CONFIG_MODULE} import build_offloading_config
        from tests.helpers import configs
        from vllm.v1.kv_cache_interface import FullAttentionSpec, MambaSpec, UniformTypeKVCacheSpecs

        def test_attention_scales_by_dcp():
            assert build_offloading_config(*configs(FullAttentionSpec(16))) == [32]

        def test_mamba_does_not_scale():
            assert build_offloading_config(*configs(MambaSpec(16))) == [16]

        def test_container_keeps_the_hand_written_gate():
            # pins the old behaviour: the rewrite scales the container, as the scheduler does
            container = UniformTypeKVCacheSpecs(16, {{"a": FullAttentionSpec(16)}})
            assert build_offloading_config(*configs(container)) == [16]

        @pytest.mark.skipif(True, reason="needs a CUDA device")
        def test_on_the_gpu():
            pass
        """,
    "tests/offloading/test_needs_a_plugin.py": f"""
        import kvlint_test_plugin_that_is_not_installed
        from {CONFIG_MODULE} import build_offloading_config

        def test_never_collected():
            assert build_offloading_config
        """,
    "tests/test_lazy_import.py": """
        def test_imports_inside():
            from vllm.distributed.kv_transfer.kv_connector.v1.offloading import config
            assert config.build_offloading_config
        """,
    "tests/test_unrelated.py": """
        from vllm.v1.core.kv_cache_utils import resolve_dcp_kv_block_size

        def test_resolver():
            assert resolve_dcp_kv_block_size
        """,
    "tests/test_new_syntax.py": "def broken(:\n    pass\n",
}


# The miniature's tests need no pytest plugin; loading this interpreter's (hypothesis) costs seconds a run.
NO_PLUGINS = ("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")


def snapshot(root: Path) -> dict[Path, bytes]:
    return {path: path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}


def make_runner() -> CliRunner:
    try:
        return CliRunner(mix_stderr=False)  # click < 8.2 mixes stderr in unless told
    except TypeError:
        return CliRunner()


@pytest.fixture(scope="module")
def mini(tmp_path_factory):
    """The folder holding vllm/ and tests/: a vLLM checkout in miniature (read-only use)."""
    root = tmp_path_factory.mktemp("mini") / "checkout"
    write_tree(root, MINI_VLLM)
    write_tree(root, MINI_TESTS)
    return root


@pytest.fixture(scope="module")
def mini_report(mini):
    """One run of the upstream tests on the miniature (two pytest runs: seconds), shared by the tests below."""
    before = snapshot(mini)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(*NO_PLUGINS)
        report = run_upstream_tests(mini, mini, sys.executable, 120, Config())
    assert snapshot(mini) == before, "the tree and its tests must stay untouched"
    return report


def test_test_modules_are_chosen_by_what_they_import_without_importing_them(mini):
    assert dotted_module(CONFIG_PATH) == CONFIG_MODULE
    assert dotted_module("vllm/v1/core/__init__.py") == "vllm.v1.core"
    selection = select_test_modules(mini, {CONFIG_MODULE})
    # test_needs_a_plugin.py would fail to import: it is read, not imported; a lazy import counts too.
    assert selection.modules == (
        "tests/offloading/test_config.py",
        "tests/offloading/test_needs_a_plugin.py",
        "tests/test_lazy_import.py",
    )
    assert selection.searched == 5
    assert [path for path, _ in selection.unreadable] == ["tests/test_new_syntax.py"]
    # A package's __init__ runs for every import below it.
    assert "tests/test_unrelated.py" in select_test_modules(mini, {"vllm.v1.core"}).modules


def test_report_before_and_after_on_a_miniature_vllm(mini_report):
    assert mini_report.exit_code == 1  # one test that passed before fails after
    report = json.loads(render_json(mini_report))
    assert report["changed_files"] == [CONFIG_PATH]
    assert report["unreadable_test_modules"][0]["path"] == "tests/test_new_syntax.py"
    config_tests = "tests/offloading/test_config.py::"
    [change] = report["changed"]
    assert change["test"] == config_tests + "test_container_keeps_the_hand_written_gate"
    assert (change["before"], change["after"], change["regression"]) == ("passed", "failed", True)
    assert change["detail"].startswith("assert [32] == [16]")
    for run in ("before", "after"):
        outcomes = report[run]["outcomes"]
        assert outcomes[config_tests + "test_attention_scales_by_dcp"]["outcome"] == "passed"
        assert outcomes[config_tests + "test_mamba_does_not_scale"]["outcome"] == "passed"
        assert outcomes[config_tests + "test_on_the_gpu"] == {"outcome": "skipped", "detail": "needs a CUDA device"}
        assert outcomes["tests/test_lazy_import.py::test_imports_inside"]["outcome"] == "passed"
        reason = report[run]["uncollected"]["tests/offloading/test_needs_a_plugin.py"]
        assert reason == "ModuleNotFoundError: No module named 'kvlint_test_plugin_that_is_not_installed'"
        assert report[run]["vllm_version"] == "0.0.mini"
    assert report["newly_uncollected"] == [] and report["ok"] is False


def test_text_report_names_the_regression_and_what_could_not_be_collected(mini_report):
    text = render_text(mini_report)
    assert f"  {CONFIG_PATH}\n" in text
    assert (
        "tests/offloading/test_config.py::test_container_keeps_the_hand_written_gate: passed -> failed  REGRESSION"
        in text
    )
    assert "tests/offloading/test_needs_a_plugin.py (before and after): ModuleNotFoundError" in text
    assert "needs a CUDA device" in text
    assert "result: 1 test(s) that passed before do not pass after; 0 module(s) no longer collected." in text


def test_command_runs_only_the_test_modules_asked_for(mini, monkeypatch):
    monkeypatch.setenv(*NO_PLUGINS)
    # --vllm names the package folder here (the folder that holds it means the same); tests/ beside it is found.
    arguments = ["--upstream-tests", "--vllm", str(mini / "vllm"), "--python", sys.executable]
    arguments += ["--test-module", "tests/test_lazy_import.py", "--test-module", "tests/test_unrelated.py"]
    result = make_runner().invoke(verify, arguments)
    assert result.exit_code == 0, result.stdout + result.stderr
    assert "not run: tests/test_unrelated.py imports no module the fix changed" in result.stdout
    assert "tests/test_lazy_import.py  before: 1 passed\n" in result.stdout
    assert "test_config.py" not in result.stdout
    assert "result: no test that passed before fails after" in result.stdout


def test_an_interpreter_without_pytest_is_one_line(mini, tmp_path):
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")], check=True)
    bare = tmp_path / "bare" / "bin" / "python"
    result = make_runner().invoke(verify, ["--upstream-tests", "--vllm", str(mini), "--python", str(bare)])
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and "cannot run vLLM's tests: ModuleNotFoundError" in result.stderr


def test_usage_errors(mini):
    runner = make_runner()
    assert runner.invoke(verify, ["--tests", str(mini)]).exit_code == 2
    assert runner.invoke(verify, ["--upstream-tests"]).exit_code == 2
    no_tests = runner.invoke(verify, ["--upstream-tests", "--vllm", str(mini), "--tests", str(mini / "vllm")])
    assert no_tests.exit_code == 2 and "holds no tests/ folder" in no_tests.stderr


def test_the_test_child_needs_only_the_standard_library():
    import ast

    tree = ast.parse(Path(pytest_child.__file__).read_text(encoding="utf-8"))
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert all(name.split(".")[0] in sys.stdlib_module_names | {"vllm", "pytest", "torch"} for name in imported)


# ------------------------------------------------------- the real vLLM 0.29.0


OFFLOADING_TESTS = "tests/v1/kv_connector/unit/offloading_connector/test_config.py"


@pytest.mark.slow
def test_0_29_0_offloading_config_tests_pass_after_kvlint_fix(vllm_runtime_env):
    result = make_runner().invoke(
        verify,
        [
            "--upstream-tests",
            "--vllm-release",
            "0.29.0",
            "--python",
            str(vllm_runtime_env.python),
            "--test-module",
            OFFLOADING_TESTS,
            "--format",
            "json",
        ],
    )
    assert result.exit_code == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    # the resolver calls (KV102: the offloading config, the simple offload manager) and the container-blind
    # checks kvlint unwraps safely (KV101), as test_fix proves of `kvlint fix` itself
    assert CONFIG_PATH in report["changed_files"]
    assert sorted(report["changed_files"]) == FIXED_IN_0_29_0
    assert report["test_modules"] == [OFFLOADING_TESTS]
    before, after = report["before"], report["after"]
    assert before["vllm_version"] == after["vllm_version"] == "0.29.0"
    assert before["uncollected"] == after["uncollected"] == {}
    assert before["counts"]["passed"] >= 40  # the module really ran: 43 tests in 0.29.0
    regressions = [
        test
        for test, found in before["outcomes"].items()
        if found["outcome"] == "passed" and after["outcomes"].get(test, {}).get("outcome") != "passed"
    ]
    assert regressions == []
    assert not any(change["regression"] for change in report["changed"])
