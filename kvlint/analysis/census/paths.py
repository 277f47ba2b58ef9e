"""The grouping paths of a tree: where its grouping code builds a `UniformTypeKVCacheSpecs` container, for
which of a model's layers, and under which setting.

Read from the code's shape, not from function names: every `UniformTypeKVCacheSpecs.from_specs(specs)` call
under vllm/v1/core (0.34: kv_cache_planning.py; earlier kv_cache_utils.py) is a path. Its function
- is gated on the layout when it tests `is_block_outermost` (the packed path: it returns early otherwise);
- builds one container per uniform-type bucket when it buckets with `is_uniform_type` (the packed path's
  buckets), else one container of every layer it is handed, when they share a type (the single container);
- sees only some layers when `specs` was filtered (`{k: v … if isinstance(v, C)}` keeps C, a caller's
  `… if not isinstance(v, C)}` drops C: hidden-state layers never reach the packed path).
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections import Counter
from dataclasses import dataclass

from kvlint.analysis.census.budget import Budget
from kvlint.analysis.census.guards import Guards, ModuleGuards, filled_only, functions_of
from kvlint.analysis.census.parsing import parsed as parse_module

_FUNCTION = re.compile(r"^([ \t]*)def[ \t]+(\w+)[ \t]*\(", re.MULTILINE)


@dataclass(frozen=True)
class GroupingPath:
    module: str
    function: str
    line: int  # the `from_specs` call
    layout_gated: bool  # only under a block-outermost layout
    buckets: bool  # one container per uniform-type bucket (else one of all the layers handed in)
    only: frozenset[str]  # the spec classes the path is handed (empty: every class)
    excluded: frozenset[str]  # spec classes filtered out before the path
    # The path returns early unless the model has layers of each of these classes (`if not any(isinstance(…))`).
    requires: frozenset[str] = frozenset()
    # What else its code decides (kvlint.analysis.census.guards): classes it refuses, whether its container
    # ends the grouping, whether it needs mixed page sizes, the failure it runs after, what it promotes.
    guards: Guards = Guards()

    @property
    def name(self) -> str:
        return f"{self.module}:{self.function}"


def read_grouping_paths(
    texts: dict[str, bytes],
    container_class: str,
    budget: Budget | None = None,
    spec_classes: frozenset[str] = frozenset(),
) -> tuple[GroupingPath, ...]:
    call = f"{container_class}.from_specs("
    paths = []
    for relative, data in sorted(texts.items()):
        if not relative.startswith("vllm/v1/core/") or call.encode() not in data:
            continue
        text = data.decode("utf-8", "replace")
        if budget is not None:
            budget.spend(len(text), relative)
        lines = _Lines(text)
        functions = _functions(lines)
        tree = parse_module(text, relative)
        parsed = functions_of(tree) if tree is not None else {}
        guarded = ModuleGuards(tree, spec_classes) if tree is not None else None
        # Read once per function, argument and caller, not per call: a module of 2,000 calls was read 2,000 times.
        owners, callers = _Owners(functions), _Callers(lines, functions)
        bodies: dict[int, str] = {}
        readings: dict[tuple[int, str], tuple | None] = {}
        for match in re.finditer(re.escape(call) + r"[ \t]*(\w+)", text):
            line = lines.number(match.start())
            # A one-line function's body is on its def line (`def f(s): return C.from_specs(s)`).
            owner = owners.at(line)
            if owner is None:
                continue
            name, first, last = owner
            if first not in bodies:
                bodies[first] = "\n".join(lines.lines[first - 1 : last])
            body, argument = bodies[first], match.group(1)
            if budget is not None:
                budget.spend(len(body), relative)
            if (first, argument) not in readings:
                readings[first, argument] = _reading(body, argument, name, parsed, callers)
            reading = readings[first, argument]
            if reading is None:
                continue  # re-splits a container another path built: no composition of its own
            guards = guarded.of(parsed[name], line) if guarded is not None and name in parsed else Guards()
            paths.append(GroupingPath(relative, name, line, *reading, guards))
    return tuple(paths)


def _reading(body: str, argument: str, name: str, parsed: dict, callers: _Callers) -> tuple | None:
    """What a `from_specs(argument)` call in the function `name` (its text `body`) reads of its code but its
    guards: GroupingPath's fields from `layout_gated` to `requires`; None for no path of its own."""
    if any(".kv_cache_specs[" in value for value in _assigned(body, argument)):
        return None
    return (
        "is_block_outermost" in body,
        "is_uniform_type(" in body,
        _filtered(body, argument, keep=True)
        | _filled(body, argument)
        | (filled_only(parsed[name], argument) if name in parsed else frozenset()),
        callers.excluded(name) | _filtered(body, argument, keep=False),
        _required(body),
    )


class _Lines:
    """A text's lines and where each starts: line numbers found by bisection, the text split once."""

    def __init__(self, text: str):
        self.text = text
        self.lines = text.split("\n")
        self.starts = [0]
        for line in self.lines[:-1]:
            self.starts.append(self.starts[-1] + len(line) + 1)

    def number(self, offset: int) -> int:
        return bisect_right(self.starts, offset)


class _Owners:
    """The innermost function around each of a run of lines asked in order: the last def started at or before
    the line whose lines reach it. A def pushed once, dropped once: under a later def reaching as far, or once the
    lines asked have passed its end."""

    def __init__(self, functions: list[tuple[str, int, int]]):
        self._functions = functions
        self._started = 0  # the defs started so far
        self._open: list[tuple[str, int, int]] = []  # their last lines decreasing, the latest started on top

    def at(self, line: int) -> tuple[str, int, int] | None:
        while self._started < len(self._functions) and self._functions[self._started][1] <= line:
            function = self._functions[self._started]
            while self._open and self._open[-1][2] <= function[2]:
                self._open.pop()
            self._open.append(function)
            self._started += 1
        while self._open and self._open[-1][2] < line:
            self._open.pop()
        return self._open[-1] if self._open else None


def _functions(lines: _Lines) -> list[tuple[str, int, int]]:
    """(name, first line, last line) of every def, by indentation."""
    found = []
    for match in _FUNCTION.finditer(lines.text):
        first = lines.number(match.start()) - 1
        indent = len(match.group(1))
        last = first + 1
        while last < len(lines.lines):
            line = lines.lines[last]
            if line.strip() and not line.strip().startswith("#") and len(line) - len(line.lstrip()) <= indent:
                if not line.lstrip().startswith((")", "]", "}")):
                    break
            last += 1
        found.append((match.group(2), first + 1, last))
    return found


# No pattern here has two unbounded quantifiers side by side over characters both accept (each would
# backtrack over the other: a long run of spaces in a PR's module made one cubic, issue 27 item 2).
_IS_INSTANCE = re.compile(r"\bif\s+(not\s+)?isinstance\(")
_IDENTIFIER = re.compile(r"\w+")
_COMPREHENSION_LIMIT = 4000  # characters of a `{…}` read for its filter


def _assignments(body: str, name: str) -> list[int]:
    """The offsets just after each `name =` / `name: T =` in the body."""
    pattern = rf"\b{re.escape(name)}[ \t]*(?::[^=\n]{{0,200}})?=(?!=)"
    return [match.end() for match in re.finditer(pattern, body)]


def _assigned(body: str, name: str) -> list[str]:
    """What each assignment of `name` holds: its `{…}` (no nested braces) or the rest of its line."""
    values = []
    for end in _assignments(body, name):
        rest = body[end : end + _COMPREHENSION_LIMIT].lstrip(" \t")
        if rest.startswith("{"):
            close = rest.find("}", 1)
            opened = rest.find("{", 1)
            if close != -1 and (opened == -1 or opened > close):
                values.append(rest[: close + 1])
                continue
        values.append(rest.split("\n", 1)[0])
    return values


def _isinstance_classes(text: str, start: int) -> list[str] | None:
    """The class names of the `isinstance(x, C)` / `isinstance(x, (A, B))` call whose arguments start at
    `start`; None unless the second argument is a name or a tuple of names."""
    depth, end = 1, start
    while end < len(text) and depth:
        depth += {"(": 1, ")": -1}.get(text[end], 0)
        end += 1
    if depth:
        return None
    arguments = text[start : end - 1].split(",", 1)
    if len(arguments) != 2 or not _IDENTIFIER.fullmatch(arguments[0].strip()):
        return None
    second = arguments[1].strip()
    if second.startswith("(") and second.endswith(")"):
        second = second[1:-1]
    names = [part.strip() for part in second.split(",") if part.strip()]
    return names if names and all(_IDENTIFIER.fullmatch(part) for part in names) else None


def _filtered(body: str, name: str, keep: bool) -> frozenset[str]:
    """The classes of `name = {k: v for … if [not] isinstance(v, C)}` in the body."""
    found: set[str] = set()
    for value in _assigned(body, name):
        found |= _tested(value, keep)
    return frozenset(found)


def _tested(value: str, keep: bool) -> set[str]:
    """The classes an assigned `{k: v for … if [not] isinstance(v, C)}` keeps (or, `keep` false, drops)."""
    found: set[str] = set()
    if value.startswith("{"):
        for test in _IS_INSTANCE.finditer(value):
            if bool(test.group(1)) is not keep:
                found.update(_isinstance_classes(value, test.end()) or ())
    return found


# Neighbouring quantifiers here accept disjoint characters (`\s` then a word or a bracket): linear.
_ANY_OF = r"any\(\s*isinstance\(\s*\w+\s*,\s*(\w+)\s*\)"


def _required(body: str) -> frozenset[str]:
    """Classes the function returns early without: `if not any(isinstance(s, C) …): return None`, and
    `has_c = any(isinstance(s, C) …)` … `if not (has_a and has_b): return None`."""
    required = set(re.findall(r"\bif\s+not\s+" + _ANY_OF, body))
    flags = dict(re.findall(r"\b(\w+)\s*=\s*" + _ANY_OF, body))
    for names in re.findall(r"\bif[ \t]+not[ \t]+\(([\w \t]+)\)[ \t]*:[ \t]*\n[ \t]*return[ \t]+None\b", body):
        parts = [part.strip() for part in names.split(" and ")]
        if all(part in flags for part in parts):
            required |= {flags[part] for part in parts}
    return frozenset(required)


def _filled(body: str, name: str) -> frozenset[str]:
    """The classes of `if isinstance(spec, C): name[key] = spec` (or `elif`) in a loop that fills `name`. The
    test is the class test alone: `if not isinstance(…)` fills every other class, `if a or isinstance(…)` any."""
    pattern = rf"\b(?:el)?if[ \t]+isinstance\(\s*\w+\s*,\s*(\w+)\s*\)[ \t]*:[ \t]*\n[ \t]*{re.escape(name)}\["
    return frozenset(re.findall(pattern, body))


# A call handing on a filtered dict: `name(c, filtered)`, any name (its own def line is no call).
_CALL_WITH_SPECS = re.compile(r"\b(\w+)\([^,()]*,[ \t]*(\w+)[ \t]*\)")
# `_assignments`' pattern for every name at once, at each word (a lookahead: `k: k = …` holds two for `k`).
_ANY_ASSIGNMENT = re.compile(r"(?=(\b(\w+)[ \t]*(?::[^=\n]{0,200})?=(?!=)))")
_DEF_BEFORE = re.compile(r"\bdef\s+$")

Caller = tuple[str, int, int]  # (name, first line, last line) of a function


class _Callers:
    """Classes every call of a function in this module filters out of the specs it passes (`filtered_spec`): the
    module's calls found in one pass (no two can overlap: each holds one pair of brackets), by the function called;
    what a caller filtered out of an argument by each of its calls, in one pass of its assignments (`_dropped`)."""

    def __init__(self, lines: _Lines, functions: list[Caller]):
        self._lines = lines
        self._calls: dict[str, list[tuple[int, int, Caller, str]]] | None = None
        self._scopes: dict[tuple[Caller, str], list[int]] = {}  # the lines of a caller's calls handing on an argument
        self._functions = functions
        self._excluded: dict[str, frozenset[str]] = {}
        self._dropped: dict[tuple[Caller, str], dict[int, frozenset[str]]] = {}
        self._assignments: dict[str, list[tuple[int, int]]] | None = None

    def excluded(self, name: str) -> frozenset[str]:
        if name not in self._excluded:
            self._excluded[name] = self._read(name)
        return self._excluded[name]

    def _read(self, name: str) -> frozenset[str]:
        lines, excluded = self._lines, None
        for line, start, caller, argument in self._calls_of(name):
            if _after_def(lines.text, lines.starts[line - 1], start):
                continue  # the function's own def, no call
            if (caller, argument) not in self._dropped:
                self._dropped[caller, argument] = self._dropped_by(caller, argument)
            found = self._dropped[caller, argument][line]
            excluded = found if excluded is None else excluded & found
        return frozenset(excluded or ())

    def _calls_of(self, name: str) -> list[tuple[int, int, Caller, str]]:
        """(line, offset, caller, argument) of each call of `name` inside a function."""
        if self._calls is None:
            self._calls, owners = {}, _Owners(self._functions)
            for match in _CALL_WITH_SPECS.finditer(self._lines.text):
                line = self._lines.number(match.start())
                # A one-line caller's call is on its def line (`def g(c, s): return name(c, s)`).
                caller = owners.at(line)
                if caller is not None:
                    self._calls.setdefault(match.group(1), []).append((line, match.start(), caller, match.group(2)))
                    self._scopes.setdefault((caller, match.group(2)), []).append(line)
        return self._calls.get(name, [])

    def _dropped_by(self, caller: Caller, argument: str) -> dict[int, frozenset[str]]:
        """At each line of the caller's calls handing on `argument`: what `_filtered(…, keep=False)` reads in the
        caller's lines up to that line's end. One pass of its assignments of `argument`, each read once; the text was
        joined and read again up to each call before (4,000 calls in one caller: 5 s). A `{…}` that closes past the
        line's end reads as the rest of its line, as it did in the text cut there."""
        lines, text = self._lines, self._lines.text
        ends = {line: lines.starts[line - 1] + len(lines.lines[line - 1]) for line in self._scopes[caller, argument]}
        events = []  # (offset at and past which a call's text holds it, classes it adds, classes it takes back)
        for end in self._assignments_of(argument, lines.starts[caller[1] - 1], max(ends.values())):
            rest = text[end : end + _COMPREHENSION_LIMIT]
            value = rest.lstrip(" \t")
            whole = _assigned_value(value)
            first = _tested(value.split("\n", 1)[0], keep=False)
            events.append((end, first, set()))
            if whole is not None:  # held whole once the call's line ends past its `}`
                events.append((end + len(rest) - len(value) + len(whole), _tested(whole, keep=False), first))
        events.sort(key=lambda event: event[0])
        counts: Counter[str] = Counter()  # each class held, by the number of assignments that drop it
        dropped: dict[int, frozenset[str]] = {}
        found: frozenset[str] = frozenset()
        index = 0
        for line, end in sorted(ends.items(), key=lambda item: item[1]):
            changed = False
            while index < len(events) and events[index][0] <= end:
                _, added, taken = events[index]
                index += 1
                for name in taken:
                    counts[name] -= 1
                    if not counts[name]:
                        del counts[name]
                        changed = True
                for name in added:
                    changed |= name not in counts
                    counts[name] += 1
            found = frozenset(counts) if changed else found
            dropped[line] = found
        return dropped

    def _assignments_of(self, name: str, begin: int, end: int) -> list[int]:
        """The ends of `_assignments(text[begin:end], name)` (shifted by `begin`): the module's assignments found in
        one pass, those of `name` from `begin` on, each past the last one's end as a search for it goes on."""
        if self._assignments is None:
            self._assignments = {}
            for match in _ANY_ASSIGNMENT.finditer(self._lines.text):
                self._assignments.setdefault(match.group(2), []).append((match.start(), match.end(1)))
        found: list[int] = []
        every = self._assignments.get(name, [])
        for start, stop in every[bisect_left(every, (begin,)) :]:
            if start >= end:
                break
            if not found or start >= found[-1]:
                found.append(stop)
        return found


def _assigned_value(value: str) -> str | None:
    """The `{…}` (no nested braces) an assignment's value starts with, as `_assigned` reads it, or None."""
    if value.startswith("{"):
        close = value.find("}", 1)
        opened = value.find("{", 1)
        if close != -1 and (opened == -1 or opened > close):
            return value[: close + 1]
    return None


def _after_def(text: str, line_start: int, start: int) -> bool:
    """`def` before the name at `start` on its line (`_DEF_BEFORE`): the blanks before it read back once, then the
    pattern on them and the word before (read from the line's start for each call: quadratic on a line of calls)."""
    blank = start
    while blank > line_start and text[blank - 1].isspace():
        blank -= 1
    return _DEF_BEFORE.search(text[max(line_start, blank - 4) : start]) is not None
