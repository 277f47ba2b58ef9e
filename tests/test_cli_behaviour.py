"""kvlint behaves like a command-line tool: one-line usage errors (exit 2), -h, exit 130 on Ctrl-C, and
progress on stderr — one line per phase in a log, a live counter on a terminal, nothing with --quiet —
while stdout carries the report alone."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from kvlint.cli import COMMANDS, main
from kvlint.scan import jobs as scan_jobs
from kvlint.scan import progress as progress_module
from kvlint.scan.config import Config
from kvlint.scan.progress import Display, Progress, display_for
from kvlint.scan.runner import scan
from kvlint_runner import run_kvlint
from test_text_layout import located

BUGGY = textwrap.dedent(
    """\
    from vllm.v1.kv_cache_interface import AttentionSpec


    def spans(kv_cache_config, dcp):
        return [
            g.kv_cache_spec.block_size * (dcp if isinstance(g.kv_cache_spec, AttentionSpec) else 1)
            for g in kv_cache_config.kv_cache_groups
        ]
    """
)
INTERFACE = "class KVCacheSpec: pass\nclass AttentionSpec(KVCacheSpec): pass\n"


@pytest.fixture
def tree(tmp_path) -> Path:
    """A miniature vLLM tree: one file some rule reports in, one no rule could (settled without parsing)."""
    (tmp_path / "vllm" / "v1").mkdir(parents=True)
    (tmp_path / "vllm" / "v1" / "kv_cache_interface.py").write_text(INTERFACE)
    (tmp_path / "vllm" / "connector.py").write_text(BUGGY)
    (tmp_path / "vllm" / "plain.py").write_text("def add(a, b):\n    return a + b\n")
    return tmp_path


def runner() -> CliRunner:
    try:
        return CliRunner(mix_stderr=False)  # click < 8.2 mixes stderr in unless told
    except TypeError:
        return CliRunner()


def kvlint(*arguments: str, cwd: Path) -> subprocess.CompletedProcess:
    return run_kvlint(*arguments, cwd=cwd)


def kvlint_process(*arguments: str, cwd: Path) -> subprocess.CompletedProcess:
    """The real `python -m kvlint`, for what only a process shows (the program's name in its messages)."""
    return subprocess.run(
        [sys.executable, "-m", "kvlint", *arguments], cwd=cwd, capture_output=True, text=True, timeout=120
    )


# ------------------------------------------------------------------------------------------ usage errors


@pytest.mark.parametrize(
    "arguments",
    [
        ["check", "--nope"],
        ["check", "--format", "xml", "."],
        ["chek"],
        ["explain"],
        ["explain", "KV999"],
        ["fix", "--jobs", "0", "."],
        ["paths", "--format", "yaml"],
        ["review", "--pr", "many"],
        ["verify", "--nope"],
        ["rules", "extra"],
        ["check", "--vllm-release", "0.29.0", "--baseline-commit", "HEAD", "pkg"],  # kvlint's own usage error
    ],
    ids=lambda arguments: " ".join(arguments),
)
def test_every_usage_error_is_one_line_and_exit_2(arguments, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = runner().invoke(main, arguments)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith("kvlint: error: ") and "Usage:" not in line


def test_a_usage_error_from_the_real_command_names_kvlint_and_where_to_read_the_usage(tmp_path):
    completed = kvlint_process("check", "--format", "xml", ".", cwd=tmp_path)
    assert completed.returncode == 2 and completed.stdout == ""
    assert completed.stderr == (
        "kvlint: error: Invalid value for '--format': 'xml' is not one of 'concise', 'full', 'github', 'json', 'sarif', 'text'. "
        "(see `kvlint check --help`)\n"
    )


def test_control_characters_in_a_usage_error_are_escaped():
    result = runner().invoke(main, ["check", "--format", "a\nb\x1b[31m"])
    [line] = result.stderr.splitlines()
    assert "\x1b" not in line and "\\x1b" in line


@pytest.mark.parametrize("command", [[], *([name] for name in sorted(COMMANDS))], ids=lambda c: c[0] if c else "kvlint")
def test_dash_h_is_help(command):
    short = runner().invoke(main, [*command, "-h"])
    long = runner().invoke(main, [*command, "--help"])
    assert short.exit_code == long.exit_code == 0
    assert short.stdout == long.stdout and short.stdout.startswith("Usage: ")
    assert "-h, --help" in short.stdout


# ------------------------------------------------------------------------------------------ Ctrl-C


def interrupted(*_args, **_kwargs):
    raise KeyboardInterrupt


@pytest.mark.parametrize(
    ("command", "target"),
    [
        (["check", "--no-cache", "vllm"], "kvlint.commands.options.scan"),
        (["fix", "--no-cache", "vllm"], "kvlint.commands.options.scan"),
        (["paths", "vllm"], "kvlint.commands.paths.scan"),
        (["review", "--base", "main"], "kvlint.commands.review.repository_root"),
        (["verify", "--vllm", "vllm"], "kvlint.commands.verify.run_child"),  # waits on the vLLM child
    ],
    ids=lambda value: value[0] if isinstance(value, list) else None,
)
def test_a_keyboard_interrupt_where_each_command_waits_exits_130(command, target, tree, monkeypatch):
    """KeyboardInterrupt raised (patched in) where each command waits: every command maps it to 130. The
    real SIGINT, to kvlint and its worker processes: tests/test_interrupt.py."""
    monkeypatch.chdir(tree)
    monkeypatch.setattr(target, interrupted)
    result = runner().invoke(main, command)
    assert result.exit_code == 130, result.output
    assert result.stderr.rstrip().endswith("kvlint: interrupted") and "Aborted!" not in result.stderr


# ------------------------------------------------------------------------------------------ progress


def phase_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.endswith("…")]


@pytest.mark.parametrize("output_format", ["text", "concise", "json", "sarif"])
def test_a_log_gets_one_line_per_phase_and_stdout_only_the_report(tree, output_format):
    option = "--output-format" if output_format == "concise" else "--format"
    completed = kvlint("check", "--no-cache", "--fail-on", "warning", option, output_format, "vllm", cwd=tree)
    assert completed.returncode == 1, completed.stderr
    assert phase_lines(completed.stderr) == [
        "kvlint: linting 3 files…",
        "kvlint: indexing the tree…",
        "kvlint: parsing 1 of them (1 kB)…",
    ]
    assert "\r" not in completed.stderr  # nothing redrawn in a log
    lines = completed.stdout.splitlines()
    if output_format == "concise":  # a finding per line
        assert lines and all(line.startswith("vllm/connector.py:") for line in lines), lines
    elif output_format == "text":  # the full layout: a headline, its place, its frame; a blank line between
        assert located(completed.stdout) and all(f.startswith("vllm/connector.py:") for f in located(completed.stdout))
    else:
        json.loads(completed.stdout)


def test_with_a_cache_the_index_is_read_first(tree, tmp_path):
    completed = kvlint("check", "--cache-dir", str(tmp_path / "cache"), "vllm", cwd=tree)
    assert phase_lines(completed.stderr)[:2] == ["kvlint: indexing the tree…", "kvlint: linting 3 files…"]


def test_quiet_silences_progress_but_not_the_findings_or_the_summary(tree):
    loud = kvlint("check", "--no-cache", "--fail-on", "warning", "vllm", cwd=tree)
    for flag in ("--quiet", "-q"):
        quiet = kvlint("check", "--no-cache", "--fail-on", "warning", flag, "vllm", cwd=tree)
        assert quiet.returncode == 1 and quiet.stdout == loud.stdout
        assert quiet.stderr.splitlines() == [
            line for line in loud.stderr.splitlines() if line not in phase_lines(loud.stderr)
        ]
        assert quiet.stderr.startswith("kvlint: ") and "finding" in quiet.stderr


def test_the_display_follows_the_terminal_and_quiet():
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    assert display_for(False, Terminal()) is Display.LIVE
    assert display_for(False, io.StringIO()) is Display.LINES
    assert display_for(True, Terminal()) is Display.NONE


def test_the_live_line_counts_the_parse_phase_in_megabytes_and_seconds(monkeypatch, capsys):
    monkeypatch.setattr(progress_module, "PROGRESS_DELAY_S", 0.0)
    monkeypatch.setattr(progress_module, "PROGRESS_INTERVAL_S", 0.0)
    meter = Progress(Display.LIVE)
    meter.counting(2512)
    for _ in range(2429):
        meter.advance()
    meter.parsing(83, 9_600_000)
    meter.advance(4_000_000)
    assert meter.live_line(meter.parse_started + 14.2) == "kvlint: checked 2430/2512 files (parsing: 4.0/9.6 MB, 14 s)"
    meter.close()
    err = capsys.readouterr().err
    assert err.endswith("\r\x1b[K") and "(parsing: 4.0/9.6 MB, 0 s)" in err
    assert "…" not in err  # a terminal gets the counter, not the phase lines


def test_the_live_line_is_redrawn_while_the_workers_parse(tmp_path, monkeypatch, capsys):
    """The counter must not sit still for the seconds the largest files take: the pool wakes the meter."""
    monkeypatch.setattr(progress_module, "PROGRESS_DELAY_S", 0.0)
    monkeypatch.setattr(progress_module, "PROGRESS_INTERVAL_S", 0.0)
    monkeypatch.setattr(scan_jobs, "WAIT_TICK_S", 0.05)
    monkeypatch.setattr(scan_jobs, "POOL_MIN_BYTES", 0)  # a pool for these two files
    package = tmp_path / "pkg"
    package.mkdir()
    for number in range(2):  # two files that take a worker about a second each
        (package / f"big_{number}.py").write_text(BUGGY + BUGGY.split("\n\n\n")[1] * 60)
    result = scan([package], Config(), None, [], jobs=2, cache_dir=None, progress=Display.LIVE)
    assert len(result.files) == 2
    draws = capsys.readouterr().err.split("\r")
    parse_draws = [draw for draw in draws if "(parsing:" in draw]
    assert len(parse_draws) > 2 * len(result.files)  # more than one draw per result: redrawn while waiting


def test_a_download_says_what_it_fetches_and_how_big(tmp_path, monkeypatch):
    from test_releases import SDIST_NAME, SOURCES, VERSION, FakeIndex, make_sdist

    index = FakeIndex()
    try:
        index.publish({SDIST_NAME: make_sdist(SOURCES)})
        environment = {
            **{k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")},
            "PIP_INDEX_URL": index.url,
            "PIP_CONFIG_FILE": os.devnull,
            "KVLINT_CACHE_DIR": str(tmp_path / "cache"),
        }
        command = [sys.executable, "-m", "kvlint", "check", "--format", "json", "--vllm-release", VERSION]
        completed = subprocess.run(command, cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=120)
        assert completed.returncode == 0, completed.stderr
        assert re.search(
            rf"^kvlint: downloading vllm {re.escape(VERSION)} \([\d.]+ MB, its source distribution, from 127\.0\.0\.1\)…$",
            completed.stderr,
            re.MULTILINE,
        ), completed.stderr
        assert json.loads(completed.stdout) == []
        again = subprocess.run([*command, "--quiet"], cwd=tmp_path, env=environment, capture_output=True, text=True)
        assert again.stderr == "" and json.loads(again.stdout) == []  # cached: nothing fetched, nothing said
    finally:
        index.close()
