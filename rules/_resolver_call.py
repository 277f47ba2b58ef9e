"""Build the fix that replaces hand-written DCP scaling with a call to the tree's shared resolver."""

from __future__ import annotations

import re
from bisect import bisect_right
from functools import lru_cache

import libcst as cst

from kvlint import Applicability, Fix, ImportChange, Rule, TextEdit
from kvlint.analysis.agreement import Verdict, judge
from kvlint.analysis.flow.cst_bindings import argument_for, is_static, positional_index
from kvlint.analysis.flow.provenance import dotted
from kvlint.analysis.scaling import Scaling
from kvlint.analysis.vocabulary import RESOLVER_NAME, dcp_aliases, scheduler_only_paths

FIX_TITLE = f"Replace with `{RESOLVER_NAME}(spec, dcp)`"
NO_RESOLVER = f"no fix: this tree defines no shared `{RESOLVER_NAME}` (added in vLLM 0.29.0), so nothing can call it"
# Code outside a vLLM tree: compared with vLLM's resolver, which its own vLLM may or may not define.
OUTSIDE_VLLM = (
    f"no automatic fix: this code is not in a vLLM tree, so kvlint cannot tell whether the vLLM it runs with "
    f"defines `{RESOLVER_NAME}` (vLLM 0.29.0 and later do): call it by hand"
)


def target_gap(project, module: str | None, name: str) -> str | None:
    """Why no fix may import `name` from `module` for code outside the vLLM tree: a release it targets lacks
    it (TreeIndex.lacked_by); None when every targeted release defines it."""
    lacking = project.lacked_by(module, name) if module else ()
    if not lacking:
        return None
    return (
        f"no automatic fix: vLLM {', '.join(lacking)}, which this code also targets, defines no `{name}` in `{module}`"
    )


def no_resolver_note(view) -> str:
    """Why a scaling gets no fix where the scan's resolver view (TreeIndex.resolver_view) has none to call."""
    return OUTSIDE_VLLM if view.source == "builtin" else NO_RESOLVER


LINE_LIMIT = 88


def verdict_for(rule: Rule, scaling: Scaling) -> Verdict | None:
    """The scaling's verdict, kind by kind (kvlint.analysis.agreement), once per site and rule."""
    cache = rule.__dict__.setdefault("_verdicts", {})
    if id(scaling.node) not in cache:
        context = rule.context
        patterns = scheduler_only_paths(context.settings)
        cache[id(scaling.node)] = judge(
            scaling, rule.flow, context.project, context.module_path, patterns, dcp_aliases(context.source)
        )
    return cache[id(scaling.node)]


def applicability_of(rule: Rule, scaling: Scaling) -> Applicability:
    """Safe when the call keeps every plain kind's span: only containers change, which is the fix."""
    verdict = verdict_for(rule, scaling)
    safe = verdict is not None and verdict.rewrite_keeps_plain_kinds and called_elsewhere(rule, scaling) is None
    return Applicability.SAFE if safe else Applicability.UNSAFE


def called_elsewhere(rule: Rule, scaling: Scaling) -> str | None:
    """The function whose parameter an ungated product's DCP size is, when this module's callers gate that
    size per kind (`dcp if isinstance(spec, AttentionSpec) else 1`) and other modules may call it too: the
    verdict counted on the gating, and a caller elsewhere that passes the raw size would get another span
    for the kinds the resolver leaves unscaled. None when the product is gated itself (the resolver gives
    it the same for any size), no caller here gates it, or the function is this module's own (nested, or
    named with a leading underscore)."""
    if scaling.gate is not None or not isinstance(scaling.dcp, cst.Name):
        return None
    bindings = rule.flow.bindings_of(scaling.dcp)
    if not bindings or any(b.param is None or b.function is None for b in bindings):
        return None
    function, param = bindings[0].function, bindings[0].param
    name = function.name.value
    if (
        rule.flow.enclosing(function, (cst.FunctionDef,)) is not None
        or name.startswith("_")
        and not name.endswith("__")
    ):
        return None
    position = positional_index(function, param)
    for call in rule.flow.callers(name):
        via_attribute = isinstance(call.func, cst.Attribute) and not is_static(function)
        argument = argument_for(call, param.name.value, position, via_attribute)
        if isinstance(argument, cst.IfExp):
            return name
    return None


def _line_start(source: str, offsets: list[int], offset: int) -> int:
    """Where the line holding `offset` starts, `\n` and `\r` ending lines. Searched back only from the line
    `offsets` (lint.line_offsets) puts it on: from the file's start, a file without `\r` is read back whole
    for each site, a cost in the square of a file of many sites. The break before that line's start ends at
    most two characters before it (`\r\n`), so the search finds what a search from the file's start finds."""
    line = offsets[bisect_right(offsets, offset) - 1] if offsets else 0
    low = max(line - 2, 0)
    return max(source.rfind("\n", low, offset), source.rfind("\r", low, offset)) + 1


def _line_end(source: str, offsets: list[int], offset: int) -> int:
    """Where the first `\n` or `\r` at or after `offset` is (the text's end when none): searched only up to
    the start of the next line `offsets` gives, which the first break at or after `offset` ends."""
    following = bisect_right(offsets, offset)
    high = offsets[following] if following < len(offsets) else len(source)
    found = [i for i in (source.find("\n", offset, high), source.find("\r", offset, high)) if i >= 0]
    return min(found, default=len(source))


@lru_cache(maxsize=4)
def _newline_of(source: str) -> str:
    """The newline a rewrite spanning lines uses: read once per file, not once per site."""
    return "\r\n" if "\r\n" in source else "\n"


def _indent_of_line(source: str, offsets: list[int], offset: int) -> str:
    line = source[_line_start(source, offsets, offset) : offset]
    return line[: len(line) - len(line.lstrip(" \t"))]


def resolver_call_fix(rule: Rule, scaling: Scaling) -> Fix | None:
    """The rewrite for one scaling site, or None when no call can express it."""
    project = rule.context.project
    if not project.has_resolver or scaling.spec is None or not isinstance(scaling.node, cst.BaseExpression):
        return None
    if target_gap(project, project.resolver_module, RESOLVER_NAME):  # a targeted release lacks it
        return None
    source = rule.context.source
    start, end = _span_with_own_parentheses(
        source, *rule.span(scaling.node, own_parentheses=False), len(scaling.node.lpar)
    )
    spec_code, dcp_code = _one_line(rule.code_of(scaling.spec)), _one_line(rule.code_of(scaling.dcp))
    single = f"{RESOLVER_NAME}({spec_code}, {dcp_code})"
    original = source[start:end]
    offsets = rule.context.line_offsets
    line_start = _line_start(source, offsets, start)
    multiline = "\n" in original or "\r" in original or (start - line_start) + len(single) > LINE_LIMIT
    if multiline and "\n" not in spec_code + dcp_code:
        indent = _indent_of_line(source, offsets, start)
        newline = _newline_of(source)
        replacement = (
            f"{RESOLVER_NAME}({newline}{indent}    {spec_code},{newline}{indent}    {dcp_code},{newline}{indent})"
        )
    else:
        replacement = single
    position = rule.context.position(scaling.node)
    own_module = rule.context.module_path.removesuffix(".py").replace("/", ".")
    # Inside the resolver's own module the name is already defined: importing it from itself would fail.
    imports = [] if own_module == project.resolver_module else [ImportChange(project.resolver_module, RESOLVER_NAME)]
    for name in sorted(scaling.gate_classes):
        module = _imported_from(rule.flow.module, name)
        if module is not None:
            imports.append(ImportChange(module, name, add=False))
    return Fix(
        title=FIX_TITLE,
        applicability=applicability_of(rule, scaling),
        edits=(
            TextEdit(
                start=start,
                end=end,
                replacement=replacement,
                line=position.start.line,
                column=position.start.column + 1,
                end_line=position.end.line,
                end_column=position.end.column + 1,
            ),
        ),
        imports=tuple(imports),
    )


def _one_line(code: str) -> str:
    """`groups[\n    i\n].kv_cache_spec` → `groups[i].kv_cache_spec`, when no comment or string could be harmed."""
    if "\n" not in code and "\r" not in code or any(c in code for c in "#'\""):
        return code
    flat = " ".join(code.split())
    return re.sub(r"([(\[{]) | ([)\]}])", lambda m: m.group(1) or m.group(2), flat)


def _span_with_own_parentheses(source: str, start: int, end: int, levels: int) -> tuple[int, int]:
    """Widen (start, end) over the node's own parentheses when only whitespace lies between.

    `x=(\n    a * b\n)` becomes `x=resolve(…)`, as a person would write it; a comment inside stops it.
    """
    for _ in range(levels):
        before = start
        while before > 0 and source[before - 1] in " \t\r\n":
            before -= 1
        after = end
        while after < len(source) and source[after] in " \t\r\n":
            after += 1
        if before == 0 or source[before - 1] != "(" or after >= len(source) or source[after] != ")":
            break
        start, end = before - 1, after + 1
    return start, end


def _imported_from(module: cst.Module, name: str) -> str | None:
    for statement in module.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if (
                isinstance(small, cst.ImportFrom)
                and small.module is not None
                and not isinstance(small.names, cst.ImportStar)
            ):
                for alias in small.names:
                    if alias.asname is None and dotted(alias.name) == name:
                        return "." * len(small.relative) + dotted(small.module)
    return None


def why_no_fix(project, scaling: Scaling, node: cst.CSTNode) -> str | None:
    """Why this scaling gets no automatic fix, or None when the resolver call can replace it."""
    unavailable = target_gap(project, project.resolver_module, RESOLVER_NAME)  # a targeted release lacks it
    if not project.has_resolver:
        return no_resolver_note(project.resolver_view)
    if scaling.spec is None or scaling.unfixable or not isinstance(node, cst.BaseExpression):
        return scaling.unfixable or f"no automatic fix for this shape: call `{RESOLVER_NAME}(spec, dcp)` by hand"
    return unavailable
