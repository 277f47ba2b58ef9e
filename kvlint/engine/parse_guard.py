"""Keep from libcst's native parser the files it cannot survive: deep nesting crashes it (a stack overflow:
SIGSEGV, 6,000 nested parentheses or a 20,000-long attribute chain) and long chains make it quadratic (8,000
subscripts: minutes; a 148 KB nested ternary: 3.4 GB). Such a file becomes one KV000 line; the rest is kept.

Two steps, so that ordinary code pays almost nothing. First a scan of the code with its strings and comments
blanked (by `re`; an f-string is kept, libcst parses its braces) and its backslash continuations joined: a
file is suspect when brackets nest more than 50 deep or a stretch of code without a comma or semicolon (a
line break ends one only outside brackets) is over 1,000 characters. Each level of a chain takes at least one
character, so a file that is not suspect holds no chain over ~1,000 links (libcst: under a second, under
100 MB each). Only a suspect file (in vLLM 0.29.0: 2 of 2,313) is parsed with Python's own parser, whose
limits are checked (200 nested brackets is its syntax error, an exhausted stack its MemoryError or
RecursionError, never a crash), and its syntax tree measured: deeper than 300 (vLLM's deepest file: 29) is
refused. What is left: a file of many chains under these limits parses in time linear in its size, but up
to ~50 times slower than ordinary code (a 10 MiB file of them: many minutes).

Chains of operators libcst's native parser descends into one level at a time — unary `-`/`+`/`~`/`not`,
`**`, `lambda: lambda: …`, `a if b else …` — cost it memory growing with the square of a chain's length
(990 unary minus signs: 55 MB, a line of 1 KB; a 100 KB file of such lines: 5.6 GB), whatever their
brackets. The cheap scan estimates the sum of the squares of such chains (runs of unary operators, of `**`,
of `lambda`) and a file over a tenth of the budget is measured: a syntax tree whose chains' squares sum
past CHAIN_BUDGET (about 200 MB in libcst) is refused. A file that still needs more memory than a worker
may take is the pool's to stop (kvlint.scan.jobs).
"""

from __future__ import annotations

import ast
import re

MAX_BRACKETS = 50  # bracket nesting before the file is measured (vLLM 0.29.0: at most 9)
MAX_RUN = 1_000  # characters of code without a comma or semicolon before the file is measured
MAX_DEPTH = 300  # syntax-tree depth libcst is given (vLLM 0.29.0: at most 29)
# Σ (chain length)² over the operator chains libcst parses recursively; 1,000,000 costs it ~55–200 MB
# (vLLM 0.29.0's largest: a few dozen).
CHAIN_BUDGET = 1_000_000

# Strings (triple-quoted first) and comments, leftmost first as Python's tokenizer reads them; an
# unterminated one runs to the end of its line (or of the file, for a triple-quoted one).
# The lookahead first: most positions start no string or comment, and one class test rejects them.
_NOT_CODE = re.compile(
    r'(?=[rRbBuUfF"\'#])(?<!\w)(?P<prefix>[rRbBuUfF]{0,2})(?:"""[\s\S]*?(?:"""|\Z)|\'\'\'[\s\S]*?(?:\'\'\'|\Z)'
    r'|"(?:[^"\\\n]|\\[\s\S])*"?|\'(?:[^\'\\\n]|\\[\s\S])*\'?)|#[^\n]*'
)
_MARKS = re.compile(r"[()\[\]{},;\n]")
# Runs of chained operators, each pattern led by a literal or a class (fast to find), each repetition
# consuming a character its neighbour cannot (never quadratic), and what one link of each is. A run may
# cross a line break (inside brackets a chain does): it over-counts, at worst making a file suspect.
_CHAIN_RUNS = (
    (re.compile(r"[-+~](?:\s*[-+~])+"), re.compile(r"[-+~]")),
    (re.compile(r"not\s+not\b(?:\s+not\b)*"), re.compile(r"not")),
    (re.compile(r"\*\*(?:[^*;,()\[\]{}]*\*\*)+"), re.compile(r"\*\*")),
    (re.compile(r"lambda\b[^:]{0,100}:\s*lambda\b(?:[^:]{0,100}:\s*lambda\b)*"), re.compile(r"lambda")),
)
_CHAIN_NODES = (ast.UnaryOp, ast.Lambda, ast.IfExp, ast.Await)


class TooNested(Exception):
    """The file is beyond what libcst can parse safely; the message is the one-line cause."""


def check_parsable(text: str) -> None:
    """Raise TooNested, or SyntaxError (as Python's parser reports it), for a file libcst must not parse."""
    if not _suspect(text):
        return
    try:
        tree = ast.parse(text)
    except SyntaxError as error:
        if "too many nested" in str(error.msg):
            raise TooNested(f"nested too deeply to parse (Python's parser: {error.msg})") from None
        raise
    except (MemoryError, RecursionError):
        raise TooNested("nested too deeply to parse (Python's parser ran out of stack)") from None
    depth, chains, longest = _measure(tree, MAX_DEPTH)
    if depth:
        raise TooNested(f"nested too deeply to parse safely (a syntax tree over {MAX_DEPTH} levels deep)")
    if chains > CHAIN_BUDGET:
        raise TooNested(
            f"operator chains too long to parse safely (unary, `**`, `lambda` or `if`-`else` chains whose "
            f"squared lengths sum to {chains:,}, over {CHAIN_BUDGET:,}; the longest: {longest}): libcst's parser "
            "needs memory growing with the square of a chain's length"
        )


def code_is_ascii(text: str) -> bool:
    """Whether the file's code, its strings and comments aside, is ASCII (an f-string counts as code)."""
    return text.isascii() or _NOT_CODE.sub(_blank, text).isascii()


def _suspect(text: str) -> bool:
    """Whether `text` may nest deeper than MAX_DEPTH or hold operator chains over CHAIN_BUDGET: cheap, and
    false only for a file that cannot."""
    code = _NOT_CODE.sub(_blank, text).replace("\\\n", "")
    return _nests_deep(code) or _chains_long(code)


def _chains_long(code: str) -> bool:
    """Whether the runs of chained operators in `code` may sum past CHAIN_BUDGET (an estimate: a `**` run
    with unary operands is a chain twice its length, hence the margin)."""
    total = 0
    for runs, link in _CHAIN_RUNS:
        for run in runs.finditer(code):
            length = len(link.findall(run.group()))
            total += length * length
            if total * 10 > CHAIN_BUDGET:
                return True
    return False


def _nests_deep(code: str) -> bool:
    depth = start = 0
    for mark in _MARKS.finditer(code):
        character = mark.group()
        if character in "([{":
            depth += 1
            if depth > MAX_BRACKETS:
                return True
            continue
        if character in ")]}":
            depth -= depth > 0
            continue
        if character == "\n" and depth:
            continue  # inside brackets a line break ends nothing
        if mark.start() - start > MAX_RUN:
            return True
        start = mark.end()
    return len(code) - start > MAX_RUN


def _blank(match: re.Match) -> str:
    """A string or comment as one character (it nests nothing), its line breaks kept; an f-string stays as it
    is: libcst parses the code in its braces."""
    if "f" in (match.group("prefix") or "").lower():
        return match.group()
    return "s" + "\n" * match.group().count("\n")


def _measure(tree: ast.AST, limit: int) -> tuple[bool, int, int]:
    """(whether some node of `tree` lies more than `limit` levels below it, Σ (chain length)² of its operator
    chains, the longest chain), walked without recursion and stopped at the first node past `limit`."""
    pending: list[tuple[ast.AST, int, int]] = [(tree, 0, 0)]
    chains = longest = 0
    while pending:
        node, depth, run = pending.pop()
        if depth > limit:
            return True, chains, longest
        if run:
            chains += 2 * run - 1  # a chain of L links adds 1 + 3 + … + (2L − 1) = L²
            longest = max(longest, run)
        for child in ast.iter_child_nodes(node):
            link = _is_chain_link(child)
            pending.append((child, depth + 1, run + 1 if link else 0))
    return False, chains, longest


def _is_chain_link(node: ast.AST) -> bool:
    return isinstance(node, _CHAIN_NODES) or isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow)
