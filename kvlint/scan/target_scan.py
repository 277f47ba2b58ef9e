"""Scan code outside the vLLM tree against every release it targets, and make one result of the scans.

A range target (`vllm>=0.17,<0.31`) is judged against its oldest and its newest release (kvlint.scan.targets):
one scan each, the index built from that release's root, the files the PATHs'. A finding either release's
analysis proves stands: the more severe verdict wins (the newest release's on a tie), since the code runs
with both. A fix must hold for all: it is kept only when every release's scan gives the same one.
"""

from __future__ import annotations

from dataclasses import replace

from kvlint.scan.runner import ScanResult
from kvlint.types import FileResult, Finding

# (line, column, end line, end column, code): one finding's place, the same in every release's scan.
Key = tuple[int, int, int, int, str]


def merge_scans(results: list[ScanResult], versions: tuple[str, ...]) -> ScanResult:
    """One result of the scans of the same files against `versions` (oldest first, aligned with `results`);
    the newest release's index is the result's."""
    if len(results) == 1:
        return results[0]
    primary = results[-1]
    by_path = [{r.path: r for r in result.files} for result in results]
    files = [_merge_file([found.get(r.path) for found in by_path], versions) for r in primary.files]
    reported = {(f.path, *_key(f)) for result in results for f in result.findings}
    findings = sorted((f for r in files for f in r.findings if (f.path, *_key(f)) in reported), key=Finding.sort_key)
    return replace(
        primary,
        files=files,
        findings=findings,
        cache_hits=sum(r.cache_hits for r in results),
        also=tuple(r.index for r in results[:-1]),
    )


def _key(finding: Finding) -> Key:
    return finding.line, finding.column, finding.end_line, finding.end_column, finding.code


def _merge_file(results: list[FileResult | None], versions: tuple[str, ...]) -> FileResult:
    present = [(v, r) for v, r in zip(versions, results) if r is not None]
    newest = present[-1][1]
    by_version = [(v, {_key(f): f for f in r.findings}) for v, r in present]
    keys = list(dict.fromkeys(k for _, found in by_version for k in found))
    findings = tuple(_merge_finding([(v, found.get(k)) for v, found in by_version]) for k in keys)
    return replace(
        newest,
        findings=tuple(sorted(findings, key=Finding.sort_key)),
        suppressed=max(r.suppressed for _, r in present),
        parsed=all(r.parsed for _, r in present),
        skipped_by_prefilter=all(r.skipped_by_prefilter for _, r in present),
    )


def _merge_finding(candidates: list[tuple[str, Finding | None]]) -> Finding:
    found = [(v, f) for v, f in candidates if f is not None]
    chosen = max(reversed(found), key=lambda pair: pair[1].severity.rank)[1]  # ties: the newest
    fixes = [f.fix for _, f in candidates if f is not None]
    if chosen.fix is not None and len(fixes) == len(candidates) and all(fix == chosen.fix for fix in fixes):
        return chosen
    if chosen.fix is None and chosen.fix_unavailable:
        return chosen
    reason = next((f.fix_unavailable for _, f in found if f.fix is None and f.fix_unavailable), None)
    if reason is None:
        reason = _why_no_fix(candidates)
    return replace(chosen, fix=None, fix_unavailable=reason) if chosen.fix is not None or reason else chosen


def _why_no_fix(candidates: list[tuple[str, Finding | None]]) -> str | None:
    """Why a fix one release's scan gives cannot be applied for every targeted release."""
    missing = [v for v, f in candidates if f is None]
    if missing:
        return f"no automatic fix: vLLM {', '.join(missing)}, which this code also targets, finds nothing to fix here"
    if any(f.fix is None for _, f in candidates if f is not None):
        return None
    return (
        "no automatic fix: the releases this code targets call for different fixes "
        f"(vLLM {', '.join(v for v, _ in candidates)}): write it by hand"
    )
