"""Write docs/findings-by-release.md: kvlint's findings on each vLLM release, by rule and severity, and every
error with its counterexample.

    python scripts/findings_by_release.py [--output docs/findings-by-release.md] [--jobs N] [VERSION ...]

Each release's sources come from kvlint's release cache (fetched from PyPI on first use); the scan is
`kvlint check --no-cache --format json .` run in the release's folder, as the golden files run it. A
finding that folds other findings of its root cause (`related`, when the scan groups them) counts once.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

RELEASES = ("0.27.1", "0.28.0", "0.29.0", "0.30.0", "0.33.0", "0.34.0")
ROOT = Path(__file__).resolve().parent.parent

# Where each rule's message names the counterexample: the kind (and view) for which the code goes wrong.
COUNTEREXAMPLE = {
    "KV101": re.compile(
        r"is False for a (UniformTypeKVCacheSpecs of .+? layers) while each layer answers True: "
        r"((?:an? )?\S+(?: checkpoint whose config builds .+?)? with default settings) "
        r"has them put in one container by (`\w+` \([^)]+\))"
        r"|is False for a (UniformTypeKVCacheSpecs of \w+ layers)"
    ),
    "KV102": re.compile(
        r"gives (\d+ tokens per block for a .+? group)(?: \(also .*?\))? at (DCP=\d+) where (`[\w.]+` gives \d+)"
        r"(?:.*?a hybrid model, e\.g\. (\S+ \([^)]*\)))?"
    ),
    "KV103": re.compile(
        r"gives (\d+ tokens per block for .+? at DCP=\d+)(?: \((?:worker|scheduler) view[^)]*\))? where"
    ),
    "KV104": re.compile(r": (UniformTypeKVCacheSpecs\{[^}]*\} gives \w+ but \{[^}]*\} gives \w+)"),
    "KV105": re.compile(r"differently from the resolver `[^`]+` for: (.+?\))"),
}


def scan(version: str, jobs: int) -> list[dict]:
    sys.path.insert(0, str(ROOT))
    from kvlint.scan.releases import release_sources

    folder = release_sources(version, quiet=True)
    command = [sys.executable, "-m", "kvlint", "check", "--no-cache", "--format", "json", "--jobs", str(jobs), "."]
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout's kvlint
    completed = subprocess.run(command, cwd=folder, capture_output=True, text=True, env=environment, timeout=1800)
    if completed.returncode not in (0, 1):
        raise SystemExit(f"kvlint failed on vLLM {version}: {completed.stderr.strip()}")
    return json.loads(completed.stdout)


def census(folder: Path) -> dict | None:
    """`kvlint containers --format json`: the containers the release's models build (None: no registry read)."""
    command = [sys.executable, "-m", "kvlint", "containers", "--format", "json", "."]
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    completed = subprocess.run(command, cwd=folder, capture_output=True, text=True, env=environment, timeout=1800)
    return json.loads(completed.stdout) if completed.returncode == 0 else None


def census_lines(rows: list[dict] | None) -> list[str]:
    if rows is None:
        return ["No model registry read: no census; KV101 falls back to the classes the tree builds layers of.", ""]
    defaults = [row for row in rows if row["setting"] == "default"]
    lines = [
        f"Census: {len(rows)} container compositions its models build, {len(defaults)} by default "
        f"(`kvlint containers`). Built by default:",
        "",
        "| container of | spec classes | built by | models |",
        "|---|---|---|---|",
    ]
    for row in defaults:
        models = ", ".join(row["models"][:3]) + (
            f" and {len(row['models']) - 3} more" if len(row["models"]) > 3 else ""
        )
        where = f"`{row['path'].split(':')[-1]}` ({row['path'].split(':')[0].rsplit('/', 1)[-1]}:{row['line']})"
        lines.append(f"| {', '.join(row['layer_classes'])} | {', '.join(row['spec_classes'])} | {where} | {models} |")
    opt_in = sorted({row["setting"].removeprefix("opt-in: ") for row in rows if row["setting"] != "default"})
    if opt_in:
        count = len(rows) - len(defaults)
        lines += ["", f"{count} more only under an opt-in setting: {'; '.join(opt_in)}."]
    return [*lines, ""]


def counterexample(finding: dict) -> str:
    pattern = COUNTEREXAMPLE.get(finding["code"])
    match = pattern.search(finding["message"]) if pattern else None
    if match is None:
        return "—"
    if finding["code"] == "KV102":
        witness = f" — {match.group(4)}" if match.group(4) else ""  # the hybrid model a Mamba counterexample needs
        return "{} at {}, where {}".format(*match.group(1, 2, 3)) + witness
    if finding["code"] == "KV101" and match.group(1):
        return "{} — {}: {}".format(*match.group(1, 2, 3))
    return next(group for group in match.groups() if group)


def section(version: str, findings: list[dict], rows: list[dict] | None) -> list[str]:
    counts = Counter((f["code"], f["severity"]) for f in findings)
    related = sum(len(f.get("related") or ()) for f in findings)
    codes = sorted({code for code, _ in counts})
    lines = [f"## vLLM {version}", "", *census_lines(rows)]
    if not findings:
        return [*lines, "No findings.", ""]
    lines += ["| rule | error | warning |", "|---|---:|---:|"]
    for code in codes:
        lines.append(f"| {code} | {counts[code, 'error']} | {counts[code, 'warning']} |")
    errors = sum(n for (_, severity), n in counts.items() if severity == "error")
    lines.append(f"| **all** | **{errors}** | **{len(findings) - errors}** |")
    if related:
        lines += ["", f"Root causes; {related} further location(s) are folded into them as related locations."]
    lines.append("")
    failing = [f for f in findings if f["severity"] == "error"]
    if failing:
        lines += ["Errors and their counterexamples:", "", "| where | rule | counterexample |", "|---|---|---|"]
        for f in failing:
            lines.append(f"| `{f['path']}:{f['line']}` | {f['code']} | {counterexample(f)} |")
        lines.append("")
    return lines


def render(results: dict[str, list[dict]], censuses: dict[str, list[dict] | None]) -> str:
    lines = [
        "# kvlint's findings by vLLM release",
        "",
        "Generated by `python scripts/findings_by_release.py` (do not edit by hand): `kvlint check --no-cache "
        "--format json .` in each release's sources. An **error** is a divergence with a counterexample the "
        "release's own code can build (the kind of group spec, and for sizing rules the DCP size and both "
        "token spans); a **warning** is a hand copy that agrees with the resolver today (it drifts when the "
        "resolver changes), a difference only for kinds the release rejects under DCP, or a choice kvlint "
        "cannot settle from the code. The counterexamples are evaluated at DCP=2 and block_size=16. A KV101 "
        "error names the model and grouping path that build its container by default; each release's census "
        "lists the containers its models build.",
        "",
        "| release | errors | warnings |",
        "|---|---:|---:|",
    ]
    for version, findings in results.items():
        errors = sum(f["severity"] == "error" for f in findings)
        lines.append(f"| {version} | {errors} | {len(findings) - errors} |")
    lines.append("")
    for version, findings in results.items():
        lines += section(version, findings, censuses[version])
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("versions", nargs="*", default=list(RELEASES))
    parser.add_argument("--output", type=Path, default=ROOT / "docs" / "findings-by-release.md")
    parser.add_argument("--jobs", type=int, default=1)
    options = parser.parse_args()
    results = {version: scan(version, options.jobs) for version in options.versions}
    from kvlint.scan.releases import release_sources

    censuses = {version: census(release_sources(version, quiet=True)) for version in options.versions}
    options.output.write_text(render(results, censuses), encoding="utf-8")
    print(f"wrote {options.output}")


if __name__ == "__main__":
    main()
