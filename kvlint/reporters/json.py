"""A JSON array of findings, one per root cause: each with its severity, fix and `related` locations."""

from __future__ import annotations

import json

from kvlint.reporters.base import Reporter
from kvlint.types import Finding


def finding_to_dict(f: Finding) -> dict:
    fix = None
    if f.fix is not None:
        fix = {
            "title": f.fix.title,
            "applicability": f.fix.applicability.value,
            "edits": [
                {
                    "line": e.line,
                    "column": e.column,
                    "end_line": e.end_line,
                    "end_column": e.end_column,
                    "content": e.replacement,
                }
                for e in f.fix.edits
            ],
            "imports": [
                {"module": i.module, "name": i.name, "action": "add" if i.add else "remove-if-unused"}
                for i in f.fix.imports
            ],
        }
    return {
        "code": f.code,
        "name": f.name,
        "message": f.message,
        "severity": f.severity.value,
        "path": f.path,
        "line": f.line,
        "column": f.column,
        "end_line": f.end_line,
        "end_column": f.end_column,
        "fix": fix,
        "fix_unavailable": f.fix_unavailable,
        # the spec kinds it diverges for (counterexample first), as `kvlint paths` labels its rows
        "kinds": list(f.kinds),
        # The other findings of this root cause (kvlint.engine.grouping), in file order.
        "related": [
            {
                "code": r.code,
                "message": r.message,
                "path": r.path,
                "line": r.line,
                "column": r.column,
                "end_line": r.end_line,
                "end_column": r.end_column,
                "kinds": list(r.kinds),
            }
            for r in f.related
        ],
    }


class JsonReporter(Reporter):
    NAME = "json"

    def render(self, findings, rules) -> str:
        return json.dumps([finding_to_dict(f) for f in findings], indent=2) + "\n"
