"""The Rule base class: a batchable libcst visitor that reports plain-data findings.

A rule module defines one subclass with CODE, NAME, MESSAGE, FIX_TITLE, its documentation (the class
docstring, in ruff's sections) and VALID/INVALID examples that are both its tests and its `explain` text.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

import libcst as cst
from libcst.metadata import MetadataWrapper

from kvlint.analysis.cst_walk import code_positions
from kvlint.analysis.flow.provenance import SpecFlow
from kvlint.analysis.tree_index import TreeIndex as ProjectIndex
from kvlint.engine.prefilter import Triggers, triggers_match
from kvlint.engine.preparse import PreParse
from kvlint.types import Finding, Fix, Message, Severity


@dataclass(frozen=True)
class Example:
    """A code sample. `path` places it in a vLLM tree (roles depend on where code lives)."""

    code: str
    path: str = "vllm/distributed/kv_transfer/kv_connector/v1/example/config.py"
    # For INVALID examples: the source after `kvlint fix` (with --unsafe-fixes when `unsafe`).
    fixed: str | None = None
    unsafe: bool = False
    # For examples needing a tree without the resolver (such a tree is not read: no container reachability).
    has_resolver: bool = True
    # The interface functions the example's tree defines (None: vLLM 0.29.0's); `()`: no unwrapping helper.
    tree_functions: tuple[str, ...] | None = None
    # For INVALID examples: the severity every finding of the rule has (None: not checked).
    severity: Severity | None = None

    @property
    def source(self) -> str:
        return textwrap.dedent(self.code).lstrip("\n")

    @property
    def fixed_source(self) -> str | None:
        return None if self.fixed is None else textwrap.dedent(self.fixed).lstrip("\n")


@dataclass
class PendingReport:
    rule: Rule
    node: cst.CSTNode
    message: str | Message
    severity: Severity
    fix: Callable[[], Fix | None] | None
    fix_unavailable: str | None


@dataclass
class RuleContext:
    """What a rule may know about the file it is visiting; shared by all rules of one file."""

    path: str
    module_path: str  # relative to the tree root, "/"-separated, e.g. vllm/v1/core/kv_cache_utils.py
    source: str
    line_offsets: list[int]
    project: ProjectIndex
    settings: dict
    flow: SpecFlow
    wrapper: MetadataWrapper
    pending: list[PendingReport] = field(default_factory=list)
    _positions: dict | None = None

    def position(self, node: cst.CSTNode):
        # Positions cost a full code generation: computed only for files that report something.
        if self._positions is None:
            self._positions = code_positions(self.wrapper)
        return self._positions[node]


class Rule(cst.BatchableCSTVisitor):
    """Visit methods look at candidate nodes and call `report`; positions are resolved afterwards."""

    CODE: ClassVar[str]
    NAME: ClassVar[str]
    MESSAGE: ClassVar[str]
    FIX_TITLE: ClassVar[str | None] = None
    VALID: ClassVar[list[Example]] = []
    INVALID: ClassVar[list[Example]] = []
    # What a file's text must hold to produce a finding (kvlint.engine.prefilter: clauses of substrings). A scan
    # answered from the cache checks a changed file against them without importing the rules; a
    # `could_match` override may narrow them but never widen them (tests/test_rules.py holds every rule
    # to that on real vLLM).
    TRIGGERS: ClassVar[Triggers] = ()

    @classmethod
    def could_match(cls, text: str) -> bool:
        """Cheap text test run before parsing; False means this file cannot produce a finding."""
        return triggers_match(cls.TRIGGERS, text)

    @classmethod
    def could_report(cls, pre: PreParse) -> bool:
        """Asked after `could_match`, before libcst parses the file: False when Python's syntax tree
        (`pre.tree`), the scan's index and the settings show this file cannot hold one of its findings.
        Never False where the rule would report; True when `pre.tree` is None."""
        return True

    def __init__(self, context: RuleContext):
        super().__init__()
        self.context = context

    @property
    def flow(self) -> SpecFlow:
        return self.context.flow

    def code_of(self, node: cst.CSTNode, own_parentheses: bool = True) -> str:
        start, end = self.span(node, own_parentheses)
        return self.context.source[start:end]

    def span(self, node: cst.CSTNode, own_parentheses: bool = True) -> tuple[int, int]:
        """Character offsets of `node` in the source, with its own parentheses unless told otherwise.

        libcst's positions leave a node's parentheses out (`(A, B)` is a Tuple whose position covers `A, B`):
        text taken from there and put elsewhere loses them, so by default the span runs from the outermost
        `(` the node owns to its last `)`, and whatever lies between (whitespace, comments) comes along.
        """
        lpar, rpar = getattr(node, "lpar", ()), getattr(node, "rpar", ())
        first = self.context.position(lpar[0] if own_parentheses and lpar else node)
        last = self.context.position(rpar[-1] if own_parentheses and rpar else node)
        offsets = self.context.line_offsets
        return (
            offsets[first.start.line - 1] + first.start.column,
            offsets[last.end.line - 1] + last.end.column,
        )

    def report(
        self,
        node: cst.CSTNode,
        message: str | Message,
        *,
        fix: Callable[[], Fix | None] | None = None,
        severity: Severity = Severity.ERROR,
        fix_unavailable: str | None = None,
    ) -> None:
        """Record a finding; `fix` is a callable building the Fix once positions are known. A `Message` gives
        the text output its headline, detail and remedy; a plain string is shown as it is."""
        self.context.pending.append(PendingReport(self, node, message, severity, fix, fix_unavailable))

    def finding_for(self, pending: PendingReport) -> Finding:
        position = self.context.position(pending.node)
        parts = pending.message if isinstance(pending.message, Message) else None
        return Finding(
            path=self.context.path,
            line=position.start.line,
            column=position.start.column + 1,
            end_line=position.end.line,
            end_column=position.end.column + 1,
            code=self.CODE,
            name=self.NAME,
            message=parts.text if parts is not None else pending.message,
            severity=pending.severity,
            fix=pending.fix() if pending.fix is not None else None,
            fix_unavailable=pending.fix_unavailable,
            headline=parts.headline if parts is not None else None,
            detail=parts.detail if parts is not None else None,
            remedy=parts.remedy if parts is not None else None,
            kinds=parts.kinds if parts is not None else (),
        )

    @classmethod
    def documentation(cls) -> str:
        return textwrap.dedent(cls.__doc__ or "").strip()

    @classmethod
    def doc_section(cls, name: str) -> str:
        """The text of the documentation's `## name` section on one line (whitespace collapsed); "" if none."""
        for block in cls.documentation().split("## ")[1:]:
            title, _, body = block.partition("\n")
            if title.strip() == name:
                return " ".join(body.split())
        return ""
