"""The syntax a fixed file may use: that of the oldest Python its project supports.

A fix is written for the project's files, so its output must be valid on every Python the project runs on,
not only on the Python kvlint runs on. The oldest one is the project's `requires-python` lower bound
(pyproject.toml), else vLLM's and kvlint's own oldest, 3.10. `ast.parse(feature_version=…)` judges most
syntax; PEP 701's f-strings (3.12: a line break, a reused quote, a backslash or a comment inside a
replacement field) it does not judge, so on Python 3.12 and later they are looked for in the tokens.
The gate itself is kvlint.fixing.apply.check_compiles, which `fix` and `review`'s suggestions both pass.
"""

from __future__ import annotations

import ast
import functools
import io
import re
import sys
import tokenize

from kvlint.filesystem import read_regular_file

DEFAULT_OLDEST = (3, 10)  # vLLM's and kvlint's oldest Python
_LOWEST = (3, 7)  # the oldest feature_version every supported Python's ast.parse takes
# A lower bound in a version specifier: `>=3.10`, `~=3.10`, `==3.11.*`, `>3.9` (3.9.1 is above 3.9: 3.9 counts).
_LOWER_BOUND = re.compile(r"^\s*(>=|~=|==|>)\s*(\d+)\.(\d+)")


def oldest_python(pyproject: bytes | None) -> tuple[int, int]:
    """The oldest Python a pyproject.toml's `[project] requires-python` admits; DEFAULT_OLDEST when it names
    none or the file cannot be read as TOML (the configuration's own reader says why, elsewhere)."""
    if pyproject is None:
        return DEFAULT_OLDEST
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        import tomli as tomllib
    try:
        data = tomllib.loads(pyproject.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError):
        return DEFAULT_OLDEST
    project = data.get("project")
    specifier = project.get("requires-python") if isinstance(project, dict) else None
    if not isinstance(specifier, str):
        return DEFAULT_OLDEST
    bounds = [_LOWER_BOUND.match(clause) for clause in specifier.split(",")]
    found = [(int(m.group(2)), int(m.group(3))) for m in bounds if m is not None]
    return max(found) if found else DEFAULT_OLDEST


@functools.lru_cache(maxsize=8)
def oldest_python_at(pyproject_path: str | None) -> tuple[int, int]:
    """oldest_python of the file at `pyproject_path` (read once a run); DEFAULT_OLDEST when there is none."""
    if pyproject_path is None:
        return DEFAULT_OLDEST
    try:
        return oldest_python(read_regular_file(pyproject_path))
    except OSError:
        return DEFAULT_OLDEST


def judged_version(oldest: tuple[int, int] | None) -> tuple[int, int]:
    """The version the gate judges for: `oldest`, within what this Python's parser can judge."""
    running = sys.version_info[:2]
    return max(_LOWEST, min(oldest or DEFAULT_OLDEST, running))


def syntax_error(text: str, path: str, version: tuple[int, int] | None) -> str | None:
    """Why `text` is not a module Python `version` compiles (None: it is); version None: this Python's own
    judgement, without a feature version."""
    try:
        if version is None:
            tree = ast.parse(text, filename=path)
        else:
            tree = ast.parse(text, filename=path, feature_version=version)
        compile(tree, path, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as error:
        return str(error)
    if version is not None and version < (3, 12) <= sys.version_info[:2]:
        return _newer_f_string(text)
    return None


def _newer_f_string(text: str) -> str | None:
    """Where an f-string uses what only Python 3.12 reads (PEP 701), said as a reason; None if nowhere.
    Before 3.12 a replacement field could hold no backslash and no comment, none of the quotes that end an
    f-string around it, and no line break inside a single-quoted f-string."""
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))

    def offset(position: tuple[int, int]) -> int:
        row, column = position
        return starts[row - 1] + column if row - 1 < len(starts) else len(text)

    open_quotes: list[str] = []  # the closing quote of each f-string the tokens are inside, outermost first
    previous_end = (1, 0)
    start_kind, middle_kind, end_kind = (
        getattr(tokenize, name) for name in ("FSTRING_START", "FSTRING_MIDDLE", "FSTRING_END")
    )
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == end_kind and open_quotes:
                open_quotes.pop()
            # The f-strings whose replacement field holds this token: a literal part is its own f-string's text.
            around = open_quotes[:-1] if token.type == middle_kind else open_quotes
            if around:
                source = text[offset(previous_end) : offset(token.end)]  # the token and what precedes it
                line, column = token.start
                where = f"line {line}, column {column + 1}"
                if ("\\" in source and token.type != middle_kind) or "\\" in token.string:
                    return f"a backslash inside an f-string's replacement field ({where}) needs Python 3.12"
                if token.type == tokenize.COMMENT:
                    return f"a comment inside an f-string's replacement field ({where}) needs Python 3.12"
                if any(quote in token.string for quote in around):
                    return f"an f-string's own quote inside its replacement field ({where}) needs Python 3.12"
                if "\n" in source and any(len(quote) == 1 for quote in around):
                    return f"a line break inside a single-quoted f-string ({where}) needs Python 3.12"
            if token.type == start_kind:
                open_quotes.append(token.string.lstrip("rRfFbBuU"))
            previous_end = token.end
    except (tokenize.TokenError, SyntaxError):
        return None  # the compiler, which already judged the text, reads it
    return None
