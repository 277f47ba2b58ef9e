"""Apply fixes to one file: text edits, needed imports, re-parse, and an atomic write that loses nothing."""

from __future__ import annotations

import ast
import os
import re
import stat
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import libcst as cst
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor, RemoveImportsVisitor

from kvlint.errors import FixError
from kvlint.types import Applicability, Finding, TextEdit

LINE_LIMIT = 88
TEMP_SUFFIX = ".kvlint-tmp"
# A live run holds its temp file for the time of one write, fsync and rename; one this old was left by a
# killed run. Age, not a pid, decides: a run in another container or on another NFS client has pids we can't see.
STALE_TEMP_AGE_S = 600


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
    try:
        module = cst.parse_module(text)
    except cst.ParserSyntaxError as error:
        raise FixError(f"the fixed source does not parse ({error.message}); left unchanged") from None
    context = CodemodContext()
    for module_name, name in sorted(adds):
        AddImportsVisitor.add_needed_import(context, module_name, name)
    for module_name, name in sorted(removes):
        RemoveImportsVisitor.remove_unused_import(context, module_name, name)
    module = AddImportsVisitor(context).transform_module(module)
    if removes:
        module = RemoveImportsVisitor(context).transform_module(module)
    code = module.code
    for module_name in sorted({m for m, _ in adds}):
        code = _wrap_long_import(code, module_name, module.default_newline)
    return code


def _wrap_long_import(code: str, module_name: str, newline: str) -> str:
    """A merged `from m import a, b` longer than the line limit becomes the parenthesised form black writes."""
    pattern = re.compile(rf"^(?P<indent>[ \t]*)from {re.escape(module_name)} import (?P<names>[\w, ]+?)[ \t]*$", re.MULTILINE)

    def wrap(match: re.Match) -> str:
        if len(match.group(0)) <= LINE_LIMIT:
            return match.group(0)
        indent = match.group("indent")
        names = [n.strip() for n in match.group("names").split(",") if n.strip()]
        body = "".join(f"{indent}    {name},{newline}" for name in names)
        return f"{indent}from {module_name} import ({newline}{body}{indent})"

    return pattern.sub(wrap, code)


def check_compiles(text: str, path: str) -> None:
    try:
        compile(ast.parse(text, filename=path), path, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as error:
        raise FixError(f"the fixed source does not compile ({error}); left unchanged") from None


def write_atomically(path: Path, original: bytes, new: bytes) -> None:
    """Replace `path` with `new` only if it still holds `original`; temp file in the same folder, then rename."""
    folder = path.parent
    try:
        mode = path.stat().st_mode & 0o7777
    except OSError as error:
        raise FixError(f"cannot stat: {error.strerror}") from None
    try:
        handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TEMP_SUFFIX, dir=folder)
    except OSError as error:
        raise FixError(f"cannot write in {folder}: {error.strerror}; left unchanged") from None
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(new)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temporary, mode)
        try:
            current = path.read_bytes()
        except OSError as error:
            raise FixError(f"cannot re-read before writing: {error.strerror}; left unchanged") from None
        if current != original:
            raise FixError("changed on disk since kvlint read it; left unchanged")
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise
    remove_stale_temporaries(path)


def remove_stale_temporaries(path: Path) -> None:
    """Delete `path`'s own temp files (`.<name>.<mkstemp chars>.kvlint-tmp`) that a SIGKILLed run left behind.

    Only regular files of exactly that shape, older than STALE_TEMP_AGE_S; best effort, never fails a fix.
    """
    shape = re.compile(rf"\.{re.escape(path.name)}\.[a-z0-9_]+{re.escape(TEMP_SUFFIX)}")
    now = time.time()
    try:
        with os.scandir(path.parent) as listing:
            entries = [e for e in listing if shape.fullmatch(e.name)]
    except OSError:
        return
    for entry in entries:
        try:
            info = entry.stat(follow_symlinks=False)
            if stat.S_ISREG(info.st_mode) and now - info.st_mtime > STALE_TEMP_AGE_S:
                os.unlink(entry.path)
        except OSError:
            pass


def encode_like(text: str, encoding: str) -> bytes:
    """Encode back exactly as read: same codec, BOM kept (utf-8-sig writes it)."""
    return text.encode(encoding)
