"""Rewrite README.md's generated blocks from what kvlint prints now: the only source of the numbers a reader
can check there.

    python scripts/readme_numbers.py            # rewrite the blocks in README.md
    python scripts/readme_numbers.py --check    # exit 1 (and name the blocks) when README.md is stale

A block is the text between `<!-- generated:NAME -->` and `<!-- /generated:NAME -->`. Each comes from this
checkout's kvlint run on real releases from kvlint's release cache (fetched from PyPI on first use):
- `first-screen`: the literal first screen of a first `kvlint check --vllm-release 0.29.0` (an empty result
  cache; stderr's status lines, the first findings, the summary line), the home folder written `~`;
- `summary-029`: what that scan found, counted: files, root causes per severity and rule, related
  locations, fixes;
- `releases`: errors and warnings per release;
- `costs` (only with `--measure`, kept otherwise): what the full suite keeps on disk, measured here — each
  release's sources and tests in kvlint's release cache, and the verify runtime.
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
SCREEN_FINDINGS = 3  # findings shown in the sample: about a screen
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


def first_run(version: str) -> subprocess.CompletedProcess:
    """`kvlint check --vllm-release VERSION` as a newcomer's first run prints it: an empty result cache (a
    copy of the release in a fresh cache folder, so nothing is downloaded), its folder shown as the default."""
    sys.path.insert(0, str(ROOT))
    from kvlint.scan.releases import release_sources

    sources = release_sources(version, quiet=True)
    with tempfile.TemporaryDirectory(prefix="kvlint-readme-") as scratch:
        shutil.copytree(sources, Path(scratch) / "releases" / sources.name, symlinks=True)
        completed = kvlint("check", "--cache-dir", scratch, "--vllm-release", version)
        default = sources.parent.parent  # the cache folder the release came from
        completed.stdout = completed.stdout.replace(scratch, str(default))
        completed.stderr = completed.stderr.replace(scratch, str(default))
    return completed


def first_screen(completed: subprocess.CompletedProcess) -> str:
    """What a terminal shows of `check`: the status lines, the first findings, then (after the rest) the
    summary, which is stderr's last line."""
    status = completed.stderr.splitlines()
    findings = completed.stdout.rstrip("\n").split("\n\n")
    shown = "\n\n".join(findings[:SCREEN_FINDINGS])
    more = len(findings) - SCREEN_FINDINGS
    lines = [*status[:-1], shown]
    if more > 0:
        lines += ["", f"[… {more} more findings …]", ""]
    lines.append(status[-1])
    return "```text\n$ kvlint check --vllm-release 0.29.0\n" + home_as_tilde("\n".join(lines)) + "\n```\n"


def summary_line(completed: subprocess.CompletedProcess) -> str:
    return completed.stderr.splitlines()[-1]


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
        f"({severities['error']} errors, {severities['warning']} warnings): {by_rule}. Folded into them are "
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


def newest_block(version: str) -> str:
    """The newest release's container-blind checks (KV101), one line each as the full layout heads them:
    every error with the model and path that build its counterexample, every warning with its opt-in setting."""
    text = kvlint("check", "-q", "--select", "KV101", "--vllm-release", version).stdout
    lines, heads = text.splitlines(), []
    for index, line in enumerate(lines):
        if line.startswith(" ") or ": KV101 " not in line:
            continue
        head = line
        for more in lines[index + 1 :]:  # a headline wrapped onto indented lines, before its detail
            if not more.startswith("      "):
                break
            head += " " + more.strip()
        where, _, said = head.partition(": KV101 ")
        path, line_number = where.rsplit(":", 2)[:2]
        severity, _, headline = said.split("] ", 1)[-1].partition(": ")
        heads.append(f"- {severity} `{path.rsplit('/', 1)[-1]}:{line_number}`: {headline}")
    return "\n".join(heads) + "\n"


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
    options = parser.parse_args()
    readme = README.read_text(encoding="utf-8")
    generated = blocks()
    if options.measure:
        generated["costs"] = costs_block()
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
