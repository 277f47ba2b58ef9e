"""`kvlint verify --rewrites TREE`: the container-blind checks `kvlint fix` rewrites in TREE, as cases the verify
child evaluates in a real vLLM, and the table of what it answered.

Each in-place rewrite (`isinstance(x, C)` → `is_full_attention_spec(x)` / `all(isinstance(spec, C) for spec in
iter_layer_specs(x))`) becomes two descriptions of the check on one spec, `group_spec`, before and after
(kvlint.verify.check_forms: the test, the class names, the quantifier — data, never code: TREE is input, and
a check whose classes are not names is said, not evaluated). The child evaluates
both on a plain spec of every class and on a container of every composition the tree can build
(kvlint.analysis.census.compositions): a plain spec must answer as before, a container as its layers do, taken
with the rewrite's quantifier. A rewrite at a call site (`… for spec in iter_layer_specs(…)`) calls the
tree's own function, which the child cannot import alone: it is listed, and `--upstream-tests` runs it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kvlint.analysis.layer_helpers import QUANTIFIERS
from kvlint.analysis.layer_mixes import spec_class_mixes
from kvlint.engine.source import decode_source
from kvlint.errors import UnreadableSource
from kvlint.escaping import printable
from kvlint.filesystem import read_file_inside
from kvlint.rules.kv101_container_isinstance import ContainerIsinstance
from kvlint.scan.config import Config
from kvlint.scan.runner import scan
from kvlint.types import Finding
from kvlint.verify.check_forms import NotEvaluable, describe_rewrite

CODE = ContainerIsinstance.CODE
SUBJECT = "group_spec"


@dataclass(frozen=True)
class CheckCase:
    site: str  # path:line:column
    before: dict | None  # the check's description (kvlint.verify.check_forms); None: not evaluated alone
    after: dict | None
    quantifier: str  # how a container's layers' answers combine in the rewrite
    applicability: str
    rewrite: str  # the replacement, on one line
    unevaluated: str | None = None  # why a class test is not sent to the child (None: a call-site rewrite)


def collect_cases(tree: Path, config: Config) -> tuple[list[CheckCase], list[list[str]], dict]:
    """The container-blind checks `kvlint fix` rewrites in `tree` and the compositions its containers can have (each a list of classes)."""
    result = scan([tree], config, [CODE], [], cache_dir=None)
    compositions = spec_class_mixes(result.project) or ()
    order = {name: index for index, name in enumerate(result.project.hierarchy.bases)}
    helpers = result.project.hierarchy.layer_helpers
    cases = [_case(finding, tree, helpers) for finding in result.findings if finding.fix is not None]
    ordered = [sorted(c, key=lambda name: order.get(name, 0)) for c in compositions]
    return [c for c in cases if c is not None], ordered, dict(helpers)


def _case(finding: Finding, tree: Path, helpers: dict[str, tuple[str, str]]) -> CheckCase | None:
    if finding.code != CODE or finding.fix is None:
        return None
    path = Path(finding.path)
    shown = path.relative_to(tree).as_posix() if path.is_absolute() and path.is_relative_to(tree) else finding.path
    site = f"{shown}:{finding.line}:{finding.column}"
    edits = finding.fix.edits
    rewrite = " ".join(" ".join(edit.replacement.split()) for edit in edits)
    applicability = finding.fix.applicability.value
    original = _original_text(tree, shown, edits[0].start, edits[0].end) if len(edits) == 1 else ""
    try:
        described = describe_rewrite(original, edits[0].replacement) if original else None
    except NotEvaluable as reason:
        return CheckCase(site, None, None, "all", applicability, rewrite, str(reason))
    if described is None:
        return CheckCase(site, None, None, "all", applicability, rewrite)
    # `all(…)`/`any(…)`, or the tree's helper, which quantifies as its body says (kvlint.analysis.layer_helpers)
    outer = described.outer
    quantifier = outer if outer in QUANTIFIERS else helpers.get(outer, ("all", ""))[0]
    return CheckCase(site, described.before, described.after, quantifier, applicability, rewrite)


def _original_text(tree: Path, relative: str, start: int, end: int) -> str:
    """The check's text, read as the scan read the file (kvlint's reader: inside the tree, no link)."""
    try:
        return decode_source(read_file_inside(tree, relative)).text[start:end]
    except (OSError, UnreadableSource):
        return ""


def cases_document(cases: list[CheckCase], compositions: list[list[str]]) -> dict:
    """What the child reads (`child.py --checks FILE`): descriptions, never code."""
    evaluated = [c for c in cases if c.before is not None]
    return {
        "compositions": compositions,
        "cases": [
            {"site": c.site, "before": c.before, "after": c.after, "quantifier": c.quantifier} for c in evaluated
        ],
    }


def render_checks(cases: list[CheckCase], raw: dict) -> tuple[str, bool]:
    """The table, and whether every evaluated rewrite answered as it must."""
    lines = [
        f"{CODE} rewrites evaluated in vLLM {raw.get('vllm', {}).get('version', '?')} ({SUBJECT}: the checked spec)"
    ]
    results = {r["site"]: r for r in raw.get("checks", [])}
    every_ok = True
    for case in cases:
        lines.append(f"{case.site}  [{case.applicability}]  → {case.rewrite}")
        if case.unevaluated is not None:
            lines.append(f"  not evaluated: {printable(case.unevaluated)}")
            every_ok = False  # unproven: the table must not pass it
            continue
        if case.before is None:
            lines.append(
                "  a call-site rewrite: it calls the tree's own function, checked by `verify --upstream-tests`"
            )
            continue
        result = results.get(case.site)
        if result is None:
            lines.append("  not evaluated")
            every_ok = False
            continue
        plain = result["plain"]
        kept = [p for p in plain if p.get("ok")]
        missing = [p for p in plain if p.get("ok") is None]
        lines.append(
            f"  plain specs: {len(kept)} of {len(plain) - len(missing)} answer as before"
            + (
                f" ({', '.join(p['class'] for p in plain if p.get('ok') is False)} differ)"
                if len(kept) < len(plain) - len(missing)
                else ""
            )
            + (
                f"; not built here: {', '.join(p['class'] + ' (' + p['error'] + ')' for p in missing)}"
                if missing
                else ""
            )
        )
        for container in result["containers"]:
            if container.get("ok") is None:
                lines.append(f"  {{{', '.join(container['layers'])}}}: not built here ({container.get('error')})")
                continue
            mark = "ok" if container["ok"] else "WRONG"
            lines.append(
                f"  {{{', '.join(container['layers'])}}}: before {container['before']}, after {container['after']}, "
                f"layers {container['layer_answers']} → {case.quantifier} {container['expected']}  {mark}"
            )
        every_ok = every_ok and all(p.get("ok") is not False for p in plain)
        every_ok = every_ok and all(c.get("ok") is not False for c in result["containers"])
    return "\n".join(lines), every_ok
