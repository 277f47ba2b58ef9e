"""The sizing-path matrix of `kvlint paths`: spec kinds × every sizing path or predicate found, as text or JSON.

Each cell is the DCP factor that path applies to a group of that kind (`dcp`, `1`, or `?` when the code
cannot be evaluated statically); `*` marks a cell that disagrees with the scheduler (for paths) or with the
resolver (for predicates).
"""

from __future__ import annotations

import json

from kvlint.analysis.sizing.results import SizingAnalysis, SizingPath
from kvlint.engine.registry import all_rules
from kvlint.rules._sizing_report import sizing_findings

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


def render_text(analysis: SizingAnalysis, root: str) -> str:
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
        cells = [cell(p, index) + ("*" if analysis.differs(p, index) else "") for p in analysis.paths]
        rows.append([label, *cells])
    header = ["kind", *letters]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines.append("  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip())
    lines.append("  ".join("-" * w for w in widths))
    for row in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
    lines.append("")
    lines.append("* disagrees with the scheduler's path (for paths) or with the resolver (for predicates)")
    lines.append(
        "w: worker view (container as given), s: scheduler view (flattened to the first layer), 1g: single-group config"
    )
    reasons = sorted({k.rejected_under_dcp for k in analysis.kinds if k.rejected_under_dcp})
    for reason in reasons:
        lines.append(f"† rejected under DCP: {reason}")
    if analysis.divergences:
        lines.append("")
        for issue in sorted(sizing_findings(analysis, all_rules()), key=lambda i: (i.module_path, i.line, i.code)):
            lines.append(f"{issue.module_path}:{issue.line}: {issue.code} [{issue.severity.value}] {issue.message}")
    return "\n".join(lines) + "\n"


def render_json(analysis: SizingAnalysis, root: str) -> str:
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
            }
            for p in analysis.paths
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
