"""Lint one file's source into a FileResult: one parse, all rules in one batched traversal, never raises."""

from __future__ import annotations

import ast
import re
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

import libcst as cst
from libcst.metadata import MetadataWrapper

from kvlint.analysis.cst_positions import StatementPositions
from kvlint.analysis.cst_walk import ModuleShape, parent_map, walk_batched
from kvlint.analysis.flow.provenance import SpecFlow
from kvlint.analysis.tree_index import TreeIndex as ProjectIndex
from kvlint.engine.copies import judged_as_originals
from kvlint.engine.grouping import fold_root_causes, function_spans, root_cause_roles
from kvlint.engine.parse_guard import TooNested, check_parsable
from kvlint.engine.preparse import PreParse
from kvlint.engine.rule import Rule, RuleContext
from kvlint.engine.source import MAX_FILE_BYTES, decode_source
from kvlint.engine.suppress import suppress_root_causes, suppressions
from kvlint.errors import UnreadableSource
from kvlint.types import FileResult, Finding, unreadable

_NEWLINE = re.compile(r"\r\n|\r|\n")
# libcst's own "error at L:C: " prefix: its numbers differ from the error's raw position, so it is dropped.
_LIBCST_POSITION = re.compile(r"^(?:parser error: )?error at \d+:\d+: ")


def line_offsets(text: str) -> list[int]:
    """Offset of the first character of each line, splitting lines as libcst does (\\r\\n, \\r or \\n)."""
    return [0, *(m.end() for m in _NEWLINE.finditer(text))]


def load_native_parser() -> None:
    """Load libcst's native parser now. A pool worker does this before its memory is capped
    (kvlint.scan.jobs): loaded lazily at its first parse, under the cap, its shared object may fail to map."""
    import libcst.native  # noqa: F401


@dataclass
class LintRequest:
    path: str  # as shown to the user
    module_path: str  # relative to the tree root, for role decisions
    project: ProjectIndex
    rules: tuple[type[Rule], ...]
    settings: dict = field(default_factory=dict)
    # Codes or prefixes the configuration ignores in this file: their rules still run, so that ignoring the
    # finding shown ignores its root cause (kvlint.engine.suppress).
    ignored: tuple[str, ...] = ()


def lint_bytes(request: LintRequest, data: bytes) -> FileResult:
    result = _lint_bytes(request, data)
    if request.ignored and not result.parsed:  # a KV000 the configuration ignores
        findings, suppressed = suppress_root_causes(result.findings, {}, request.ignored)
        return replace(result, findings=tuple(findings), suppressed=suppressed)
    return result


def _lint_bytes(request: LintRequest, data: bytes) -> FileResult:
    try:
        if len(data) > MAX_FILE_BYTES:
            return unreadable(request.path, f"too large ({len(data) / 2**20:.1f} MiB > {MAX_FILE_BYTES // 2**20} MiB)")
        try:
            decoded = decode_source(data)
        except UnreadableSource as error:
            return unreadable(request.path, str(error))
        return lint_text(request, decoded.text)
    except RecursionError:
        return unreadable(request.path, "nested too deeply to analyse")
    except MemoryError:  # a worker's memory cap (kvlint.scan.jobs), reached outside libcst's native parser
        return unreadable(request.path, "too costly to parse: kvlint ran out of memory")
    except Exception as error:  # a rule bug must not end the scan; say which file tripped it
        if _from_recursion(error):  # libcst turns a stack exhausted in its position codegen into a KeyError
            return unreadable(request.path, "nested too deeply to analyse")
        result = unreadable(
            request.path, f"internal error in kvlint ({_described(error)}); re-run with --verbose for details"
        )
        return replace(result, detail=_traceback_text())


def _from_recursion(error: BaseException) -> bool:
    """Whether `error` was raised while handling, or because of, an exhausted stack (a chain of 800 `elif`s)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, RecursionError):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


# An internal error's text in its one line: its start, however long (a node's repr is the whole subtree).
_DESCRIBED_CHARACTERS = 200


def _described(error: Exception) -> str:
    """`Type: text`, the text cut short; the type alone where the text cannot be made (it recurses, it raises)."""
    try:
        text = str(error)
    except Exception:  # noqa: BLE001 - the line must be written whatever the error holds (a deep repr recurses)
        return type(error).__name__
    if len(text) > _DESCRIBED_CHARACTERS:
        text = text[:_DESCRIBED_CHARACTERS] + "…"
    return f"{type(error).__name__}: {text}"


def _traceback_text() -> str:
    try:
        return traceback.format_exc()
    except Exception:  # noqa: BLE001 - formatting a deep value's repr exhausted the stack
        return "(the traceback could not be formatted)"


def lint_text(request: LintRequest, text: str) -> FileResult:
    linted = _rule_findings(request, text)
    if isinstance(linted, FileResult):
        return linted
    findings, spans, tree = linted
    # Outside the tree, a function copied from the target release: the tree's verdict (kvlint.engine.copies).
    findings = judged_as_originals(request, tree, findings, _original_findings)
    folded = fold_root_causes(findings, root_cause_roles(request.rules), spans)
    kept, suppressed = suppress_root_causes(folded, suppressions(text), request.ignored)
    return FileResult(path=request.path, findings=tuple(kept), suppressed=suppressed)


def _original_findings(request: LintRequest, module_path: str, text: str) -> list[Finding]:
    """The rules' findings of a module of the tree, linted as the tree's own scan lints it."""
    linted = _rule_findings(replace(request, path=module_path, module_path=module_path, ignored=()), text)
    return [] if isinstance(linted, FileResult) else linted[0]


def _rule_findings(request: LintRequest, text: str):
    """(the rules' findings, unfolded; the spans of their functions, for folding; Python's parse or None), or
    the FileResult of a file no rule needs to parse or that cannot be parsed."""
    # Three sieves, cheapest first: the rules' text triggers, then what the index and Python's own parse show
    # each rule (`Rule.could_report`; the parse made only for a rule that asks for it), and only then (after
    # the nesting guard) libcst for the rules left.
    visitors = [r for r in request.rules if not getattr(r, "ENGINE_ONLY", False) and r.could_match(text)]
    if not visitors:
        return FileResult(path=request.path, skipped_by_prefilter=True)
    pre = PreParse(text, request.module_path, request.project, request.settings)
    visitors = [r for r in visitors if r.could_report(pre)]
    if not visitors:
        return FileResult(path=request.path, skipped_by_prefilter=True)
    try:
        check_parsable(text)  # before libcst: deep nesting crashes its native parser
    except TooNested as error:
        return unreadable(request.path, str(error))
    except SyntaxError as error:
        line, column = error.lineno or 1, max(error.offset or 1, 1)
        return unreadable(
            request.path, f"syntax error at {line}:{column}: {' '.join(str(error.msg).split())}", line, column
        )
    try:
        module = cst.parse_module(text)
    except cst.ParserSyntaxError as error:
        line, column, detail = syntax_error_position(text, error)
        return unreadable(request.path, f"syntax error at {line}:{column}: {detail}", line, column)
    except cst.CSTValidationError as error:  # a node libcst refuses that Python's parse let through
        return unreadable(request.path, f"cannot be parsed by libcst: {' '.join(str(error).split())}")
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    # Parents, children and the node order from one walk: the rules' walk, provenance and positions share it.
    shape = ModuleShape(module)
    offsets = line_offsets(text)
    context = RuleContext(
        path=request.path,
        module_path=request.module_path,
        source=text,
        line_offsets=offsets,
        project=request.project,
        settings=request.settings,
        flow=SpecFlow(module, shape.parents, shape.preorder),
        wrapper=wrapper,
        _positions=StatementPositions(wrapper, text, offsets, shape.parents, pre.tree),
    )
    walk_batched(wrapper, [rule(context) for rule in visitors], shape)
    findings = [pending.rule.finding_for(pending) for pending in context.pending]
    holders = {a for p in context.pending for a in _ancestors(p.node, shape.parents) if isinstance(a, cst.FunctionDef)}
    context.pending.clear()  # each refers to its rule, which refers to the context: freed without the collector
    return findings, lambda: function_spans(module, context.position, holders), pre.tree


def _ancestors(node: cst.CSTNode, parents: dict[cst.CSTNode, cst.CSTNode]) -> Iterator[cst.CSTNode]:
    """`node` and each node above it."""
    yield node
    while node in parents:
        node = parents[node]
        yield node


def syntax_error_position(text: str, error: cst.ParserSyntaxError) -> tuple[int, int, str]:
    """(line, column, detail) of a syntax error, one position (1-based column) for the finding and its message.

    libcst's native parser often points a line past the mistake (a bad `def f(:` is reported on the next
    line); Python's own parser names the mistake where it is, so its position and wording are used when it
    rejects the text too. When only libcst rejects it (syntax newer than libcst knows), libcst's stands.
    """
    try:
        ast.parse(text)
    except SyntaxError as python_error:
        if python_error.lineno:
            return python_error.lineno, max(python_error.offset or 1, 1), " ".join(python_error.msg.split())
    except ValueError:
        pass  # NUL bytes on Python < 3.12: the decoder reports those before any parse
    detail = _LIBCST_POSITION.sub("", error.message)
    return error.raw_line, error.raw_column + 1, " ".join(detail.split())


def collect_parents(module: cst.Module) -> dict[cst.CSTNode, cst.CSTNode]:
    """Every node of `module` → its parent."""
    return parent_map(module)
