"""Code outside the vLLM tree judged against the vLLM it targets (issue 28), offline: miniature plugin packages
(tests/plugin_packages.py) and small fake releases in place of the fetched ones.

- which target, from where (--vllm-release, [tool.kvlint] vllm, the project's requirement), said first;
- errors outside the tree by the same census proof as inside;
- remedies and fixes that name only what every targeted release defines.
"""

from __future__ import annotations

import json
import textwrap

import pytest

from kvlint.scan.targets import admitted_versions, choose_target
from kvlint.scan.vllm_requirement import find_vllm_requirement
from tests.kvlint_runner import run_kvlint
from tests.mini_vllm import write_tree
from tests.plugin_packages import CONNECTOR, connector_package, install_fake_releases
from tests.review_repos import git

WORKER = "range_connector/worker.py"


@pytest.fixture
def fake_releases(tmp_path, monkeypatch) -> list[str]:
    return install_fake_releases(tmp_path, monkeypatch)


def findings(completed) -> list[dict]:
    return json.loads(completed.stdout)


def check(package, *arguments):
    return run_kvlint("check", "--no-cache", "--format", "json", *arguments, ".", cwd=package)


# ------------------------------------------------------------------------------------------ where the target comes from


def test_the_requirement_is_read_from_pyproject_and_requirements_files(tmp_path):
    package = connector_package(tmp_path / "pkg", requirement="vLLM[audio]>=0.17,<0.31")
    found = find_vllm_requirement(package / "range_connector")
    assert found.text == ">=0.17,<0.31" and "pyproject.toml ([project] dependencies)" in found.source
    plain = write_tree(tmp_path / "plain", {"requirements.txt": "torch\n-r other.txt\nvllm == 0.29.0  # pinned\n"})
    assert find_vllm_requirement(plain).text == "==0.29.0"


@pytest.mark.parametrize(
    "line",
    ["vllm\n", "vllm[audio]\n", "vllm==0.29.0; python_version < '3'\n", "vllm-kvlint==0.1\n", "not a requirement\n"],
)
def test_a_requirement_that_pins_nothing_is_no_target(tmp_path, line):
    assert find_vllm_requirement(write_tree(tmp_path / "pkg", {"requirements.txt": line})) is None


def test_the_option_wins_over_the_configuration_which_wins_over_the_requirement(tmp_path):
    package = connector_package(tmp_path / "pkg", requirement="vllm==0.29.0")
    assert choose_target("0.30", "0.17.0", "cfg", [package])[1] == "--vllm-release"
    assert choose_target(None, ">=0.17", "cfg", [package]) == (">=0.17", "[tool.kvlint] vllm in cfg")
    assert choose_target(None, None, None, [package])[0] == "==0.29.0"


def test_a_range_is_judged_against_its_oldest_and_newest_listed_release(fake_releases):
    assert admitted_versions(">=0.17,<0.31", "cfg", None, quiet=True) == ("0.17.0", "0.30.0")
    assert admitted_versions("~=0.29.0", "cfg", None, quiet=True) == ("0.29.0",)
    assert admitted_versions("==0.29.0", "cfg", None, quiet=True) == ("0.29.0",)
    assert fake_releases == []  # choosing fetches nothing


def test_a_range_no_listed_release_admits_is_one_line_exit_2(tmp_path, fake_releases):
    package = connector_package(tmp_path / "pkg", requirement="vllm>=9")
    completed = check(package)
    assert completed.returncode == 2 and completed.stdout == ""
    assert completed.stderr.splitlines()[-1].endswith("no vLLM release the package index lists is admitted by `>=9`")


def test_a_configured_vllm_that_is_not_a_version_is_one_line_exit_2(tmp_path, fake_releases):
    package = connector_package(tmp_path / "pkg", kvlint_table='[tool.kvlint]\nvllm = "newest please"')
    completed = check(package)
    assert completed.returncode == 2 and "not a vLLM version or version range" in completed.stderr
    assert len(completed.stderr.splitlines()) == 1 and fake_releases == []


# ------------------------------------------------------------------------------------------ judged against the target


def test_paths_with_a_release_are_judged_against_it_and_only_theirs_reported(tmp_path, fake_releases):
    package = connector_package(tmp_path / "pkg", requirement="vllm==0.29.0")
    completed = check(package, "--vllm-release", "0.30.0")
    first = completed.stderr.splitlines()[0]
    assert first == "kvlint: judging against vLLM 0.30.0, from --vllm-release; only the PATHs' files are reported"
    assert fake_releases == ["0.30.0"]
    assert {f["path"] for f in findings(completed)} == {WORKER}


def test_the_projects_own_pin_is_the_target_and_said_first(tmp_path, fake_releases):
    package = connector_package(tmp_path / "pkg", requirement="vllm==0.29.0")
    completed = check(package)
    first = completed.stderr.splitlines()[0]
    assert first.startswith("kvlint: judging against vLLM 0.29.0, from the requirement `vllm==0.29.0` in ")
    assert fake_releases == ["0.29.0"]


def test_the_configured_target_is_said_with_its_file(tmp_path, fake_releases):
    package = connector_package(tmp_path / "pkg", kvlint_table='[tool.kvlint]\nvllm = "0.30.0"')
    completed = check(package)
    assert completed.stderr.splitlines()[0].startswith(
        "kvlint: judging against vLLM 0.30.0, from [tool.kvlint] vllm in "
    )


def test_without_a_target_the_builtin_reference_is_said_with_how_to_choose(tmp_path, fake_releases):
    package = write_tree(tmp_path / "pkg", {"worker.py": textwrap.dedent(CONNECTOR)})
    completed = check(package)
    first = completed.stderr.splitlines()[0]
    assert "assuming kvlint's built-in vLLM 0.29.0" in first and "--vllm-release VERSION" in first
    assert fake_releases == []


def test_release_with_paths_in_a_vllm_tree_is_a_usage_error(tmp_path, fake_releases):
    tree = write_tree(tmp_path / "tree", {"vllm/v1/kv_cache_interface.py": "class KVCacheSpec:\n    pass\n"})
    completed = run_kvlint("check", "--vllm-release", "0.29.0", "vllm", cwd=tree)
    assert completed.returncode == 2 and "in a vLLM tree" in completed.stderr and fake_releases == []


# ------------------------------------------------------------------------------------------ errors by the census's proof


def test_a_container_blind_check_is_an_error_when_the_targets_census_proves_a_container_reaches_it(
    tmp_path, fake_releases
):
    package = connector_package(tmp_path / "pkg", requirement="vllm==0.29.0")
    judged = {f["line"]: f for f in findings(check(package)) if f["code"] == "KV101"}
    assert judged[13]["severity"] == "error" and "DsaForCausalLM with default settings" in judged[13]["message"]
    # The same file with no target: kvlint's built-in classes have no census, so nothing is proven.
    (package / "pyproject.toml").unlink()
    alone = {f["line"]: f for f in findings(check(package)) if f["code"] == "KV101"}
    assert alone[13]["severity"] == "warning"


def test_the_census_error_fails_the_run_where_the_builtin_reference_exits_0(tmp_path, fake_releases):
    package = connector_package(tmp_path / "pkg", requirement="torch")
    assert run_kvlint("check", "--no-cache", "--select", "KV101", ".", cwd=package).returncode == 0
    assert (
        run_kvlint("check", "--no-cache", "--select", "KV101", "--vllm-release", "0.29.0", ".", cwd=package).returncode
        == 1
    )


# ------------------------------------------------------------------------------------------ remedies and fixes per version


def test_a_pinned_modern_target_offers_its_idioms_and_fixes(tmp_path, fake_releases):
    package = connector_package(tmp_path / "pkg", requirement="vllm==0.29.0")
    judged = {f["line"]: f for f in findings(check(package))}
    assert "iter_layer_specs(g.kv_cache_spec)" in judged[13]["message"]
    # The hand-written scaling (line 9) is a related location of its function's divergent path (line 5), whose fix it is.
    assert [(r["code"], r["line"]) for r in judged[5]["related"]][0] == ("KV102", 9)
    assert judged[13]["fix"] is not None and judged[5]["fix"]["edits"][0]["line"] == 9


def test_a_range_reaching_back_before_029_names_and_imports_nothing_its_oldest_release_lacks(tmp_path, fake_releases):
    package = connector_package(tmp_path / "pkg")  # vllm>=0.17,<0.31
    completed = check(package)
    assert "vLLM 0.17.0 and 0.30.0" in completed.stderr.splitlines()[0]
    assert sorted(fake_releases) == ["0.17.0", "0.30.0"]
    judged = {f["line"]: f for f in findings(completed)}
    for line in (5, 13):  # 5: the function of the scaling at line 9, its root cause (KV103)
        remedy = judged[line]["message"].split("; ")[-1]  # the remedy ends the message
        assert "iter_layer_specs" not in remedy and "call `resolve_dcp_kv_block_size" not in remedy, remedy
        assert judged[line]["fix"] is None
        assert "vLLM 0.17.0, which this code also targets, defines no" in judged[line]["fix_unavailable"]
    # The error stands: the newest release's census proves it.
    assert judged[13]["severity"] == "error"


def test_fix_on_a_range_writes_nothing_and_on_a_pin_imports_from_the_targets_resolver(tmp_path, fake_releases):
    ranged = connector_package(tmp_path / "ranged")
    before = (ranged / WORKER).read_bytes()
    run_kvlint("fix", "--no-cache", ".", cwd=ranged)
    assert (ranged / WORKER).read_bytes() == before
    pinned = connector_package(tmp_path / "pinned", requirement="vllm==0.30.0")
    run_kvlint("fix", "--no-cache", ".", cwd=pinned)
    fixed = (pinned / WORKER).read_text()
    assert "from vllm.v1.core.kv_cache_utils import resolve_dcp_kv_block_size" in fixed
    assert "resolve_dcp_kv_block_size(group.kv_cache_spec, dcp)" in fixed
    assert "from vllm.v1.kv_cache_interface import AttentionSpec, iter_layer_specs" in fixed
    assert not (tmp_path / "releases" / "vllm-0.30.0" / "vllm" / WORKER).exists()


# ------------------------------------------------------------------------------------------ review of a plugin's pull request


BEFORE = """
    class RangeConnectorWorker:
        def attention_groups(self, kv_cache_config):
            return list(kv_cache_config.kv_cache_groups)
    """


def plugin_pull_request(root, requirement: str):
    """A plugin repository: `main` keeps every group; the checked-out `pr` adds a container-blind check."""
    package = connector_package(root, requirement=requirement)
    worker = package / WORKER
    before = textwrap.dedent(BEFORE).lstrip()
    after = before.replace(
        "list(kv_cache_config.kv_cache_groups)",
        "[g for g in kv_cache_config.kv_cache_groups if isinstance(g.kv_cache_spec, AttentionSpec)]",
    )
    worker.write_text(before)
    after = "from vllm.v1.kv_cache_interface import AttentionSpec\n\n\n" + after
    git(package, "init", "-q", "-b", "main")
    git(package, "add", "-A")
    git(package, "commit", "-qm", "base")
    git(package, "checkout", "-qb", "pr")
    worker.write_text(after)
    git(package, "commit", "-qam", "pr: attention groups only")
    return package


def test_review_of_a_plugin_judges_its_change_against_the_base_revisions_target(tmp_path, fake_releases):
    targeted = plugin_pull_request(tmp_path / "targeted", "vllm==0.29.0")
    completed = run_kvlint("review", "--base", "main", "--head", "pr", "--format", "markdown", cwd=targeted)
    assert completed.stderr.splitlines()[0].startswith("kvlint: judging against vLLM 0.29.0, from the requirement")
    assert completed.returncode == 1 and "DsaForCausalLM" in completed.stdout
    # The same change in a repository that names no vLLM: kvlint's built-in classes prove nothing, exit 0.
    plain = plugin_pull_request(tmp_path / "plain", "torch")
    completed = run_kvlint("review", "--base", "main", "--head", "pr", "--format", "markdown", cwd=plain)
    assert "assuming kvlint's built-in vLLM 0.29.0" in completed.stderr.splitlines()[0]
    assert completed.returncode == 0


def test_review_takes_the_release_on_the_command_line(tmp_path, fake_releases):
    package = plugin_pull_request(tmp_path / "pkg", "torch")
    completed = run_kvlint("review", "--base", "main", "--head", "pr", "--vllm-release", "0.30.0", cwd=package)
    assert completed.returncode == 1 and fake_releases == ["0.30.0"]
