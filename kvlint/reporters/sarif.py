"""SARIF 2.1.0 as GitHub code scanning accepts it: every result's ruleId is in tool.driver.rules, its `level`
is the finding's severity, and the other findings of its root cause are its `relatedLocations`."""

from __future__ import annotations

import json
from pathlib import PurePath

from kvlint import __version__
from kvlint.reporters.base import Reporter
from kvlint.types import Severity

SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
# No helpUri or informationUri: kvlint has no published home to link to (the PyPI name `kvlint` is another
# project's), and SARIF wants absolute URIs. Each rule's full documentation is in its `help` instead; the
# same text is in docs/rules/ of this repository.
# SARIF's result levels are error, warning, note and none; every kvlint severity has its own.
LEVELS = {Severity.ERROR: "error", Severity.WARNING: "warning"}


def _location(path: str, line: int, column: int, end_line: int, end_column: int) -> dict:
    return {
        "physicalLocation": {
            "artifactLocation": {"uri": PurePath(path).as_posix(), "uriBaseId": "%SRCROOT%"},
            "region": {"startLine": line, "startColumn": column, "endLine": end_line, "endColumn": end_column},
        }
    }


def _fix(finding) -> dict:
    """The fix as SARIF's replacements; the imports it needs said in its description (kvlint places them
    when it applies the fix, by the file's own import layout)."""
    fix = finding.fix
    imports = [f"`from {c.module} import {c.name}`" for c in fix.imports if c.add]
    description = fix.title + (f"; adds {', '.join(imports)}" if imports else "")
    if fix.applicability.value != "safe":
        description += " (unsafe: `kvlint fix --unsafe-fixes`)"
    return {
        "description": {"text": description},
        "artifactChanges": [
            {
                "artifactLocation": {"uri": PurePath(finding.path).as_posix(), "uriBaseId": "%SRCROOT%"},
                "replacements": [
                    {
                        "deletedRegion": {
                            "startLine": edit.line,
                            "startColumn": edit.column,
                            "endLine": edit.end_line,
                            "endColumn": edit.end_column,
                        },
                        "insertedContent": {"text": edit.replacement},
                    }
                    for edit in fix.edits
                ],
            }
        ],
    }


class SarifReporter(Reporter):
    NAME = "sarif"
    USES_RULE_DOCS = True

    def render(self, findings, rules) -> str:
        codes = [r.CODE for r in rules]
        for f in findings:
            if f.code not in codes:
                codes.append(f.code)
        by_code = {r.CODE: r for r in rules}
        # A rule's default level is the most severe of its findings here ("warning", SARIF's own default, when
        # it has none): a rule whose every finding is a warning is not announced as an error.
        errors = {f.code for f in findings if f.severity is Severity.ERROR}
        descriptors = []
        for code in codes:
            rule = by_code.get(code)
            descriptors.append(
                {
                    "id": code,
                    "name": rule.NAME if rule else code,
                    "shortDescription": {"text": rule.NAME.replace("-", " ") if rule else code},
                    "fullDescription": {"text": (rule.doc_section("What it does") or rule.NAME) if rule else code},
                    "help": {
                        "text": rule.documentation() if rule else code,
                        "markdown": rule.documentation() if rule else code,
                    },
                    "defaultConfiguration": {"level": "error" if code in errors else "warning"},
                }
            )
        results = []
        for f in findings:
            result = {
                "ruleId": f.code,
                "ruleIndex": codes.index(f.code),
                "level": LEVELS[f.severity],
                "message": {"text": f.message},
                "locations": [_location(f.path, f.line, f.column, f.end_line, f.end_column)],
            }
            if f.fix is not None:
                result["fixes"] = [_fix(f)]
            if f.related:
                result["relatedLocations"] = [
                    {
                        "id": index,
                        **_location(r.path, r.line, r.column, r.end_line, r.end_column),
                        "message": {"text": f"{r.code}: {r.message}"},
                    }
                    for index, r in enumerate(f.related, start=1)
                ]
            results.append(result)
        document = {
            "$schema": SCHEMA,
            "version": "2.1.0",
            "runs": [
                {
                    "tool": {
                        "driver": {
                            "name": "kvlint",
                            "version": __version__,
                            "rules": descriptors,
                        }
                    },
                    "results": results,
                }
            ],
        }
        return json.dumps(document, indent=2) + "\n"
