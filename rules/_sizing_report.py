"""Report the sizing analysis' divergences of one kind at their def (or expression) in the linted module.

KV103–KV105 find nothing themselves: the cross-file analysis (kvlint.analysis.sizing) has already found
every divergence of the tree as a plain record. Each of these rules says which record type it reports
(`REPORTS`) and words it (`describe`, `severity_of`); this mixin places the records of the linted module
on its nodes. Kept out of the rule modules' names (`_…`) so that the registry sees only real rules.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import ClassVar

from kvlint.analysis.runner_reach import selected_by
from kvlint.analysis.sizing.against_target import analyse_against_target
from kvlint.analysis.sizing.results import SizingAnalysis
from kvlint.analysis.sizing.single_file import analyse_single_file
from kvlint.types import Message, RelatedLocation, Severity

# The suffix of a KV103/KV105 message when every differing kind is one the tree rejects under DCP.
ONLY_REJECTED = " — only for kinds vLLM rejects under DCP ({reasons})"


def listing(items: list[str] | tuple[str, ...], limit: int = 3) -> str:
    """`a, b, c and 2 more`."""
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def outside_vllm(view) -> bool:
    """The scan's resolver view (TreeIndex.resolver_view) is vLLM's, not the scanned code's own."""
    return view is not None and (view.source == "builtin" or view.outside)


def short_name(qualified: str) -> str:
    """`vllm.v1.core.kv_cache_utils:resolve_kv_cache_block_sizes` → `resolve_kv_cache_block_sizes`: a
    headline names the function; the location before it names the file."""
    return qualified.rsplit(":", 1)[-1]


def analysis_for(context) -> SizingAnalysis | None:
    """The tree's analysis; for code outside the tree, this file analysed as a module of the release it
    targets, or, without one, alone against kvlint's built-in definitions."""
    project = context.project
    if project.sizing is not None and not judged_against_release(project):
        return project.sizing
    if judged_against_release(project):
        sizing = project.sizing
        return analyse_against_target(context.module_path, context.source, project.root, sizing, project.hierarchy)
    if project.root is None or project.target is not None:  # code outside the tree (or the release it targets)
        return analyse_single_file(context.module_path, context.source, project.hierarchy)
    return None


def judged_against_release(project) -> bool:
    """Code outside the tree judged against a release whose analysis says which of its files it read."""
    return project.target is not None and project.sizing is not None and bool(project.sizing.modules)


class SizingReport:
    """Mixed into a Rule (before it): reports this rule's divergences of the linted module."""

    REPORTS: ClassVar[type]  # the divergence record type this rule words
    # What this rule's findings compare a path with ("reference": the scheduler's path, "resolver"): a
    # review re-anchors them on a change to that target (kvlint.review.crossfile).
    COMPARED_WITH: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def describe(cls, divergence, view=None) -> Message:
        raise NotImplementedError

    @classmethod
    def describe_related(cls, divergence, view=None) -> tuple[str, str, str, tuple[str, ...]]:
        """(code, message, headline, kinds) of a divergence of another rule folded into this rule's finding."""
        raise NotImplementedError

    @classmethod
    def severity_of(cls, divergence) -> Severity:
        raise NotImplementedError

    @classmethod
    def could_report(cls, pre) -> bool:
        # The tree's analysis is done before any file is linted: a module with none of this rule's
        # divergences needs no parse for it. (A lone file is analysed from its text when it is linted.)
        analysis = pre.project.sizing
        if analysis is None:
            return pre.project.root is None
        if judged_against_release(pre.project):  # analysed from its text when it is linted, as a lone file is
            return True
        return bool(cls._reported(analysis.divergences_in(pre.module_path)))

    @classmethod
    def _reported(cls, found) -> list:
        # A path whose divergence a helper of another module causes is that helper's related location.
        return [d for d in found if isinstance(d, cls.REPORTS) and getattr(d, "root_cause", None) is None]

    def __init__(self, context) -> None:
        super().__init__(context)
        analysis = analysis_for(self.context)
        self._divergences = self._reported(
            analysis.divergences_in(self.context.module_path) if analysis is not None else ()
        )
        self._scopes: list[str] = []
        self._related: dict[int, tuple] = {}

    # Scope tracking: a divergence without a column is reported at the def whose qualified name it carries.
    def visit_ClassDef(self, node) -> None:
        self._scopes.append(node.name.value)

    def leave_ClassDef(self, original_node) -> None:
        self._scopes.pop()

    def visit_FunctionDef(self, node) -> None:
        self._scopes.append(node.name.value)
        self._report_def(node)

    def leave_FunctionDef(self, original_node) -> None:
        self._scopes.pop()

    def _report(self, node, divergence) -> None:
        self._divergences.remove(divergence)
        self._related[id(node)] = getattr(divergence, "related_paths", ())
        message = self.describe(divergence, self.context.project.resolver_view)
        severity = self.severity_of(divergence)
        unproven = selected_by(self.context.project.runner_selection, self.context.module_path)
        if unproven and severity is Severity.ERROR:  # runner code a setting picks: that it runs is a link unproven
            said = f"; a warning, not an error: {unproven}"
            message = replace(
                message, detail=message.detail + said, statement=(message.statement or message.detail) + said
            )
            severity = Severity.WARNING
        self.report(node, message, severity=severity)

    def finding_for(self, pending):
        """The paths of other modules that diverge through this finding's helper, as its related locations."""
        finding = super().finding_for(pending)
        paths = self._related.get(id(pending.node), ())
        if not paths:
            return finding
        path, module = self.context.path, self.context.module_path
        root = path[: len(path) - len(module)] if path.endswith(module) else ""
        view = self.context.project.resolver_view
        extra = tuple(
            RelatedLocation(root + p.module_path, p.line, 1, p.line, 1, *self.describe_related(p, view)) for p in paths
        )
        return replace(finding, related=(*finding.related, *extra))

    def _report_def(self, node) -> None:
        qualname = ".".join(self._scopes)
        for divergence in [d for d in self._divergences if d.column is None and d.qualname == qualname]:
            self._report(node, divergence)

    def _report_expression(self, node) -> None:
        if not any(d.column is not None for d in self._divergences):
            return
        position = self.context.position(node)
        for divergence in self._divergences:
            if (
                divergence.column is not None
                and divergence.line == position.start.line
                and divergence.column == position.start.column + 1
            ):
                self._report(node, divergence)
                return


@dataclass(frozen=True)
class SizingFinding:
    """A divergence as its rule reports it, placed in its module (for `kvlint paths`)."""

    code: str
    module_path: str
    qualname: str
    line: int
    column: int | None
    severity: Severity
    message: str
    headline: str


def sizing_findings(analysis: SizingAnalysis, rules: Iterable[type], view=None) -> tuple[SizingFinding, ...]:
    """Every divergence of the analysis worded by the rule among `rules` (the registry's) that reports it,
    in the analysis' order; `view` is the scan's TreeIndex.resolver_view, as `check` words them."""
    reporters = [rule for rule in rules if issubclass(rule, SizingReport)]
    found: list[SizingFinding] = []
    for divergence in analysis.divergences:
        rule = next(r for r in reporters if isinstance(divergence, r.REPORTS))
        message = rule.describe(divergence, view)
        found.append(
            SizingFinding(
                rule.CODE,
                divergence.module_path,
                divergence.qualname,
                divergence.line,
                divergence.column,
                rule.severity_of(divergence),
                message.text,
                message.headline,
            )
        )
    return tuple(found)
