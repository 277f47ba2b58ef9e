"""The verify matrix as plain data, and its text and JSON renderings.

The child process (child.py) writes raw JSON; `parse_report` turns it into frozen
dataclasses, which know their exit code and never print; `render_text` and
`render_json` only format.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kvlint.engine.summary import exit_code

# One span per group, in group order; None where a path does not size that group.
Spans = tuple[int | None, ...]
# What a path gave for a cell: its spans, or the message of what it raised.
PathResult = Spans | str


class ReportError(Exception):
    """The child's output is not a verify report."""


@dataclass(frozen=True)
class CellResult:
    kind: str
    dcp: int
    container: bool
    paths: Mapping[str, PathResult]
    # None when nothing could be compared (the release cannot express this cell).
    agree: bool | None
    not_expressible: str | None = None
    # Paths kvlint could not evaluate for this cell, with the reason; left out of `paths`.
    not_expressible_paths: Mapping[str, str] = field(default_factory=dict)
    scheduler_block_size: int | None = None
    hash_block_size: int | None = None
    # Why vLLM's scheduler refuses this configuration at start (its coordinator raised): not compared.
    refused: str | None = None

    def deviates(self, name: str) -> bool:
        """Whether one path's result differs from the scheduler's (or raised)."""
        result = self.paths[name]
        if isinstance(result, str):
            return True
        reference = self.paths.get("scheduler")
        if not isinstance(reference, tuple) or name == "scheduler":
            return False
        return any(
            mine is not None and theirs is not None and mine != theirs for mine, theirs in zip(result, reference)
        )


@dataclass(frozen=True)
class VerifyReport:
    vllm_version: str
    vllm_path: str
    python: str
    setup: Mapping[str, int]
    paths: Mapping[str, str]
    unavailable_paths: Mapping[str, str]
    notes: Mapping[str, str]
    cells: tuple[CellResult, ...] = field(default_factory=tuple)

    @property
    def disagreeing(self) -> tuple[CellResult, ...]:
        return tuple(cell for cell in self.cells if cell.agree is False)

    @property
    def compared(self) -> tuple[CellResult, ...]:
        return tuple(cell for cell in self.cells if cell.agree is not None)

    @property
    def exit_code(self) -> int:
        """0 every compared cell agrees, 1 some disagree, 2 nothing could be compared."""
        return exit_code(self.disagreeing, error=not self.compared)


def _parse_result(value: Any) -> PathResult:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(item is None or isinstance(item, int) for item in value):
        return tuple(value)
    raise ReportError(f"unexpected path result {value!r}")


def parse_report(raw: Mapping[str, Any]) -> VerifyReport:
    """Build the report from the child's JSON (already checked for import errors)."""
    try:
        cells = tuple(
            CellResult(
                kind=str(cell["kind"]),
                dcp=int(cell["dcp"]),
                container=bool(cell.get("container", False)),
                paths={name: _parse_result(value) for name, value in cell["paths"].items()},
                agree=cell["agree"],
                not_expressible=cell.get("not_expressible"),
                not_expressible_paths=dict(cell.get("not_expressible_paths", {})),
                scheduler_block_size=cell.get("scheduler_block_size"),
                hash_block_size=cell.get("hash_block_size"),
                refused=cell.get("refused"),
            )
            for cell in raw["cells"]
        )
        return VerifyReport(
            vllm_version=str(raw["vllm"]["version"]),
            vllm_path=str(raw["vllm"]["path"]),
            python=str(raw.get("python", "")),
            setup=dict(raw.get("setup", {})),
            paths=dict(raw["paths"]),
            unavailable_paths=dict(raw.get("unavailable_paths", {})),
            notes=dict(raw.get("notes", {})),
            cells=cells,
        )
    except (KeyError, TypeError, ValueError) as error:
        raise ReportError(f"malformed verify result: {error!r}") from None


# ------------------------------------------------------------------------- JSON


def _json_result(result: PathResult) -> Any:
    if isinstance(result, str):
        return result
    # A one-group kind has one span: give it as a number, several as a list.
    return result[0] if len(result) == 1 else list(result)


def report_to_json(report: VerifyReport) -> dict[str, Any]:
    return {
        "vllm": {"version": report.vllm_version, "path": report.vllm_path},
        "python": report.python,
        "setup": dict(report.setup),
        "paths": dict(report.paths),
        "unavailable_paths": dict(report.unavailable_paths),
        "cells": [
            {
                "kind": cell.kind,
                "dcp": cell.dcp,
                "container": cell.container,
                "paths": {name: _json_result(value) for name, value in cell.paths.items()},
                "agree": cell.agree,
                **(
                    {
                        "scheduler_block_size": cell.scheduler_block_size,
                        "hash_block_size": cell.hash_block_size,
                    }
                    if cell.scheduler_block_size is not None
                    else {}
                ),
                **({"not_expressible": cell.not_expressible} if cell.not_expressible is not None else {}),
                **({"refused": cell.refused} if cell.refused is not None else {}),
                **({"not_expressible_paths": dict(cell.not_expressible_paths)} if cell.not_expressible_paths else {}),
            }
            for cell in report.cells
        ],
        "agree": not report.disagreeing,
    }


def render_json(report: VerifyReport) -> str:
    return json.dumps(report_to_json(report), indent=2)


# ------------------------------------------------------------------------- text


def _format_spans(spans: Spans) -> str:
    return ",".join("-" if span is None else str(span) for span in spans)


def render_text(report: VerifyReport) -> str:
    """The matrix: a row per kind x DCP, a column per path; '!' marks a disagreement."""
    names = list(report.paths)
    footnotes: dict[str, int] = {}

    def cell_text(cell: CellResult, name: str) -> str:
        if name in cell.not_expressible_paths:
            number = footnotes.setdefault(f"not evaluated: {cell.not_expressible_paths[name]}", len(footnotes) + 1)
            return f"n/a[{number}]"
        result = cell.paths.get(name)
        if result is None:
            return ""
        if isinstance(result, str):
            number = footnotes.setdefault(result, len(footnotes) + 1)
            return f"!error[{number}]"
        text = _format_spans(result)
        return f"!{text}" if cell.deviates(name) else text

    header = ["kind", "dcp", *names, "agree"]
    rows: list[list[str]] = []
    for cell in report.cells:
        if cell.not_expressible is not None:
            rows.append([cell.kind, str(cell.dcp), f"cannot express: {cell.not_expressible}"])
            continue
        if cell.refused is not None:
            number = footnotes.setdefault(cell.refused, len(footnotes) + 1)
            rows.append([cell.kind, str(cell.dcp), f"refused by vLLM's scheduler at start[{number}]"])
            continue
        verdict = {True: "yes", False: "NO", None: "-"}[cell.agree]
        rows.append([cell.kind, str(cell.dcp), *(cell_text(cell, n) for n in names), verdict])
    full_rows = [row for row in [header, *rows] if len(row) == len(header)]
    widths = [max(len(row[column]) for row in full_rows) for column in range(len(header))]

    def line(row: list[str]) -> str:
        if len(row) != len(header):  # a "cannot express" or "refused" row spans the path columns
            return "  ".join([row[0].ljust(widths[0]), row[1].rjust(widths[1]), row[2]])
        parts = [
            text.rjust(widths[column]) if column == 1 else text.ljust(widths[column]) for column, text in enumerate(row)
        ]
        return "  ".join(parts).rstrip()

    setup = ", ".join(f"{key}={value}" for key, value in report.setup.items())
    out = [f"vLLM {report.vllm_version} at {report.vllm_path} (python {report.python}; {setup})"]
    out.append("token span per block, per group; '!' marks a disagreement with the scheduler")
    out.append("paths:")
    name_width = max((len(name) for name in names), default=0)
    for name, description in report.paths.items():
        out.append(f"  {name.ljust(name_width)}  {description}")
    for name, reason in report.unavailable_paths.items():
        out.append(f"  {name.ljust(name_width)}  not in this release: {reason}")
    out.append("")
    out.append(line(header))
    out.extend(line(row) for row in rows)
    if footnotes:
        out.append("")
        out.append("notes:")
        for message, number in footnotes.items():
            out.append(f"  [{number}] {message}")
    out.append("")
    out.append(_summary(report))
    return "\n".join(out)


def _summary(report: VerifyReport) -> str:
    """The last line: cells that agree of those compared, then those disagreeing, refused and not compared."""
    expressed = [cell for cell in report.cells if cell.agree is not None]
    summary = f"{len(expressed) - len(report.disagreeing)} of {len(expressed)} cells agree"
    if report.disagreeing:
        summary += f"; {len(report.disagreeing)} disagree"
    refused = sum(1 for cell in report.cells if cell.refused is not None)
    if refused:
        summary += f"; {refused} refused by vLLM's scheduler at start (not compared)"
    skipped = len(report.cells) - len(expressed) - refused
    if skipped:
        summary += f"; {skipped} could not be compared in this release"
    return summary + "."
