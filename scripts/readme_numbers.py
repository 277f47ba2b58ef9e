"""Rewrite README.md's generated blocks from what kvlint prints now: the only source of the numbers a reader
can check there.

    python scripts/readme_numbers.py            # rewrite the blocks in README.md
    python scripts/readme_numbers.py --check    # exit 1 (and name the blocks) when README.md is stale
    python scripts/readme_numbers.py --measure-tests --only-measured   # only time the fast loop again

A block is the text between `<!-- generated:NAME -->` and `<!-- /generated:NAME -->`. Each comes from this
checkout's kvlint run on real releases from kvlint's release cache (fetched from PyPI on first use):
- `first-screen`: the first screen of a first `kvlint check --vllm-release 0.29.0` (an empty result cache) as
  a 120-column terminal shows it: run in a pseudo-terminal of that size, its output drawn as the terminal draws
  it (the redrawn progress line, colour left out); the findings that fit a screen, then the summary line, the
  home folder written `~`;
- `summary-029`: what that scan found, counted: files, root causes per severity and rule, related
  locations, fixes;
- `releases`: errors and warnings per release;
- `costs` (only with `--measure`, kept otherwise): what the full suite keeps on disk, measured here — each
  release's sources and tests in kvlint's release cache, and the verify runtime;
- `fast-loop` (only with `--measure-tests`, kept otherwise): the fast loop run here as the README says to run it,
  its test count and wall time.
tests/test_readme.py (slow) asserts that README.md holds exactly what this script would write now (the
measured `costs` aside: a runtime grows as Python writes its bytecode).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
RELEASES = ("0.27.1", "0.28.0", "0.29.0", "0.30.0", "0.33.0", "0.34.0")
SAMPLE = "0.29.0"
SCREEN_COLUMNS, SCREEN_ROWS = 120, 50  # the terminal the first screen is shown in
BLOCK = re.compile(r"(<!-- generated:(?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /generated:(?P=name) -->)", re.DOTALL)


def kvlint(*arguments: str) -> subprocess.CompletedProcess:
    """This checkout's kvlint, as a user runs it (from a folder outside any tree, default cache)."""
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "kvlint", *arguments]
    completed = subprocess.run(
        command, cwd=Path.home(), capture_output=True, text=True, env=environment, timeout=1800, check=False
    )
    if completed.returncode not in (0, 1):
        raise SystemExit(f"kvlint {' '.join(arguments)} failed: {completed.stderr.strip()}")
    return completed


def home_as_tilde(text: str) -> str:
    return text.replace(str(Path.home()), "~")


def first_run(version: str) -> str:
    """What `kvlint check --vllm-release VERSION` writes to a terminal on a newcomer's first run (see
    `in_terminal`): an empty result cache (a copy of the release in a fresh cache folder, so nothing is
    downloaded), its folder shown as the default."""
    sys.path.insert(0, str(ROOT))
    from kvlint.scan.releases import release_sources

    sources = release_sources(version, quiet=True)
    with tempfile.TemporaryDirectory(prefix="kvlint-readme-") as scratch:
        shutil.copytree(sources, Path(scratch) / "releases" / sources.name, symlinks=True)
        command = [sys.executable, "-m", "kvlint", "check", "--cache-dir", scratch, "--vllm-release", version]
        output = in_terminal(command, SCREEN_COLUMNS, cwd=Path.home())
        default = sources.parent.parent  # the cache folder the release came from
        return output.replace(scratch, str(default))


def in_terminal(command: list[str], columns: int, cwd: Path, timeout: float = 1800) -> str:
    """All `command` writes, run in a pseudo-terminal `columns` wide (stdout and stderr both the terminal, as
    in a person's shell), escape sequences and all: `drawn` shows it as the terminal does."""
    import fcntl
    import pty
    import select
    import struct
    import termios
    import time

    environment = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": str(columns), "TERM": "xterm-256color"}
    for name in ("NO_COLOR", "FORCE_COLOR", "CLICOLOR_FORCE", "CLICOLOR", "LINES"):
        environment.pop(name, None)
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", SCREEN_ROWS, columns, 0, 0))
    process = subprocess.Popen(
        command, stdin=follower, stdout=follower, stderr=follower, cwd=cwd, env=environment, start_new_session=True
    )
    os.close(follower)
    received = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while True:
            if time.monotonic() > deadline:
                process.kill()
                raise SystemExit(f"{' '.join(command)}: no end after {timeout:.0f} s")
            if not select.select([leader], [], [], 1.0)[0]:
                continue
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the command ended, the terminal has no writer left
                break
            if not chunk:
                break
            received += chunk
    finally:
        os.close(leader)
        process.wait(timeout=60)
    output = received.decode("utf-8", errors="replace")
    if process.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(command)} failed ({process.returncode}): {output}")
    return output


def drawn(output: str, columns: int | None = None) -> str:
    """The text a terminal `columns` wide (None: without a right edge) shows for `output`: a carriage return
    goes back to the line's start, `ESC[K` erases to its end, a character past the right edge begins the
    next line, colour and other escape sequences change no text."""
    lines: list[list[str]] = [[]]
    column = 0
    for token in re.findall(r"\x1b\[[0-9;?]*[A-Za-z]|\r\n|.", output, re.DOTALL):
        if token in ("\n", "\r\n"):
            lines.append([])
            column = 0
        elif token == "\r":
            column = 0
        elif token.startswith("\x1b"):
            if token.endswith("K"):
                del lines[-1][column:]
        else:
            if columns is not None and column >= columns:
                lines.append([])
                column = 0
            line = lines[-1]
            line.extend(" " * (column - len(line)))
            line[column : column + 1] = [token]
            column += 1
    return "\n".join("".join(line).rstrip() for line in lines).rstrip("\n") + "\n"


def first_screen(output: str) -> str:
    """What a screen of a 120-column terminal shows of `check`: the status line, the first findings that fit
    (whole), how many more, then the summary, `drawn` as the terminal draws them."""
    screen = drawn(output, SCREEN_COLUMNS).rstrip("\n").split("\n")
    folded = -(-len(summary_line(output)) // SCREEN_COLUMNS)  # the rows the summary takes, folded at the edge
    shown, summary = screen[:-folded], screen[-folded:]
    status_end = next(index for index, line in enumerate(shown) if not line.startswith("kvlint: "))
    status, findings = shown[:status_end], "\n".join(shown[status_end:]).split("\n\n")
    # The prompt, the status, `[… N more findings …]` between blank lines and the summary take the rest.
    room, lines, count = SCREEN_ROWS - 1 - len(status) - 3 - len(summary), list(status), 0
    for finding in findings:
        height = finding.count("\n") + 1 + (1 if count else 0)
        if height > room:
            break
        lines += [*([""] if count else []), *finding.split("\n")]
        room, count = room - height, count + 1
    if count < len(findings):
        lines += ["", f"[… {len(findings) - count} more findings …]", ""]
    lines += summary
    return f"```text\n$ kvlint check --vllm-release {SAMPLE}\n" + home_as_tilde("\n".join(lines)) + "\n```\n"


def summary_line(output: str) -> str:
    """The last line `check` writes (stderr's summary), as written: no terminal edge folds it."""
    return drawn(output).rstrip("\n").rsplit("\n", 1)[-1]


def counted(findings: list[dict]) -> tuple[Counter, Counter, int, int, int]:
    """(root causes per severity, per rule, related locations, safe fixes, unsafe fixes)."""
    severities = Counter(f["severity"] for f in findings)
    rules = Counter(f["code"] for f in findings)
    related = sum(len(f["related"]) for f in findings)
    safe = sum(1 for f in findings if f["fix"] and f["fix"]["applicability"] == "safe")
    unsafe = sum(1 for f in findings if f["fix"] and f["fix"]["applicability"] == "unsafe")
    return severities, rules, related, safe, unsafe


def summary_block(findings: list[dict], line: str, files: int) -> str:
    severities, rules, related, safe, unsafe = counted(findings)
    by_rule = ", ".join(f"{count} {code}" for code, count in sorted(rules.items()))
    every = Counter(r["code"] for f in findings for r in f["related"]) + rules
    all_rules = ", ".join(f"{count} {code}" for code, count in sorted(every.items()))
    return (
        f"`kvlint check --vllm-release {SAMPLE}` checks {files:,} files and reports {len(findings)} root causes "
        f"({plural(severities['error'], 'error')}, {plural(severities['warning'], 'warning')}): {by_rule}. Folded into them are "
        f"{related} related locations (other rules' findings on the same defect; counted with them: {all_rules}). "
        f"{safe} {'has' if safe == 1 else 'have'} a safe fix (`kvlint fix`), {unsafe} an unsafe one "
        f"(`--unsafe-fixes`). Its last line:\n\n```text\n{line}\n```\n"
    )


def files_checked(line: str) -> int:
    match = re.search(r" in (\d+) files checked", line)
    if match is None:
        raise SystemExit(f"no file count in the summary line: {line!r}")
    return int(match.group(1))


def releases_block(scans: dict[str, list[dict]]) -> str:
    rows = ["| release | errors | warnings | root causes by rule |", "|---|---:|---:|---|"]
    for version, findings in scans.items():
        severities, rules, *_ = counted(findings)
        by_rule = ", ".join(f"{count} {code}" for code, count in sorted(rules.items()))
        rows.append(f"| {version} | {severities['error']} | {severities['warning']} | {by_rule} |")
    return "\n".join(rows) + "\n"


HEADLINE = re.compile(r"(?P<code>KV\d{3})(?: \[[^\]]*\])? (?P<severity>error|warning): (?P<said>.*)")
ARROW = re.compile(r" *--> (?P<path>.+):(?P<line>\d+):\d+")


def newest_block(version: str) -> str:
    """The newest release's container-blind checks (KV101), one line each as the full layout heads them:
    every error with the model and path that build its counterexample, every warning with its opt-in setting."""
    lines = kvlint("check", "-q", "--select", "KV101", "--vllm-release", version).stdout.splitlines()
    heads = []
    for index, line in enumerate(lines):
        head = HEADLINE.fullmatch(line)
        if head is None or head["code"] != "KV101":
            continue
        said = [head["said"]]
        for more in lines[index + 1 :]:  # the headline's wrapped lines, then the location
            if (where := ARROW.fullmatch(more)) is not None:
                break
            said.append(more.strip())
        heads.append(f"- {head['severity']} `{where['path'].rsplit('/', 1)[-1]}:{where['line']}`: {' '.join(said)}")
    return "\n".join(heads) + "\n"


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def mebibytes(size: int) -> str:
    return f"{size / 2**20:,.0f} MiB"


def costs_block() -> str:
    """What the suite keeps, measured (blocks allocated, as `du` counts them)."""
    sys.path.insert(0, str(ROOT))
    from kvlint.scan.storage import cache_root
    from kvlint.verify.runtime_env import built_runtime, size_on_disk

    releases = cache_root() / "releases"
    rows = ["| what | where | kept |", "|---|---|---:|"]
    total = 0
    for version in RELEASES:
        sources, tests = releases / f"vllm-{version}", releases / f"vllm-{version}-tests"
        size = size_on_disk(sources) + size_on_disk(tests)
        total += size
        rows.append(
            f"| vLLM {version}: sources + tests | `{home_as_tilde(str(sources))}[-tests]` | {mebibytes(size)} |"
        )
    rows.append(f"| the six releases | `{home_as_tilde(str(releases))}` | {mebibytes(total)} |")
    python = built_runtime()
    if python is not None:
        runtime = python.parent.parent
        rows.append(
            f"| the verify runtime (CPU torch + vLLM 0.29.0) | `{home_as_tilde(str(runtime))}` | "
            f"{size_on_disk(runtime) / 2**30:.1f} GiB |"
        )
    return "\n".join(rows) + "\n"


FAST_LOOP = [sys.executable, "-m", "pytest", "-q", "-m", "not slow", "-n", "auto", "-p", "no:cacheprovider"]
# The one test that checks this block's count against pytest's: it fails until the block is written, so it is left
# out of the timed run and counted (it takes the seconds of one `pytest --collect-only`).
COUNT_CHECK = "tests/test_readme.py::test_the_fast_loops_count_is_what_pytest_collects_now"
OUTCOME = re.compile(r"(?P<count>\d+) (?P<kind>passed|skipped|failed|errors?)")
WALL = re.compile(r" in (?P<seconds>[\d.]+)s")


def fast_loop_block() -> str:
    """The fast loop, run as the README's command runs it: how many tests it ran and how long it took here."""
    run = subprocess.run([*FAST_LOOP, "--deselect", COUNT_CHECK], cwd=ROOT, capture_output=True, text=True, check=False)
    last = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else ""
    counts = {match.group("kind"): int(match.group("count")) for match in OUTCOME.finditer(last)}
    wall = WALL.search(last)
    if run.returncode != 0 or "failed" in counts or wall is None:
        raise SystemExit(f"the fast loop did not pass; nothing measured: {last or run.stderr[-500:]}")
    tests = counts.get("passed", 0) + counts.get("skipped", 0) + 1  # COUNT_CHECK
    return (
        f"The fast loop runs {tests:,} tests ({counts.get('skipped', 0)} skip here, each saying why) in "
        f"{float(wall.group('seconds')):.0f} s on this {os.cpu_count()}-core machine "
        f"(`python scripts/readme_numbers.py --measure-tests`).\n"
    )


def blocks() -> dict[str, str]:
    """Every generated block, from kvlint's output now."""
    text = first_run(SAMPLE)
    scans = {
        version: json.loads(kvlint("check", "-q", "--output-format", "json", "--vllm-release", version).stdout)
        for version in RELEASES
    }
    line = summary_line(text)
    return {
        "first-screen": first_screen(text),
        "summary-029": summary_block(scans[SAMPLE], line, files_checked(line)),
        "releases": releases_block(scans),
        "newest-kv101": newest_block(RELEASES[-1]),
    }


def rewrite(readme: str, generated: dict[str, str]) -> str:
    """README's text with each generated block replaced; every block must be there exactly once."""
    found = [match.group("name") for match in BLOCK.finditer(readme)]
    missing = sorted(set(generated) - set(found))  # a block this run does not write is kept as it is
    if missing or len(found) != len(set(found)):
        raise SystemExit(f"README.md: generated blocks missing or repeated: {missing or found}")
    return BLOCK.sub(lambda m: m.group(1) + generated.get(m.group("name"), m.group("body")) + m.group(4), readme)


def current(readme: str) -> dict[str, str]:
    return {match.group("name"): match.group("body") for match in BLOCK.finditer(readme)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when README.md is not what this writes")
    parser.add_argument("--measure", action="store_true", help="also measure the caches (the `costs` block)")
    parser.add_argument("--measure-tests", action="store_true", help="also time the fast loop (`fast-loop`)")
    parser.add_argument("--only-measured", action="store_true", help="rewrite only the measured blocks asked for")
    options = parser.parse_args()
    readme = README.read_text(encoding="utf-8")
    generated = {} if options.only_measured else blocks()
    if options.measure:
        generated["costs"] = costs_block()
    if options.measure_tests:
        generated["fast-loop"] = fast_loop_block()
    updated = rewrite(readme, generated)
    if options.check:
        stale = [name for name, body in current(updated).items() if current(readme).get(name) != body]
        for name in stale:
            print(f"README.md: block {name} is stale: run python scripts/readme_numbers.py", file=sys.stderr)
        return 1 if stale else 0
    README.write_text(updated, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
