"""Add an import the way the file's own import block would hold it: as ruff's isort sorts it, wrapped as
the file wraps its imports.

`from m import name` goes
- into an existing top-level `from m import …`: the names sorted as isort sorts them (constants, classes,
  then the rest, case-insensitively), kept on one line when the statement was on one line and still fits
  the file's line length, else parenthesised with one name per line and a trailing comma (what ruff format
  and isort write, and keep);
- else into the import block that holds the same top-level package, before the first `from` import that
  sorts after it (isort's order within a section: plain imports first, then `from` imports by module,
  case-insensitively with numbers compared as numbers);
- else into a block of its own, after the other blocks and before the relative imports (a first-party
  section: kvlint adds only the scanned tree's own modules).

Returns None when the file's imports have a shape this does not rewrite (a comment inside the statement to
merge into, no top-level import block, a star import): the caller then uses libcst's AddImportsVisitor.
"""

from __future__ import annotations

import re

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

# Line lengths projects use; the file's longest plain code line picks the smallest that holds it.
LINE_LENGTHS = (79, 88, 100, 120)
_DIGITS = re.compile(r"(\d+)")
# A line and its end as libcst counts lines: \r\n, \r or \n, nothing else (not str.splitlines' \f or \x1c).
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def natural_key(text: str) -> tuple:
    """isort's "natural" order, case-insensitive first: `a2` before `a10`."""
    parts = _DIGITS.split(text)
    return (
        tuple(int(p) if i % 2 else p.lower() for i, p in enumerate(parts)),
        tuple(int(p) if i % 2 else p for i, p in enumerate(parts)),
    )


def member_key(name: str) -> tuple:
    """isort's order of the names in one `from` import (order-by-type): CONSTANTS, Classes, then the rest."""
    if len(name) > 1 and name.upper() == name and name.lower() != name:
        kind = 0
    elif name[:1].isupper():
        kind = 1
    else:
        kind = 2
    return (kind, natural_key(name))


def line_length(text: str) -> int:
    """The line length the file is formatted to: the smallest usual one that holds its longest line of
    plain code (no string, no comment: a formatter cannot shorten those)."""
    longest = max(
        (len(line) for line in text.splitlines() if not any(c in line for c in "#'\"")),
        default=0,
    )
    return next((limit for limit in LINE_LENGTHS if limit >= longest), longest)


def render_from_import(
    module: str, names: list[str], vertical: bool, limit: int, newline: str, indent: str = "    "
) -> str:
    single = f"from {module} import {', '.join(names)}"
    if not vertical and len(single) <= limit:
        return single
    # the file's own indentation unit: a tab-indented file gets no line of spaces
    body = "".join(f"{indent}{name},{newline}" for name in names)
    return f"from {module} import ({newline}{body})"


def add_from_import(text: str, module_name: str, name: str) -> str | None:
    """`text` with `from module_name import name` placed as the module docstring says; None: not handled."""
    try:
        module = cst.parse_module(text)
    except cst.ParserSyntaxError:
        return None
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    positions = wrapper.resolve(PositionProvider)
    lines = _LINE.findall(text)
    newline = module.default_newline
    limit = line_length(text)
    same_module = [
        s for s in module.body if isinstance(s, cst.SimpleStatementLine) and _from_import(s) == (module_name, 0)
    ]
    if any(isinstance(s.body[0].names, cst.ImportStar) for s in same_module):
        return None
    if any(name in _names(module, s) for s in same_module):
        return text
    if same_module:
        statement = same_module[0]
        code = module.code_for_node(statement.with_changes(leading_lines=())).strip()
        if "#" in code:
            return None
        ordered = sorted([*_names(module, statement), name], key=lambda n: member_key(n.split(" as ")[0]))
        # Parenthesised one name a line stays so (its trailing comma keeps it so under ruff format and isort).
        vertical = "\n" in code or "\r" in code
        rendered = render_from_import(module_name, ordered, vertical, limit, newline, module.default_indent)
        where = positions[statement]
        return _replace_lines(lines, where.start.line, where.end.line, rendered + newline)
    prefix = _import_prefix(module)
    if not prefix:
        return None
    statement_line = render_from_import(module_name, [name], False, limit, newline, module.default_indent) + newline
    return _insert(lines, prefix, module_name, statement_line, positions, newline)


def _from_import(statement: cst.SimpleStatementLine) -> tuple[str, int] | None:
    """(module, relative level) of a line that is one `from … import …`."""
    if len(statement.body) != 1 or not isinstance(statement.body[0], cst.ImportFrom):
        return None
    node = statement.body[0]
    dotted = cst.Module([]).code_for_node(node.module) if node.module is not None else ""
    return dotted, len(node.relative)


def _names(module: cst.Module, statement: cst.SimpleStatementLine) -> list[str]:
    return [_alias_text(module, alias) for alias in statement.body[0].names]


def _alias_text(module: cst.Module, alias: cst.ImportAlias) -> str:
    text = module.code_for_node(alias.name)
    if alias.asname is not None:
        text += f" as {module.code_for_node(alias.asname.name)}"
    return text


def _is_import_line(statement: cst.CSTNode) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and all(
        isinstance(s, (cst.Import, cst.ImportFrom)) for s in statement.body
    )


def _import_prefix(module: cst.Module) -> list[cst.SimpleStatementLine]:
    """The import lines the module starts with (after its docstring), split nowhere yet."""
    body = list(module.body)
    start = 1 if body and _is_docstring(body[0]) else 0
    prefix = []
    for statement in body[start:]:
        if not _is_import_line(statement):
            break
        prefix.append(statement)
    return prefix


def _is_docstring(statement: cst.CSTNode) -> bool:
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], cst.Expr)
        and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def _blocks(prefix: list[cst.SimpleStatementLine]) -> list[list[cst.SimpleStatementLine]]:
    """The import lines in blocks, as blank lines separate isort's sections."""
    blocks: list[list[cst.SimpleStatementLine]] = []
    for statement in prefix:
        if not blocks or any(line.comment is None for line in statement.leading_lines):
            blocks.append([])
        blocks[-1].append(statement)
    return blocks


def _top_package(statement: cst.SimpleStatementLine) -> str | None:
    found = _from_import(statement)
    if found is not None:
        return found[0].split(".")[0] if found[1] == 0 else None
    node = statement.body[0]
    return module_top(cst.Module([]).code_for_node(node.names[0].name)) if isinstance(node, cst.Import) else None


def module_top(dotted: str) -> str:
    return dotted.split(".")[0]


def _insert(lines, prefix, module_name: str, statement_line: str, positions, newline: str) -> str:
    blocks = _blocks(prefix)
    package = module_top(module_name)
    same = next((b for b in blocks if any(_top_package(s) == package for s in b)), None)
    if same is not None:
        key = natural_key(module_name)
        for statement in same:
            found = _from_import(statement)
            if found is None:
                continue  # plain imports come first in a section
            if found[1] > 0 or natural_key(found[0]) > key:
                return _insert_before(lines, statement, positions, statement_line)
        return _insert_after(lines, same[-1], positions, statement_line, newline)
    relative = next((b for b in blocks if all(_top_package(s) is None and _from_import(s) for s in b)), None)
    if relative is not None and relative is not blocks[0]:
        return _insert_before(lines, relative[0], positions, statement_line + newline)
    return _insert_after(lines, blocks[-1][-1], positions, newline + statement_line, newline)


def _attached_comments(statement: cst.SimpleStatementLine) -> int:
    """How many comment lines right above the statement belong to it (after its last blank line)."""
    count = 0
    for line in reversed(statement.leading_lines):
        if line.comment is None:
            break
        count += 1
    return count


def _insert_before(lines, statement, positions, new: str) -> str:
    index = positions[statement].start.line - 1 - _attached_comments(statement)
    return "".join([*lines[:index], new, *lines[index:]])


def _insert_after(lines, statement, positions, new: str, newline: str) -> str:
    index = positions[statement].end.line
    ending = "" if lines[index - 1].endswith(("\n", "\r")) else newline  # the file's last line had no newline
    return "".join([*lines[:index], ending, new, *lines[index:]])


def _replace_lines(lines, first: int, last: int, new: str) -> str:
    return "".join([*lines[: first - 1], new, *lines[last:]])
