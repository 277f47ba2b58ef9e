"""The guards of a grouping path, read with `ast` from the function that builds its container
(kvlint.analysis.census.paths): what makes it return early, what it promotes first, and when its caller
reaches it at all.

Each guard is read from the code's structure, never from a function's name:
- *refuses*: `if any(isinstance(spec, C) …): return None` — a model with a C layer gets no container here;
- *returns its container*: the `from_specs` call is an `if`'s test whose body returns (the whole-model path:
  when it builds a container, no later path runs);
- *page-size gate*: `if … len(page_sizes) <= 1: return None` where `page_sizes` holds the layers'
  `page_size_bytes` — the path runs only with mixed page sizes;
- *after a failure*: a caller calls the function in an `except E:` handler — the path runs only after the
  `try` body's call raised E;
- *promotions*: a `{A: B, …}` of spec classes in the function or a function of its module it calls — the
  kinds it turns one spec class into before building (sliding window → full); a call made only under an `if`
  (`if vllm_config.scheduler_config.disable_hybrid_kv_cache_manager:`) promotes only under that setting,
  whose test is kept (`promoted_when`).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, replace

from kvlint.analysis.ast_helpers import walk

Function = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass(frozen=True)
class Guards:
    refuses: frozenset[str] = frozenset()
    returns_container: bool = False
    page_gated: bool = False
    after_failure: str = ""  # "unify_kv_cache_spec_page_size raises NotImplementedError", or ""
    promotions: tuple[tuple[str, str], ...] = ()  # (from, to), in the code's order
    # The test of the `if` the promoting call sits under ("" when every run promotes): a setting, not the
    # default, so the path's default reading promotes nothing.
    promoted_when: str = ""


def functions_of(tree: ast.Module) -> dict[str, Function]:
    """Every function of a module by name (the first definition), nested ones too."""
    found: dict[str, Function] = {}
    for node in walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.setdefault(node.name, node)
    return found


class ModuleGuards:
    """The guards of one module's grouping paths, each part read once: the module's functions, the failure whose
    handler calls each function, each function's own guards and the lines of its tests an `if` returns under (a
    crafted module of 2,000 `from_specs` calls read its tree once per call: 100 s)."""

    def __init__(self, tree: ast.Module, spec_classes: frozenset[str]):
        self._tree, self._spec_classes = tree, spec_classes
        self._functions = functions_of(tree)
        self._failures: dict[str, str] | None = None
        self._read: dict[int, tuple[Guards, frozenset[int]]] = {}
        self._promotions: dict[int, tuple[bool, tuple[tuple[str, str], ...]]] = {}

    def of(self, function: Function, line: int) -> Guards:
        """The guards of the `from_specs` call on `line` of `function`."""
        if id(function) not in self._read:
            promotions, promoter = _promotions(function, self._functions, self._spec_classes, self._promotions)
            guards = Guards(
                _refuses(function),
                False,
                _page_gated(function),
                self._after_failure(function.name),
                promotions,
                _condition_of_call(function, promoter) if promoter != function.name else "",
            )
            self._read[id(function)] = (guards, _container_lines(function))
        guards, lines = self._read[id(function)]
        return replace(guards, returns_container=True) if line in lines else guards

    def _after_failure(self, name: str) -> str:
        """The first `try` (in a walk of the tree) one of whose handlers calls `name`: "<its body's first call>
        raises <the handler's exception>"; every handler's calls indexed in one walk."""
        if self._failures is None:
            self._failures = {}
            for node in walk(self._tree):
                if not isinstance(node, ast.Try):
                    continue
                tried = [called for statement in node.body for called in _called(statement)]
                for handler in node.handlers:
                    raised = ast.unparse(handler.type) if handler.type is not None else "an exception"
                    for called in _called(handler):
                        self._failures.setdefault(called, f"{tried[0] if tried else 'its try block'} raises {raised}")
        return self._failures.get(name, "")


def read_guards(tree: ast.Module, function: Function, line: int, spec_classes: frozenset[str]) -> Guards:
    return ModuleGuards(tree, spec_classes).of(function, line)


def _returns_none(body: list[ast.stmt]) -> bool:
    return any(
        isinstance(s, ast.Return) and (s.value is None or (isinstance(s.value, ast.Constant) and s.value.value is None))
        for s in body
    )


def _isinstance_names(node: ast.expr) -> list[str]:
    """The classes of `any(isinstance(x, C) for …)` / `any(isinstance(x, (A, B)) for …)`; [] otherwise."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "any" and node.args):
        return []
    inner = node.args[0]
    element = inner.elt if isinstance(inner, (ast.GeneratorExp, ast.ListComp)) else None
    if not (
        isinstance(element, ast.Call)
        and isinstance(element.func, ast.Name)
        and element.func.id == "isinstance"
        and len(element.args) == 2
    ):
        return []
    second = element.args[1]
    names = second.elts if isinstance(second, ast.Tuple) else [second]
    return [n.id for n in names if isinstance(n, ast.Name)]


def _top_ifs(function: Function) -> list[ast.If]:
    return [s for s in function.body if isinstance(s, ast.If)]


def _refuses(function: Function) -> frozenset[str]:
    refused: set[str] = set()
    for statement in _top_ifs(function):
        if _returns_none(statement.body):
            refused.update(_isinstance_names(statement.test))
    return frozenset(refused)


def _container_lines(function: Function) -> frozenset[int]:
    """The lines of the tests of the `if`s whose body returns: a `from_specs` call on one returns its container."""
    return frozenset(
        inner.lineno
        for node in walk(function)
        if isinstance(node, ast.If) and any(isinstance(s, ast.Return) for s in node.body)
        for inner in walk(node.test)
        if getattr(inner, "lineno", None) is not None
    )


def _page_size_sets(function: Function) -> set[str]:
    """Names assigned a comprehension over the layers' `page_size_bytes`."""
    names = set()
    for node in walk(function):
        if isinstance(node, ast.Assign) and isinstance(node.value, (ast.SetComp, ast.ListComp)):
            element = node.value.elt
            if isinstance(element, ast.Attribute) and element.attr == "page_size_bytes":
                names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def _page_gated(function: Function) -> bool:
    sets = _page_size_sets(function)
    for statement in _top_ifs(function):
        if not _returns_none(statement.body):
            continue
        for node in walk(statement.test):
            if (
                isinstance(node, ast.Compare)
                and isinstance(node.left, ast.Call)
                and isinstance(node.left.func, ast.Name)
                and node.left.func.id == "len"
                and node.left.args
                and isinstance(node.left.args[0], ast.Name)
                and node.left.args[0].id in sets
                and isinstance(node.ops[0], ast.LtE)
                and isinstance(node.comparators[0], ast.Constant)
                and node.comparators[0].value == 1
            ):
                return True
    return False


def _called(node: ast.AST) -> list[str]:
    return [
        n.func.id if isinstance(n.func, ast.Name) else n.func.attr
        for n in walk(node)
        if isinstance(n, ast.Call) and isinstance(n.func, (ast.Name, ast.Attribute))
    ]


def _condition_of_call(function: Function, name: str) -> str:
    """The test of the `if` under which `function` calls `name` (its source; `not (…)` in its `else`), or ""
    when a call is made outside any `if`: then the call's effect is every run's. One pass, each node once
    (an `elif` chain a pull request writes costs its length, not its square)."""
    tests: list[tuple[int, str]] = []
    pending: list[tuple[ast.AST, str]] = [(child, "") for child in ast.iter_child_nodes(function)]
    while pending:
        node, test = pending.pop()
        if isinstance(node, ast.Call) and _callee(node) == name:
            if not test:
                return ""
            tests.append((node.lineno, test))
        if isinstance(node, ast.If):
            condition = ast.unparse(node.test)
            pending.append((node.test, test))
            pending += [(statement, condition) for statement in node.body]
            pending += [(statement, f"not ({condition})") for statement in node.orelse]
        else:
            pending += [(child, test) for child in ast.iter_child_nodes(node)]
    return min(tests)[1] if tests else ""


def _callee(call: ast.Call) -> str | None:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def _promotions(function: Function, functions: dict[str, Function], spec_classes: frozenset[str], read: dict):
    """(pairs, the function they are in): the spec-class mapping in the function or in a function of its module
    that it calls (one level): a `{A: B, …}` of spec classes, or `if isinstance(spec, A): specs[name] = B(…)`
    branches. `read`: each function's own mapping, by id (a function many paths call is walked once)."""
    reached = [function] + [functions[n] for n in dict.fromkeys(_called(function)) if n in functions]
    for candidate in reached:
        if id(candidate) not in read:
            read[id(candidate)] = _own_promotions(candidate, spec_classes)
        if read[id(candidate)]:
            return read[id(candidate)], candidate.name
    return (), function.name


def _own_promotions(function: Function, spec_classes: frozenset[str]) -> tuple[tuple[str, str], ...]:
    """The function's own mapping: a `{A: B, …}` of spec classes (the first in a walk), else its branches' pairs."""
    pairs: list[tuple[str, str]] = []
    for node in walk(function):
        if isinstance(node, ast.Dict) and node.keys and all(isinstance(k, ast.Name) for k in node.keys):
            found = [(k.id, v.id) for k, v in zip(node.keys, node.values) if isinstance(v, ast.Name)]  # type: ignore[union-attr]
            if len(found) == len(node.keys) and all(a in spec_classes and b in spec_classes for a, b in found):
                return tuple(found)
        if isinstance(node, ast.If) and (tested := _isinstance_test(node.test)) in spec_classes:
            for statement in node.body:
                built = _assigned_spec(statement)
                if built in spec_classes and built != tested:
                    pairs.append((tested, built))  # type: ignore[arg-type]
    return tuple(pairs)


def _isinstance_test(test: ast.expr) -> str | None:
    if (
        isinstance(test, ast.Call)
        and isinstance(test.func, ast.Name)
        and test.func.id == "isinstance"
        and len(test.args) == 2
        and isinstance(test.args[1], ast.Name)
    ):
        return test.args[1].id
    return None


def _assigned_spec(statement: ast.stmt) -> str | None:
    """`specs[name] = B(…)`: B."""
    if (
        isinstance(statement, ast.Assign)
        and isinstance(statement.targets[0], ast.Subscript)
        and isinstance(statement.value, ast.Call)
        and isinstance(statement.value.func, ast.Name)
    ):
        return statement.value.func.id
    return None


def filled_only(function: Function, argument: str) -> frozenset[str]:
    """The classes a `for argument in D.values()` loop sees, when D is filled only under
    `if isinstance(spec, C): D[…][name] = spec` (layers grouped by a key first)."""
    for node in walk(function):
        if (
            isinstance(node, ast.For)
            and isinstance(node.target, ast.Name)
            and node.target.id == argument
            and isinstance(node.iter, ast.Call)
            and isinstance(node.iter.func, ast.Attribute)
            and node.iter.func.attr == "values"
            and isinstance(node.iter.func.value, ast.Name)
        ):
            source = node.iter.func.value.id
            return frozenset(
                tested
                for branch in walk(function)
                if isinstance(branch, ast.If) and (tested := _isinstance_test(branch.test)) is not None
                if any(_fills(statement, source) for statement in branch.body)
            )
    return frozenset()


def _fills(statement: ast.stmt, name: str) -> bool:
    if not isinstance(statement, ast.Assign) or not isinstance(statement.targets[0], ast.Subscript):
        return False
    target: ast.expr = statement.targets[0]
    while isinstance(target, ast.Subscript):
        target = target.value
    return isinstance(target, ast.Name) and target.id == name
