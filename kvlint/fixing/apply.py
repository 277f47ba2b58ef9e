"""Apply fixes to one file's text: the chosen edits, the imports they need, and a check that it still compiles."""

from __future__ import annotations

import re
from dataclasses import dataclass

from kvlint.errors import FixError
from kvlint.types import Applicability, Finding, TextEdit

LINE_LIMIT = 88


@dataclass(frozen=True)
class FixOutcome:
    text: str
    applied: tuple[Finding, ...]


def fixable(finding: Finding, unsafe: bool) -> bool:
    fix = finding.fix
    return fix is not None and (fix.applicability is Applicability.SAFE or unsafe)


def apply_fixes(text: str, findings: list[Finding], unsafe: bool) -> FixOutcome:
    """Apply every eligible fix whose edits do not overlap an earlier one; identical edits count once."""
    chosen: list[TextEdit] = []
    applied: list[Finding] = []
    adds: set[tuple[str, str]] = set()
    removes: set[tuple[str, str]] = set()
    for finding in sorted(findings, key=lambda f: (f.fix.edits[0].start if f.fix and f.fix.edits else 0, f.code)):
        if not fixable(finding, unsafe):
            continue
        edits = finding.fix.edits
        if all(edit in chosen for edit in edits):
            applied.append(finding)  # another rule's finding already carries this very edit
            continue
        if any(_overlaps(edit, other) for edit in edits for other in chosen):
            continue  # the next run picks it up
        chosen.extend(edits)
        applied.append(finding)
        for change in finding.fix.imports:
            (adds if change.add else removes).add((change.module, change.name))
    if not chosen:
        return FixOutcome(text, ())
    new_text = text
    for edit in sorted(chosen, key=lambda e: e.start, reverse=True):
        new_text = new_text[: edit.start] + edit.replacement + new_text[edit.end :]
    new_text = _update_imports(new_text, adds, removes)
    return FixOutcome(new_text, tuple(applied))


def _overlaps(a: TextEdit, b: TextEdit) -> bool:
    return a.start < b.end and b.start < a.end


def _update_imports(text: str, adds: set[tuple[str, str]], removes: set[tuple[str, str]]) -> str:
    # libcst only when a fix is really applied: a `fix` answered from its cache never loads it
    import libcst as cst

    from kvlint.fixing.imports import add_from_import

    try:
        cst.parse_module(text)
    except cst.ParserSyntaxError as error:
        raise FixError(f"the fixed source does not parse ({error.message}); left unchanged") from None
    code = text
    # Removals first: a name that leaves `from m import A, b` makes room for the one added (kept on one line).
    if removes:
        # libcst's codemod package (and its matchers, a third of a second) only when an import must go
        from libcst.codemod import CodemodContext
        from libcst.codemod.visitors import RemoveImportsVisitor

        context = CodemodContext()
        for module_name, name in sorted(removes):
            RemoveImportsVisitor.remove_unused_import(context, module_name, name)
        code = RemoveImportsVisitor(context).transform_module(cst.parse_module(code)).code
        if not text.startswith(("\n", "\r")):
            code = code.lstrip("\r\n")  # the blank line that followed a first statement now removed
    for module_name, name in sorted(adds):
        # Sorted into its block and wrapped like the file's imports (kvlint.fixing.imports), or where libcst
        # puts it when the file's imports have a shape that module does not rewrite.
        placed = add_from_import(code, module_name, name)
        code = placed if placed is not None else _add_with_libcst(code, module_name, name)
    return code


def _add_with_libcst(code: str, module_name: str, name: str) -> str:
    # Loaded here, as in _update_imports: `review` imports this module for files with nothing to fix
    import libcst as cst
    from libcst.codemod import CodemodContext
    from libcst.codemod.visitors import AddImportsVisitor

    context = CodemodContext()
    AddImportsVisitor.add_needed_import(context, module_name, name)
    module = AddImportsVisitor(context).transform_module(cst.parse_module(code))
    return _wrap_long_import(module.code, module_name, module.default_newline, module.default_indent)


def _wrap_long_import(code: str, module_name: str, newline: str, unit: str = "    ") -> str:
    """A merged `from m import a, b` longer than the line limit becomes the parenthesised form black writes."""
    pattern = re.compile(
        rf"^(?P<indent>[ \t]*)from {re.escape(module_name)} import (?P<names>[\w, ]+?)[ \t]*$", re.MULTILINE
    )

    def wrap(match: re.Match) -> str:
        if len(match.group(0)) <= LINE_LIMIT:
            return match.group(0)
        indent = match.group("indent")
        names = [n.strip() for n in match.group("names").split(",") if n.strip()]
        body = "".join(f"{indent}{unit}{name},{newline}" for name in names)
        return f"{indent}from {module_name} import ({newline}{body}{indent})"

    return pattern.sub(wrap, code)


def check_compiles(text: str, path: str, original: str | None = None, oldest: tuple[int, int] | None = None) -> None:
    """Refuse a fixed source that is not valid Python for the oldest Python its project supports (`oldest`,
    default 3.10: kvlint.fixing.syntax_gate). When the `original` is not valid for that Python either (syntax
    newer than the project states), the running interpreter's compiler judges instead; when it cannot compile
    the `original` either (e.g. PEP 695 `type X = ...` on 3.11), libcst's parser, which reads every version
    it supports."""
    from kvlint.fixing.syntax_gate import judged_version, syntax_error

    for version in (judged_version(oldest), None):
        error = syntax_error(text, path, version)
        if error is None:
            return
        if original is None or syntax_error(original, path, version) is None:
            target = f" on Python {version[0]}.{version[1]}" if version is not None else ""
            raise FixError(f"the fixed source does not compile{target} ({error}); left unchanged")
    import libcst as cst

    try:
        cst.parse_module(text)
    except cst.ParserSyntaxError as error:
        raise FixError(f"the fixed source does not parse ({error.message}); left unchanged") from None
