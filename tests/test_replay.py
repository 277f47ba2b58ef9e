"""A kept `kvlint check` run is replayed only while nothing it read changed, and says what a run would say.

Real runs of the program (`python -m kvlint`, as the `kvlint` script runs it) on the miniature vLLM tree, each with
its own cache key. A run is known to be a replay by what it imported (`-X importtime`, an interpreter flag, so the
run's key is the same): a replay never loads the command line (kvlint.cli).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from mini_vllm import CONFIG_PATH, MINI_VLLM, write_tree

BUGGY_LINE = "group.kv_cache_spec.block_size * (dcp if isinstance(group.kv_cache_spec, AttentionSpec) else 1)"
# How a phase line ends, in UTF-8 and as an ASCII stream escapes it.
PROGRESS = ("…\n", "\\u2026\n")
OLD_NS = 3_600_000_000_000
CONCISE = (
    "--output-format",
    "concise",
)  # an hour: stats older than the racy window (kvlint.scan.replay.RACY_WINDOW_NS)


@dataclass
class Run:
    status: int
    stdout: str
    stderr: str
    replayed: bool


def age(root: Path) -> None:
    """Every file and folder under `root` (and it) an hour old, as in a checkout: a stat newer than the racy
    window is never trusted, and a run that read one is not kept."""
    for path in [root, *root.rglob("*")]:
        info = path.lstat()
        os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns - OLD_NS), follow_symlinks=False)


@pytest.fixture
def checkout(tmp_path) -> Path:
    tree = write_tree(tmp_path / "checkout", MINI_VLLM)
    (tree / "vllm" / "empty").mkdir()
    age(tmp_path)
    return tree


@pytest.fixture
def kvlint(checkout, tmp_path):
    state = tmp_path / "state"

    def run(*arguments: str, cache: str = "cache", command: str = "check", **environment: str) -> Run:
        env = {**os.environ, "XDG_STATE_HOME": str(state), **environment}
        completed = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "kvlint", command, "--cache-dir", str(tmp_path / cache)]
            + list(arguments),
            cwd=checkout,
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        lines = completed.stderr.splitlines(keepends=True)
        imported = {line.rsplit("|", 1)[-1].strip() for line in lines if line.startswith("import time:")}
        # What a run says; not its progress (a phase begins: `kvlint: linting 11 files…`), which a replay, having no
        # phases, does not show.
        stderr = "".join(line for line in lines if not line.startswith("import time:") and not line.endswith(PROGRESS))
        return Run(completed.returncode, completed.stdout, stderr, "kvlint.cli" not in imported)

    run.fix = lambda *arguments, **environment: run(*arguments, command="fix", **environment)
    return run


def test_an_unchanged_tree_is_replayed_as_a_run_would_say_it(kvlint):
    first, second = kvlint("vllm"), kvlint("vllm")
    assert not first.replayed and second.replayed
    assert "KV102" in first.stdout and first.status == 1  # an error
    assert (second.status, second.stdout, second.stderr) == (first.status, first.stdout, first.stderr)
    fresh = kvlint("vllm", "--no-cache")
    assert not fresh.replayed and (fresh.status, fresh.stdout, fresh.stderr) == (
        first.status,
        first.stdout,
        first.stderr,
    )


def test_an_exit_status_is_replayed(kvlint):
    first, second = kvlint("vllm", "--exit-zero"), kvlint("vllm", "--exit-zero")
    assert first.status == 0 and second.replayed and second.status == 0


def test_an_edited_file_is_checked_again(kvlint, checkout):
    kvlint("vllm")
    config = checkout / CONFIG_PATH
    config.write_text(config.read_text().replace(BUGGY_LINE, "group.kv_cache_spec.block_size"))
    age(config)  # an old mtime again: its ctime and size are what changed
    after = kvlint("vllm")
    assert not after.replayed and "KV102" not in after.stdout
    assert kvlint("vllm").replayed


def test_a_file_added_to_a_folder_is_seen(kvlint, checkout):
    before = kvlint("vllm")
    copy = checkout / "vllm" / "empty" / "copy.py"  # in a folder that held no Python file when the run was kept
    copy.write_text((checkout / CONFIG_PATH).read_text())
    age(copy)
    after = kvlint("vllm")
    assert not after.replayed and "vllm/empty/copy.py" in after.stdout and after.stdout != before.stdout


def test_a_configuration_appearing_above_the_working_folder_is_seen(kvlint, checkout):
    before = kvlint("vllm")
    assert "KV102" in before.stdout
    settings = checkout.parent / "pyproject.toml"  # where no configuration was found the first time
    settings.write_text('[tool.kvlint]\nignore = ["KV102"]\n')
    age(settings)
    after = kvlint("vllm")
    assert not after.replayed and "KV102" not in after.stdout


def test_a_module_only_the_tree_index_reads_is_a_dependency(kvlint, checkout):
    """Scanning one folder reads the whole tree's index: the resolver's module, outside that folder, decides
    what the config's hand-written scaling is compared with."""
    folder = str(Path(CONFIG_PATH).parent)
    before = kvlint(folder)
    resolver = checkout / "vllm" / "v1" / "core" / "kv_cache_utils.py"
    resolver.write_text(resolver.read_text().replace("resolve_dcp_kv_block_size", "resolve_block_size"))
    age(resolver)
    after = kvlint(folder)
    assert not after.replayed and after.stdout != before.stdout
    assert after.stdout == kvlint(folder, "--no-cache").stdout


def test_environment_and_arguments_are_part_of_the_key(kvlint):
    kvlint("vllm")
    assert not kvlint("vllm", NO_COLOR="1").replayed
    assert kvlint("vllm", NO_COLOR="1").replayed
    assert not kvlint("vllm", "--select", "KV102").replayed


def test_a_record_this_user_did_not_sign_is_never_replayed(kvlint, tmp_path):
    honest = kvlint("vllm")
    (record,) = (tmp_path / "cache" / "results" / "runs").iterdir()
    header, _, document = record.read_bytes().partition(b"\n")
    forged = json.loads(document)
    forged["stdout"], forged["status"] = "", 0
    record.write_bytes(header + b"\n" + json.dumps(forged, separators=(",", ":")).encode())
    after = kvlint("vllm")
    assert not after.replayed and after.stdout == honest.stdout
    other_key = kvlint("vllm", XDG_STATE_HOME=str(tmp_path / "other-state"))
    assert not other_key.replayed and other_key.stdout == honest.stdout


def test_a_run_that_read_a_file_changed_just_before_it_is_not_kept(kvlint, checkout):
    (checkout / CONFIG_PATH).touch()  # its stat could still change without its content's being seen to
    kvlint("vllm")
    assert not kvlint("vllm").replayed
    age(checkout / CONFIG_PATH)
    kvlint("vllm")
    assert kvlint("vllm").replayed


def test_a_file_named_on_the_command_line_is_a_dependency(kvlint, checkout):
    """As pre-commit runs it: the files, not their folder; here one of the tree's outside vllm/, which the tree's
    index does not list. A named file is read in a worker, where no observer sees it."""
    named = checkout / "examples" / "plugin.py"
    named.parent.mkdir()
    named.write_text("x = 1\n")
    age(named.parent)
    before = kvlint(str(named))
    assert kvlint(str(named)).replayed
    named.write_text((checkout / CONFIG_PATH).read_text())
    age(named)
    after = kvlint(str(named))
    assert not after.replayed and after.stdout != before.stdout and "KV102" in after.stdout


def test_the_configuration_named_by_config_is_a_dependency(kvlint, checkout):
    settings = checkout.parent / "settings.toml"
    settings.write_text('[tool.kvlint]\nfail-on = "error"\n')
    age(settings)
    assert "KV102" in kvlint("--config", str(settings), "vllm").stdout
    settings.write_text('[tool.kvlint]\nignore = ["KV102"]\n')
    age(settings)
    after = kvlint("--config", str(settings), "vllm")
    assert not after.replayed and "KV102" not in after.stdout


def test_what_a_run_wrote_as_bytes_is_replayed_as_bytes(kvlint):
    """click writes bytes to a stream whose encoding it distrusts (ASCII): they are kept too."""
    first = kvlint("vllm", PYTHONIOENCODING="ascii")
    second = kvlint("vllm", PYTHONIOENCODING="ascii")
    assert second.replayed and "KV102" in first.stdout
    assert (second.status, second.stdout, second.stderr) == (first.status, first.stdout, first.stderr)


def test_a_dangling_link_is_a_dependency(kvlint, checkout):
    """Its target may appear where no walk looks (build/ is never walked): the link's own lookup is recorded (in
    the concise format, which reads no source for a frame)."""
    (checkout / "vllm" / "empty" / "generated.py").symlink_to(checkout / "build" / "generated.py")
    age(checkout)
    before = kvlint("vllm", *CONCISE)
    assert "dangling" in before.stdout and kvlint("vllm", *CONCISE).replayed
    (checkout / "build").mkdir()
    (checkout / "build" / "generated.py").write_text((checkout / CONFIG_PATH).read_text())
    age(checkout / "build")
    after = kvlint("vllm", *CONCISE)
    assert not after.replayed and "dangling" not in after.stdout


def test_a_file_changed_while_the_run_read_it_is_not_kept(checkout, tmp_path, monkeypatch):
    """Even with its mtime put back (rsync -a, cp -p, tar x): what the run saw is not what is there now."""
    from kvlint import filesystem
    from kvlint.scan import replay

    monkeypatch.chdir(checkout)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    recording = replay._Recording(["check", "vllm"])
    config = checkout / CONFIG_PATH
    try:
        replay.start_recording(["check", "vllm"])
        filesystem.read_regular_file(config)
        recording.seen = replay._recording.seen
    finally:
        replay._recording = None
        filesystem.observe(None)
        sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
    assert replay._dependencies(recording, str(tmp_path / "cache")) is not None  # unchanged: kept
    before = config.stat()
    config.write_text(config.read_text().replace("dcp", "DCP"))
    os.utime(config, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert replay._dependencies(recording, str(tmp_path / "cache")) is None


def test_a_requirement_file_appearing_beside_the_project_is_seen(tmp_path):
    """The release code outside the tree is judged against comes from its requirement files, found by a glob."""
    from kvlint import filesystem
    from kvlint.scan.vllm_requirement import find_vllm_requirement

    project = tmp_path / "plugin"
    project.mkdir()
    seen: list[tuple[str, str]] = []
    filesystem.observe(lambda kind, path: seen.append((kind, path)))
    try:
        assert find_vllm_requirement(project) is None
    finally:
        filesystem.observe(None)
    assert ("folder", str(project.resolve())) in seen and ("folder", str(project.resolve() / "requirements")) in seen


def test_a_fix_diff_is_replayed_and_a_fix_that_writes_never_is(kvlint, checkout):
    diff = kvlint.fix("--diff", "vllm")
    again = kvlint.fix("--diff", "vllm")
    assert diff.stdout.startswith("---") and again.replayed
    assert (again.status, again.stdout, again.stderr) == (diff.status, diff.stdout, diff.stderr)
    config = checkout / CONFIG_PATH
    written = kvlint.fix("vllm")
    assert not written.replayed and "resolve_dcp_kv_block_size" in config.read_text()
    age(checkout)
    after = kvlint.fix("--diff", "vllm")
    assert not after.replayed and after.stdout == ""  # the file on disk changed: nothing left to fix


def test_the_kept_runs_stay_few_and_recent(tmp_path):
    """One record per way kvlint was invoked would grow without end: the newest MAX_RUNS stay, none a month old."""
    from kvlint.scan import replay

    folder = tmp_path / "runs"
    folder.mkdir()
    now = 2_000_000_000
    for number in range(replay.MAX_RUNS + 6):
        record = folder / f"{number:03}.json"
        record.write_text("{}")
        os.utime(record, (now - number, now - number))  # 000 is the newest
    stale = folder / "stale.json"
    stale.write_text("{}")
    os.utime(stale, (0, 0))
    replay._prune(str(folder))
    assert sorted(p.name for p in folder.iterdir()) == [f"{n:03}.json" for n in range(replay.MAX_RUNS)]


def test_a_path_through_a_link_and_up_is_watched_where_it_leads(kvlint, checkout, tmp_path):
    """`link/..` is the folder above where the link leads, not the link's own folder: what was read there is what
    the run depends on (a path normalised by its text watched a folder that does not exist)."""
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "inner").mkdir(parents=True)
    (elsewhere / "benchmarks").mkdir()
    bench = elsewhere / "benchmarks" / "bench.py"
    bench.write_text((checkout / CONFIG_PATH).read_text())
    # Outside the vLLM tree: a project of its own, where the search for its vLLM requirement stops.
    (elsewhere / "pyproject.toml").write_text('[project]\nname = "elsewhere"\n')
    (checkout / "vllm" / "empty" / "link").symlink_to(elsewhere / "inner")
    age(tmp_path)
    target = "vllm/empty/link/../benchmarks"
    before = kvlint(target)
    assert "bench.py" in before.stdout and before.status == 1 and kvlint(target).replayed
    bench.write_text(bench.read_text().replace(BUGGY_LINE, "group.kv_cache_spec.block_size"))
    age(bench)
    after = kvlint(target)
    assert not after.replayed and after.stdout != before.stdout


@pytest.mark.parametrize(
    "environment",
    [{}, {"XDG_CACHE_HOME": "/x/cache"}, {"KVLINT_CACHE_DIR": "/y/kvlint"}, {"KVLINT_CACHE_DIR": "relative"}],
)
def test_a_kept_run_is_looked_for_where_the_scan_keeps_its_results(environment, monkeypatch):
    """The replay finds its folder without importing the scan (start-up cost): it must be the scan's own, or a
    kept run is never found (keep_run refuses to keep one elsewhere)."""
    from kvlint.commands.options import _cache_folder
    from kvlint.scan import replay

    for name in ("XDG_CACHE_HOME", "KVLINT_CACHE_DIR"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    scan_folder = os.path.join(os.path.abspath(_cache_folder(False, None)), "runs")
    assert replay.run_folder(["check", "vllm"], os.environ) == scan_folder
    given = os.path.join(os.path.abspath(_cache_folder(False, "here")), "runs")
    assert replay.run_folder(["check", "--cache-dir", "here", "vllm"], os.environ) == given
    assert replay.run_folder(["check", "--cache-dir=here", "vllm"], os.environ) == given
