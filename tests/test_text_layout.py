"""The full text layout, as ruff lays it out: a headline, ` --> path:line:col`, the source frame, the evidence,
`related:` and `help:`; every line within the terminal's width, broken at spaces and never inside a name or a
piece of code; the remedy whole; colour on a terminal as `--color` and the environment say; the frame read
through kvlint's one safe reader."""

from __future__ import annotations

import importlib.util
import os
import re
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from kvlint.cli import main
from kvlint.reporters.colour import plain, use_colour
from kvlint.reporters.text import TextReporter, finding_lines
from kvlint.reporters.wrap import DEFAULT_WIDTH, display_width, terminal_width, wrap
from kvlint.types import Finding, RelatedLocation
from mini_vllm import CONFIG_PATH, MINI_VLLM, write_tree

ROOT = Path(__file__).resolve().parents[1]
WIDTHS = (80, 100, 120, 200)
HEADLINE = re.compile(r"(KV\d{3})(?: \[[^\]]*\])? (?:error|warning): ")
ARROW = re.compile(r" *--> (\S+:\d+:\d+)")
GUTTER = re.compile(r" *(\d+|…)? \|")


def located(text: str) -> list[str]:
    """Each finding of the full layout as `path:line:column CODE`, in order: its headline's code and its
    ` --> ` line's place (for tests that ask where findings are, not how they are worded)."""
    found, code, place = [], None, None
    for line in plain(text).splitlines():
        if (head := HEADLINE.match(line)) is not None:
            code = head.group(1)
        elif code is not None and (place is not None or line.lstrip().startswith("--> ")):
            # A path wider than the terminal goes on over the next lines, broken after a `/`.
            place = (place or "") + line.strip().removeprefix("--> ")
            if (arrow := ARROW.fullmatch(f"--> {place}")) is not None:
                found.append(f"{arrow.group(1)} {code}")
                code = place = None
    return found


def blocks(text: str) -> list[list[str]]:
    """The full layout's findings, each as its lines (findings are apart by one blank line)."""
    return [block.splitlines() for block in plain(text).strip("\n").split("\n\n")]


SOURCE = """\
def build(kv_cache_config, parallel_config):
    return [
        group.kv_cache_spec.block_size * (parallel_config.decode_context_parallel_size if isinstance(group.kv_cache_spec, AttentionSpec) else 1)
        for group in kv_cache_config.kv_cache_groups
    ]
"""
REMEDY_CODE = (
    "resolve_dcp_kv_block_size(self.cpu_kv_cache_config.kv_cache_groups[self.fa_gidx].kv_cache_spec, "
    "parallel_config.decode_context_parallel_size)"
)


def long_finding(path: str) -> Finding:
    """A finding with every part, each longer than a narrow terminal: the headline, the evidence, a related
    location, a remedy whose code is longer than a line of 80, and a flagged line wider than 120."""
    return Finding(
        path,
        3,
        9,
        3,
        136,
        "KV102",
        "hand-rolled-dcp-scaling",
        "the whole message",
        fix=None,
        related=(
            RelatedLocation(
                path,
                3,
                91,
                3,
                137,
                "KV101",
                "m",
                headline="`isinstance(group.kv_cache_spec, "
                "AttentionSpec)` is False for DeepseekV32ForCausalLM's container of MLAAttentionSpec layers",
            ),
        ),
        headline="`group.kv_cache_spec.block_size * (parallel_conf…` gives 16 tokens per block for a "
        "UniformTypeKVCacheSpecs{MLA, indexer} group at DCP=2, the resolver 32",
        detail="`resolve_dcp_kv_block_size` gives 32 (its `isinstance(group.kv_cache_spec, AttentionSpec)` gate); "
        "the same for UniformTypeKVCacheSpecs{FullAttention×2} and 3 more kinds that the scheduler scales",
        remedy=f"call `{REMEDY_CODE}` instead",
    )


@pytest.fixture
def flagged_file(tmp_path) -> Path:
    path = tmp_path / "vllm" / "config.py"
    path.parent.mkdir()
    path.write_text(SOURCE)
    return path


# ------------------------------------------------------------------------------------------ the layout


def test_a_finding_reads_as_ruffs_full_layout(flagged_file):
    finding = Finding(
        str(flagged_file),
        3,
        9,
        3,
        39,
        "KV102",
        "hand-rolled-dcp-scaling",
        "m",
        related=(RelatedLocation(str(flagged_file), 3, 91, 3, 137, "KV101", "`isinstance(…)` is False"),),
        headline="`group.kv_cache_spec.block_size` gives 16",
        detail="the resolver gives 32",
        remedy="call `resolve_dcp_kv_block_size(group.kv_cache_spec, dcp)` instead",
    )
    lines = finding_lines(finding, flagged_file.parent.parent, width=200)
    assert lines == [
        "KV102 error: `group.kv_cache_spec.block_size` gives 16",
        " --> vllm/config.py:3:9",
        "  |",
        "2 |     return [",
        "3 |         group.kv_cache_spec.block_size * (parallel_config.decode_context_parallel_size if isinstance("
        "group.kv_cache_spec, AttentionSpec) else 1)",
        "  |         ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
        "4 |         for group in kv_cache_config.kv_cache_groups",
        "  |",
        "the resolver gives 32",
        "related: line 3: KV101 `isinstance(…)` is False",
        "help: call `resolve_dcp_kv_block_size(group.kv_cache_spec, dcp)` instead",
    ]


@pytest.mark.parametrize("width", WIDTHS)
def test_no_line_is_wider_than_the_terminal_and_nothing_is_cut(flagged_file, width):
    finding = long_finding(str(flagged_file))
    lines = finding_lines(finding, flagged_file.parent.parent, width=width)
    assert max(map(display_width, lines)) <= width, lines
    # The evidence and the remedy keep every character: the lines hold them, spaces aside.
    assert _joined(finding.detail) in _joined(" ".join(lines)) and _joined(finding.remedy) in _joined(" ".join(lines))
    # The remedy's code is whole: on one line where a line holds it, else broken only between its parts.
    help_at = next(i for i, line in enumerate(lines) if line.startswith("help: "))
    remedy = "".join(line[6:] for line in lines[help_at:])
    assert _joined(REMEDY_CODE) in _joined(remedy) and "…" not in remedy
    if width - 6 >= len(REMEDY_CODE) + 2:
        assert any(f"`{REMEDY_CODE}`" in line for line in lines[help_at:])


def _joined(text: str) -> str:
    return "".join(text.split())


def test_a_long_source_line_is_cut_around_its_carets_only_in_the_frame(flagged_file):
    finding = Finding(str(flagged_file), 3, 91, 3, 137, "KV101", "n", "m", headline="h")
    lines = finding_lines(finding, None, width=80)
    code, carets = next((lines[i], lines[i + 1]) for i, line in enumerate(lines) if line.startswith("3 |"))
    assert code.startswith("3 | …") and display_width(code) <= 80
    assert (
        code[carets.index("^") : carets.rindex("^") + 1]
        == "isinstance(group.kv_cache_spec, AttentionSpec)"[: carets.count("^")]
    )


def test_a_range_over_many_lines_shows_its_first_lines(tmp_path):
    path = tmp_path / "long.py"
    path.write_text("x = f(\n" + "".join(f"    a{n},\n" for n in range(20)) + ")\n")
    lines = finding_lines(Finding(str(path), 1, 5, 22, 2, "KV105", "n", "m", headline="h"), None, width=100)
    frame = [line for line in lines if GUTTER.match(line)]
    assert frame == ["  |", "1 | x = f(", "  |     ^^", "2 |     a0,", "3 |     a1,", "… |", "  |"]


def test_tabs_and_control_characters_in_the_source_are_shown_safely(tmp_path):
    path = tmp_path / "odd.py"
    path.write_bytes(b"x = 1\n\tif isinstance(s, A): y = '\x1b[2J\xe2\x80\xae'\n")
    lines = finding_lines(Finding(str(path), 2, 5, 2, 21, "KV101", "n", "m", headline="h"), None, width=100)
    text = "\n".join(lines)
    assert "\x1b" not in text and "\u202e" not in text and "\t" not in text
    code, carets = next((lines[i], lines[i + 1]) for i, line in enumerate(lines) if line.startswith("2 |"))
    assert code[carets.index("^") : carets.rindex("^") + 1] == "isinstance(s, A)"


@pytest.mark.parametrize("kind", ["missing", "fifo", "link", "line gone", "undecodable"])
def test_a_file_that_cannot_be_read_has_no_frame(tmp_path, kind):
    path = tmp_path / "gone.py"
    if kind == "fifo":
        os.mkfifo(path)  # opening it for reading would wait for a writer
    elif kind == "link":
        (tmp_path / "target.py").write_text("a\nb\nc\n")
        path.symlink_to(tmp_path / "target.py")  # kvlint never reads through a link
    elif kind == "line gone":
        path.write_text("a = 1\n")
    elif kind == "undecodable":
        path.write_bytes(b"a = '\xff'\nb\nc\n")
    started = time.monotonic()
    lines = finding_lines(Finding(str(path), 3, 1, 3, 2, "KV000", "n", "cannot read"), None, width=100)
    assert time.monotonic() - started < 2
    assert lines == ["KV000 error: cannot read", f"--> {path}:3:1"]


def test_each_file_is_read_once_per_report(flagged_file, monkeypatch):
    from kvlint.reporters import source_frame

    reads = []
    real = source_frame.read_regular_file
    monkeypatch.setattr(source_frame, "read_regular_file", lambda *a, **k: reads.append(a[0]) or real(*a, **k))
    findings = [Finding(str(flagged_file), n, 1, n, 2, "KV102", "n", "m", headline="h") for n in (1, 2, 3)]
    TextReporter(width=100).render(findings, ())
    assert reads == [str(flagged_file)]


# ------------------------------------------------------------------------------------------ wrapping


WORD = st.text(alphabet="abcdefghij_.()[],", min_size=1, max_size=30)
CODE = st.lists(WORD, min_size=1, max_size=8).map(lambda words: "`" + " ".join(words) + "`")


@given(
    st.lists(st.one_of(WORD, CODE, st.text(alphabet="ab`_", min_size=1, max_size=5)), min_size=1, max_size=30),
    st.sampled_from(WIDTHS),
    st.booleans(),
)
def test_wrapping_keeps_every_character_within_the_width(atoms, width, labelled):
    text = " ".join(atoms)
    first, rest = ("help: ", "      ") if labelled else ("", "")
    lines = wrap(text, width, first, rest)
    assert all(display_width(line) <= width for line in lines)
    assert _joined("".join(line.removeprefix(rest) for line in lines).removeprefix(first)) == _joined(text)
    # A word or code span that fits a line is never broken: it is whole on some line.
    room = width - len(rest)
    # (a stray backtick pairs with another, which makes other spans: only whole spans are checked)
    spans_intact = all(a.count("`") == 0 or (a.count("`") == 2 and a[0] == a[-1] == "`") for a in atoms)
    for atom in atoms if spans_intact else ():
        if len(atom) <= room and "`" in atom:
            assert any(atom in line for line in lines), (atom, lines)


def test_a_backtick_that_opens_no_span_is_kept_where_it_is():
    assert wrap("x `y z and `w`", 100) == ["x `y z and `w`"]


def test_the_width_is_the_terminals_or_a_hundred_off_one(monkeypatch):
    class Terminal:
        def isatty(self):
            return True

    monkeypatch.setenv("COLUMNS", "132")
    assert terminal_width(Terminal()) == 132
    assert terminal_width(open(os.devnull, "w")) == DEFAULT_WIDTH == 100


# ------------------------------------------------------------------------------------------ colour


class Tty:
    def isatty(self):
        return True


@pytest.mark.parametrize(
    ("choice", "environment", "stream", "coloured"),
    [
        ("auto", {}, Tty(), True),
        ("auto", {}, None, False),
        ("auto", {"NO_COLOR": "1"}, Tty(), False),
        ("auto", {"NO_COLOR": ""}, Tty(), False),  # set, even empty: off (ruff's colored crate)
        ("auto", {"CLICOLOR": "0"}, Tty(), False),
        ("auto", {"FORCE_COLOR": "1"}, None, True),
        ("auto", {"FORCE_COLOR": ""}, None, False),  # empty: not set
        ("auto", {"FORCE_COLOR": "1", "NO_COLOR": "1"}, None, True),  # ruff: FORCE_COLOR wins
        ("auto", {"CLICOLOR_FORCE": "1"}, None, True),
        ("always", {"NO_COLOR": "1"}, None, True),  # --color wins over the environment
        ("never", {"FORCE_COLOR": "1"}, Tty(), False),
    ],
)
def test_colour_is_decided_as_ruff_decides_it(choice, environment, stream, coloured):
    assert use_colour(choice, stream, environment) is coloured


def test_color_always_and_never_on_the_command_line(tmp_path, monkeypatch):
    write_tree(tmp_path, MINI_VLLM)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    runner = CliRunner()
    coloured = runner.invoke(main, ["check", "--no-cache", "--color", "always", "vllm"])
    never = runner.invoke(main, ["check", "--no-cache", "--color", "never", "vllm"], env={"FORCE_COLOR": "1"})
    auto = runner.invoke(main, ["check", "--no-cache", "vllm"])  # not a terminal: no colour
    assert "\x1b[" in coloured.stdout and "\x1b[" not in never.stdout and "\x1b[" not in auto.stdout
    assert plain(coloured.stdout) == never.stdout == auto.stdout
    assert (
        "\x1b["
        not in runner.invoke(
            main, ["check", "--no-cache", "--color", "always", "--output-format", "concise", "vllm"]
        ).stdout
    )  # concise: unchanged


# ------------------------------------------------------------------------------------------ a real check


def test_every_finding_has_its_frame_and_its_remedy_whole(tmp_path, monkeypatch):
    write_tree(tmp_path, MINI_VLLM)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["check", "--no-cache", "vllm"])
    assert result.exit_code == 1, result.output
    assert located(result.stdout) and all(where.startswith(CONFIG_PATH) for where in located(result.stdout))
    for block in blocks(result.stdout):
        assert_framed(block)
    assert "`resolve_dcp_kv_block_size(group.kv_cache_spec, dcp)`" in result.stdout


def assert_framed(block: list[str]) -> None:
    """The block has ` --> path:line:col`, then a frame whose flagged line has carets under it; no `help:`
    line is cut."""
    arrow = next(i for i, line in enumerate(block) if line.lstrip().startswith("--> "))
    line = located("\n".join(block))[0].split()[0].rsplit(":", 2)[1]
    numbered = next(i for i, text in enumerate(block) if re.match(rf" *{line} \|", text))
    assert arrow < numbered and set(block[numbered + 1].split("|", 1)[1].strip()) == {"^"}, block
    assert not any("…" in text for text in block if text.startswith("help: "))


def load_readme_script():
    spec = importlib.util.spec_from_file_location("readme_numbers", ROOT / "scripts" / "readme_numbers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(sys.platform == "win32", reason="a pseudo-terminal")
def test_in_a_terminal_the_layout_is_the_terminals_width_and_coloured(tmp_path):
    write_tree(tmp_path, MINI_VLLM)
    script = load_readme_script()
    command = [sys.executable, "-m", "kvlint", "check", "--no-cache", "vllm"]
    output = script.in_terminal(command, 80, cwd=tmp_path, timeout=120)
    assert "\x1b[1;31mKV102" in output  # coloured: a terminal
    screen = script.drawn(output, None).splitlines()
    assert max(map(len, screen[:-1])) <= 80  # the summary, stderr's, aside
    assert located("\n".join(screen))


@pytest.mark.slow
@pytest.mark.parametrize("width", WIDTHS)
def test_a_real_release_in_a_terminal_of_each_width(vllm_release, width):
    """vLLM 0.29.0 as a terminal `width` columns wide shows it: every line within the width, every finding
    with its frame, no remedy cut."""
    script = load_readme_script()
    command = [sys.executable, "-m", "kvlint", "check", "-q", "vllm"]
    output = script.in_terminal(command, width, cwd=vllm_release("0.29.0"), timeout=900)
    *report, summary = script.drawn(output, None).rstrip("\n").split("\n")
    counted = re.match(r"kvlint: (\d+) finding\(s\) \((\d+) errors?", summary)
    assert counted is not None and int(counted.group(2)) > 0, summary  # the seed defect is an error
    assert "\x1b[1;31mKV10" in output and max(map(display_width, report)) <= width
    findings = blocks("\n".join(report))
    assert len(findings) == len(located("\n".join(report))) == int(counted.group(1))
    for block in findings:
        assert_framed(block)


def test_a_line_of_megabytes_is_read_only_as_far_as_a_frame_shows(tmp_path):
    path = tmp_path / "generated.py"
    path.write_text("x = [" + "\x07, " * 3_000_000 + "]\n")  # control characters, each escaped when shown
    started = time.monotonic()
    lines = finding_lines(Finding(str(path), 1, 1, 1, 2, "KV000", "n", "m"), None, width=100)
    assert time.monotonic() - started < 1 and max(map(display_width, lines)) <= 100
    assert lines[3].startswith("1 | x = [\\x07, ") and lines[3].endswith("…")
