"""The sizing-path matrix of `kvlint paths`: spec kinds × every sizing path or predicate found, as text or JSON.

Each cell is the DCP factor that path applies to a group of that kind (`dcp`, `1`, or `?` when the code
cannot be evaluated statically); `*` marks a divergence: a cell that disagrees with the scheduler (for paths)
or with the resolver (for predicates), or one `kvlint check` reports a finding for — that kind, in that path's
function (a hand-written scaling is compared with the resolver site by site, which the path's own cell,
computed for the whole function and compared with the scheduler, may not show). Below the matrix, the
findings of `check` that lie in those functions, laid out as `check` lays them out.
"""

from __future__ import annotations

import json
from pathlib import Path

from kvlint.analysis.sizing.results import SizingAnalysis, SizingPath
from kvlint.engine.registry import all_rules
from kvlint.reporters.text import shown_path
from kvlint.rules._sizing_report import sizing_findings
from kvlint.types import Finding

_VIEW_TAGS = {"group": "w", "scheduler": "s", "single-group": "1g"}
_ROLE_NOTES = {
    "reference": "the scheduler (reference)",
    "resolver": "the shared resolver",
    "predicate": "predicate",
    "scheduler": "scheduler-side: sees flattened groups",
    "worker": "worker-side: sees containers",
    "both": "built for both roles: sees both",
}


def cell(path: SizingPath, index: int) -> str:
    values = [(view, factors[index]) for view, factors in path.views]
    if len({v for _, v in values}) == 1:
        return values[0][1]
    return "/".join(f"{_VIEW_TAGS.get(view, view)}:{value}" for view, value in values)


def render_text(
    analysis: SizingAnalysis,
    root: str,
    reported: frozenset[tuple[int, int]] = frozenset(),
    findings: list[str] = (),
    shown_from: str | None = None,
) -> str:
    """The matrix; `reported`: the (path, kind) cells `check` reports a finding for (reported_cells);
    `findings`: those findings' lines, as `check` prints them, paths relative to `shown_from` (else `root`)."""
    letters = [_letter(i) for i in range(len(analysis.paths))]
    lines = [
        f"kvlint paths: {root}",
        f"DCP factor each sizing path applies to a KV cache group of each kind (DCP={analysis.dcp}, block_size={analysis.block_size})",
        "",
    ]
    for letter, path in zip(letters, analysis.paths):
        lines.append(f"  [{letter}] {path.name}  (line {path.line}; {_ROLE_NOTES.get(path.role, path.role)})")
    lines.append("")
    rows = []
    for index, kind in enumerate(analysis.kinds):
        label = kind.label + (" †" if kind.rejected_under_dcp else "")
        cells = [
            cell(p, index) + ("*" if analysis.differs(p, index) or (column, index) in reported else "")
            for column, p in enumerate(analysis.paths)
        ]
        rows.append([label, *cells])
    header = ["kind", *letters]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines.append("  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip())
    lines.append("  ".join("-" * w for w in widths))
    for row in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
    lines.append("")
    lines.append(
        "* a divergence: disagrees with the scheduler's path (for paths) or with the resolver (for predicates), "
        "or `kvlint check` reports a finding for it (below)"
    )
    lines.append(
        "w: worker view (container as given), s: scheduler view (flattened to the first layer), 1g: single-group config"
    )
    reasons = sorted({k.rejected_under_dcp for k in analysis.kinds if k.rejected_under_dcp})
    for reason in reasons:
        lines.append(f"† rejected under DCP: {reason}")
    if findings:
        lines.append("")
        lines.append(f"`kvlint check` reports in these paths (paths relative to {shown_from or root}):")
        lines.append("")
        lines.extend(findings)
    return "\n".join(lines) + "\n"


def reported_cells(
    analysis: SizingAnalysis, root: str, findings: list[Finding], spans: dict[int, tuple[int, int]]
) -> frozenset[tuple[int, int]]:
    """(path, kind) positions for which `check` reports a finding (a root cause or one of its related
    locations) inside that path's function: `spans` maps a path's position to its first and last line."""
    labels = {kind.label: index for index, kind in enumerate(analysis.kinds)}
    cells = set()
    for finding in findings:
        for place in (finding, *finding.related):
            module = shown_path(place.path, Path(root))
            for column, path in enumerate(analysis.paths):
                first, last = spans.get(column, (path.line, path.line))
                if path.module_path == module and first <= place.line <= last:
                    cells.update((column, labels[kind]) for kind in place.kinds if kind in labels)
    return frozenset(cells)


def in_paths(analysis: SizingAnalysis, root: str, findings: list[Finding], spans: dict[int, tuple[int, int]]):
    """The findings of `check` that lie in the matrix's functions (or whose related locations do)."""
    places = [
        (path.module_path, *spans.get(column, (path.line, path.line))) for column, path in enumerate(analysis.paths)
    ]
    return [
        f
        for f in findings
        if any(
            shown_path(p.path, Path(root)) == module and first <= p.line <= last
            for p in (f, *f.related)
            for module, first, last in places
        )
    ]


def render_json(analysis: SizingAnalysis, root: str, reported: frozenset[tuple[int, int]] = frozenset()) -> str:
    document = {
        "tree": root,
        "dcp": analysis.dcp,
        "block_size": analysis.block_size,
        "reference": analysis.reference,
        "resolver": analysis.resolver,
        "kinds": [
            {"label": k.label, "container": k.is_container, "rejected_under_dcp": k.rejected_under_dcp}
            for k in analysis.kinds
        ],
        "paths": [
            {
                "name": p.name,
                "module_path": p.module_path,
                "function": p.qualname,
                "line": p.line,
                "role": p.role,
                "views": {view: list(factors) for view, factors in p.views},
                "cells": [cell(p, i) for i in range(len(analysis.kinds))],
                "differs": [analysis.differs(p, i) for i in range(len(analysis.kinds))],
                # whether `kvlint check` reports a finding for this kind in this path's function
                "reported": [(column, i) in reported for i in range(len(analysis.kinds))],
            }
            for column, p in enumerate(analysis.paths)
        ],
        "findings": [
            {
                "code": i.code,
                "path": i.module_path,
                "function": i.qualname,
                "line": i.line,
                "column": i.column,
                "severity": i.severity.value,
                "message": i.message,
            }
            for i in sizing_findings(analysis, all_rules())
        ],
    }
    return json.dumps(document, indent=2) + "\n"


def _letter(index: int) -> str:
    letters = ""
    index += 1
    while index:
        index, remainder = divmod(index - 1, 26)
        letters = chr(ord("A") + remainder) + letters
    return letters
