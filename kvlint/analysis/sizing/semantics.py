"""Evaluate sizing predicates over spec kinds, from the scanned tree's own code (never imported).

A small abstract interpreter over stdlib `ast`: it runs a function's body with a spec *kind* bound to
its spec (a layer spec of one class of the tree's hierarchy, or a `UniformTypeKVCacheSpecs` container of
such layers), the DCP size bound to `DCP` and every block size to `BLOCK_SIZE`. It understands what the
sizing code in vLLM is made of — isinstance / `type(...) is` against the parsed hierarchy, boolean logic,
all/any over unwrapped layers, `next(iter(...))` picks, attribute defaults, properties, `__post_init__`
assignments, calls to the tree's own helpers — and answers UNKNOWN for anything else, never a guess.

`analyse_program` turns that into the plain-data `SizingAnalysis` the KV103/KV104/KV105 rules and
`kvlint paths` read: the spec kinds, one column per sizing path or predicate, and the findings.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from kvlint.analysis.ast_helpers import dotted as _dotted
from kvlint.analysis.ast_helpers import field_default as _field_default
from kvlint.analysis.hierarchy import SpecHierarchy
from kvlint.analysis.sizing.divergences import Divergence, FirstLayerPick, PathDivergence, PredicateDivergence
from kvlint.analysis.vocabulary import (
    ATTENTION_ROOT,
    CONTAINER_CLASS,
    DEFAULT_SCHEDULER_ONLY_PATHS,
    INTERFACE_MODULE,
    RESOLVER_NAME,
    SCHEDULER_REFERENCE,
    is_dcp_name,
    sees_only_scheduler_config,
)

DCP = 2
BLOCK_SIZE = 16
MAX_DEPTH = 12


# ---------------------------------------------------------------------------------------------- values


class _Unknown:
    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNKNOWN"

    def __reduce__(self):
        return (_Unknown, ())


UNKNOWN: Any = _Unknown()


@dataclass(frozen=True)
class Layer:
    """A layer-level spec: one class of the hierarchy, with attribute values its constructor sets."""

    cls: str
    overrides: tuple[tuple[str, object], ...] = ()
    role: str = ""  # e.g. "indexer", only for labels

    @property
    def label(self) -> str:
        return self.role or self.cls


@dataclass(frozen=True)
class Container:
    """A `UniformTypeKVCacheSpecs` holding these layers, in dict order."""

    layers: tuple[Layer, ...]


@dataclass(frozen=True)
class _Group:
    spec: object


@dataclass(frozen=True)
class _Groups:
    """`kv_cache_config.kv_cache_groups`: every group is of the kind under evaluation."""

    spec: object


@dataclass(frozen=True)
class _LayerDict:
    layers: tuple[Layer, ...]


@dataclass(frozen=True)
class _Seq:
    items: tuple


@dataclass(frozen=True)
class _Iter:
    items: tuple


@dataclass(frozen=True)
class _ClassRef:
    names: frozenset[str]


@dataclass(frozen=True)
class _Opaque:
    """An unknown object whose attributes we still follow by name (`vllm_config.parallel_config`)."""

    name: str


@dataclass(frozen=True)
class _Function:
    name: str


@dataclass(frozen=True)
class _Bound:
    receiver: object
    method: str


def truth(value) -> bool | None:
    if value is UNKNOWN or isinstance(value, (_Opaque, _Function, _Bound)):
        return None
    if isinstance(value, (bool, int, float, str)) or value is None:
        return bool(value)
    if isinstance(value, (_Seq, _LayerDict)):
        return bool(value.items if isinstance(value, _Seq) else value.layers)
    if isinstance(value, tuple):
        return bool(value)
    if isinstance(value, (Layer, Container, _Group, _Groups, _ClassRef)):
        return True
    return None


def _join(values: list):
    if not values:
        return UNKNOWN
    first = values[0]
    return first if all(_same(first, v) for v in values[1:]) else UNKNOWN


def _same(a, b) -> bool:
    if a is UNKNOWN or b is UNKNOWN:
        return False
    try:
        return type(a) is type(b) and a == b
    except Exception:  # noqa: BLE001 - odd values compare unequal
        return False


def _known_number(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# ---------------------------------------------------------------------------------------------- program


@dataclass
class Module:
    path: str  # relative to the tree root, "/"-separated
    tree: ast.Module
    text: str
    dcp_aliases: frozenset[str] = frozenset()
    functions: dict[str, ast.FunctionDef] = field(default_factory=dict)  # module level, by name
    _lines: list[str] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        for node in self.tree.body:
            if isinstance(node, ast.FunctionDef):
                self.functions[node.name] = node

    def segment(self, node: ast.AST) -> str:
        if self._lines is None:
            self._lines = self.text.splitlines()
        return "\n".join(self._lines[node.lineno - 1 : node.end_lineno])

    @property
    def dotted(self) -> str:
        name = self.path[:-3] if self.path.endswith(".py") else self.path
        return name.replace("/", ".").removesuffix(".__init__")

    def column(self, node: ast.AST) -> int:
        """1-based character column of `node` (ast gives UTF-8 byte offsets)."""
        if self._lines is None:
            self._lines = self.text.splitlines()
        line = self._lines[node.lineno - 1] if node.lineno - 1 < len(self._lines) else ""
        return len(line.encode("utf-8")[: node.col_offset].decode("utf-8", "replace")) + 1


@dataclass
class Program:
    """What the evaluator may read: the spec hierarchy, spec class bodies, and the modules of interest."""

    hierarchy: SpecHierarchy
    classes: dict[str, ast.ClassDef]
    modules: dict[str, Module]
    # The indexer layer of a DSA group, as the tree builds it (class and literal constructor arguments).
    indexer: Layer | None = None
    source: str = ""
    # Module paths that only receive the scheduler's (flattened) config: `scheduler-only-paths`.
    scheduler_only_paths: tuple[str, ...] = DEFAULT_SCHEDULER_ONLY_PATHS

    def function(self, name: str, near: str | None = None) -> tuple[Module, ast.FunctionDef] | None:
        if near is not None and near in self.modules and name in self.modules[near].functions:
            return self.modules[near], self.modules[near].functions[name]
        found = [(m, m.functions[name]) for m in self.modules.values() if name in m.functions]
        if len(found) == 1:
            return found[0]
        preferred = [f for f in found if f[0].path.startswith("vllm/v1/")]
        return preferred[0] if len(preferred) == 1 else None

    def mro(self, name: str) -> list[str]:
        order: list[str] = []

        def visit(current: str) -> None:
            if current in order:
                return
            order.append(current)
            for base in self.hierarchy.bases.get(current, ()):
                visit(base)

        visit(name)
        return order


# ---------------------------------------------------------------------------------------------- evaluator


class _Frame:
    def __init__(self, module: Module, group_spec=None, sites: dict[int, ast.AST] | None = None, layout: int | None = None):
        self.module = module
        self.group_spec = group_spec
        # A known number of groups (1: a single-group config, where `cache_config.block_size` is the group's).
        self.layout = layout
        self.returns: list = []
        self.sites = sites or {}
        self.recorded: dict[int, list] = {}
        self.setattrs: dict[str, list] = {}
        self.jumps: list[list[dict]] = []  # per enclosing loop: the states `break`/`continue` leave with

    def record(self, node: ast.AST, value) -> None:
        if id(node) in self.sites:
            self.recorded.setdefault(id(node), []).append(value)


class Evaluator:
    def __init__(self, program: Program, dcp: int = DCP, block_size: int = BLOCK_SIZE):
        self.program = program
        self.dcp = dcp
        self.block_size = block_size
        self.depth = 0
        self._attribute_guard: set[tuple[int, str]] = set()
        self._post_init_sets: dict[tuple[str, str], tuple | None] = {}

    # -- entry points ---------------------------------------------------------------------------

    def call(self, module: Module, function: ast.FunctionDef, args: list, keywords: dict | None = None,
             receiver=None, group_spec=None, sites: dict[int, ast.AST] | None = None,
             layout: int | None = None) -> tuple[object, _Frame]:
        """Run `function`; returns (its value, the frame with the values recorded at `sites`)."""
        frame = _Frame(module, group_spec, sites, layout)
        if self.depth >= MAX_DEPTH:
            return UNKNOWN, frame
        self.depth += 1
        try:
            env = self._bind(function, args, keywords or {}, receiver, frame)
            end = self._block(function.body, env, frame)
            if end is not None:
                frame.returns.append(None)
            return _join(frame.returns), frame
        except RecursionError:
            return UNKNOWN, frame
        finally:
            self.depth -= 1

    def _bind(self, function: ast.FunctionDef, args: list, keywords: dict, receiver, frame: _Frame) -> dict:
        env: dict[str, object] = {}
        params = [*function.args.posonlyargs, *function.args.args]
        defaults = function.args.defaults
        first_default = len(params) - len(defaults)
        values = list(args)
        if receiver is not None:
            values.insert(0, receiver)
        for index, param in enumerate(params):
            if index < len(values):
                env[param.arg] = values[index]
            elif param.arg in keywords:
                env[param.arg] = keywords[param.arg]
            elif self.is_dcp_name(param.arg, frame.module):
                env[param.arg] = self.dcp  # callers pass the DCP size; the default is for tests
            elif index >= first_default:
                env[param.arg] = self.eval(defaults[index - first_default], {}, frame)
            else:
                env[param.arg] = self.parameter_value(param.arg, frame)
        for param, default in zip(function.args.kwonlyargs, function.args.kw_defaults):
            if param.arg in keywords:
                env[param.arg] = keywords[param.arg]
            elif default is not None:
                env[param.arg] = self.eval(default, {}, frame)
            else:
                env[param.arg] = self.parameter_value(param.arg, frame)
        return env

    def parameter_value(self, name: str, frame: _Frame):
        if self.is_dcp_name(name, frame.module):
            return self.dcp
        return _Opaque(name)

    def is_dcp_name(self, name: str, module: Module | None) -> bool:
        return is_dcp_name(name, module.dcp_aliases if module is not None else frozenset())

    # -- statements -----------------------------------------------------------------------------

    def _block(self, statements: list[ast.stmt], env: dict, frame: _Frame) -> dict | None:
        """Run statements; the environment afterwards, or None when every path returned or raised."""
        for statement in statements:
            env = self._statement(statement, env, frame)
            if env is None:
                return None
        return env

    def _statement(self, node: ast.stmt, env: dict, frame: _Frame) -> dict | None:
        if isinstance(node, ast.Expr):
            self.eval(node.value, env, frame)
            return env
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            if node.value is None:
                return env
            value = self.eval(node.value, env, frame)
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                self._assign(target, value, env)
            return env
        if isinstance(node, ast.AugAssign):
            current = self.eval(node.target, env, frame)
            value = self._binop(node.op, current, self.eval(node.value, env, frame))
            frame.record(node, value)
            self._assign(node.target, value, env)
            return env
        if isinstance(node, ast.Return):
            frame.returns.append(self.eval(node.value, env, frame) if node.value is not None else None)
            return None
        if isinstance(node, ast.Raise):
            return None
        if isinstance(node, ast.Assert):
            return None if truth(self.eval(node.test, env, frame)) is False else env
        if isinstance(node, ast.If):
            decided = truth(self.eval(node.test, env, frame))
            if decided is True:
                return self._block(node.body, env, frame)
            if decided is False:
                return self._block(node.orelse, env, frame)
            return _merge(self._block(node.body, dict(env), frame), self._block(node.orelse, dict(env), frame))
        if isinstance(node, (ast.For, ast.AsyncFor)):
            iterable = self.eval(node.iter, env, frame)
            items = self._items(iterable, frame)
            jumps = any(isinstance(n, (ast.Break, ast.Continue)) for n in _own_statements(node.body))
            if items and not isinstance(iterable, _Groups) and not jumps and len(items) <= 64:
                # An exactly known sequence (the layers of a container): run every iteration.
                current: dict | None = env
                for item in items:
                    current = dict(current)
                    self._assign(node.target, item, current)
                    current = self._block(node.body, current, frame)
                    if current is None:
                        return None
                return self._block(node.orelse, current, frame) if node.orelse else current
            inner = dict(env)
            self._assign(node.target, items[0] if items else UNKNOWN, inner)
            frame.jumps.append([])
            after = self._block(node.body, inner, frame)
            jumped = frame.jumps.pop()
            after = _merge(after, self._block(node.orelse, dict(env), frame)) if node.orelse else after
            for exit_env in jumped:  # `break` / `continue` leave the (once-run) loop with their state
                after = _merge(after, exit_env)
            return _merge(env, after)  # the loop may run zero times
        if isinstance(node, ast.While):
            self.eval(node.test, env, frame)
            frame.jumps.append([])
            after = self._block(node.body, dict(env), frame)
            for exit_env in frame.jumps.pop():
                after = _merge(after, exit_env)
            return _merge(env, after)
        if isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                self.eval(item.context_expr, env, frame)
            return self._block(node.body, env, frame)
        if isinstance(node, ast.Try):
            after = self._block(node.body, dict(env), frame)
            after = self._block(node.orelse, after, frame) if after is not None and node.orelse else after
            for handler in node.handlers:
                after = _merge(after, self._block(handler.body, dict(env), frame))
            return self._block(node.finalbody, after, frame) if after is not None and node.finalbody else after
        if isinstance(node, (ast.Break, ast.Continue)):
            if frame.jumps:
                frame.jumps[-1].append(dict(env))
            return None
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            env[node.name] = UNKNOWN
            return env
        if isinstance(node, (ast.Pass, ast.Import, ast.ImportFrom, ast.Global, ast.Nonlocal)):
            return env
        # Anything else (match, delete, …): forget what it may assign.
        for child in ast.walk(node):
            if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store):
                env[child.id] = UNKNOWN
        return env

    def _assign(self, target: ast.expr, value, env: dict) -> None:
        name = _dotted(target)
        if name is not None:
            env[name] = value
            return
        if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, tuple) and len(value) == len(target.elts):
            for element, item in zip(target.elts, value):
                self._assign(element, item, env)
            return
        for child in ast.walk(target):
            if isinstance(child, ast.Name):
                env[child.id] = UNKNOWN

    # -- expressions ----------------------------------------------------------------------------

    def eval(self, node: ast.expr | None, env: dict, frame: _Frame):
        if node is None:
            return None
        value = self._eval(node, env, frame)
        frame.record(node, value)
        return value

    def _eval(self, node: ast.expr, env: dict, frame: _Frame):
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return self._name(node.id, env, frame)
        if isinstance(node, ast.Attribute):
            return self._attribute(node, env, frame)
        if isinstance(node, ast.Call):
            return self._call(node, env, frame)
        if isinstance(node, ast.BoolOp):
            return self._boolop(node, env, frame)
        if isinstance(node, ast.UnaryOp):
            operand = self.eval(node.operand, env, frame)
            if isinstance(node.op, ast.Not):
                decided = truth(operand)
                return UNKNOWN if decided is None else not decided
            if isinstance(node.op, ast.USub) and _known_number(operand):
                return -operand
            return UNKNOWN
        if isinstance(node, ast.Compare):
            return self._compare(node, env, frame)
        if isinstance(node, ast.IfExp):
            decided = truth(self.eval(node.test, env, frame))
            if decided is True:
                return self.eval(node.body, env, frame)
            if decided is False:
                return self.eval(node.orelse, env, frame)
            body, orelse = self.eval(node.body, env, frame), self.eval(node.orelse, env, frame)
            return body if _same(body, orelse) else UNKNOWN
        if isinstance(node, ast.BinOp):
            return self._binop(node.op, self.eval(node.left, env, frame), self.eval(node.right, env, frame))
        if isinstance(node, (ast.Tuple, ast.List)):
            return tuple(self.eval(e, env, frame) for e in node.elts)
        if isinstance(node, ast.Subscript):
            return self._subscript(node, env, frame)
        if isinstance(node, (ast.GeneratorExp, ast.ListComp, ast.SetComp)):
            items = self._comprehension(node, env, frame)
            if items is None:
                return UNKNOWN
            return _Seq(tuple(items)) if isinstance(node, ast.ListComp) else _Iter(tuple(items))
        if isinstance(node, ast.NamedExpr):
            value = self.eval(node.value, env, frame)
            env[node.target.id] = value
            return value
        for child in ast.iter_child_nodes(node):  # reach sites nested in anything else
            if isinstance(child, ast.expr):
                self.eval(child, env, frame)
        return UNKNOWN

    def _name(self, name: str, env: dict, frame: _Frame):
        if name in env:
            return env[name]
        if name in self.program.hierarchy.bases:
            return _ClassRef(frozenset({name}))
        if self.is_dcp_name(name, frame.module):
            return self.dcp
        if self.program.function(name, frame.module.path) is not None:
            return _Function(name)
        if name in ("True", "False", "None"):
            return {"True": True, "False": False, "None": None}[name]
        return _Opaque(name)

    def _attribute(self, node: ast.Attribute, env: dict, frame: _Frame):
        whole = _dotted(node)
        if whole is not None and whole in env:
            return env[whole]
        base = self.eval(node.value, env, frame)
        attr = node.attr
        if isinstance(base, (Layer, Container)):
            return self.spec_attribute(base, attr, frame)
        if isinstance(base, _Group):
            return base.spec if attr == "kv_cache_spec" else UNKNOWN
        if isinstance(base, _LayerDict) and attr in ("values", "keys", "items"):
            return _Bound(base, attr)
        if isinstance(base, _Opaque) or base is UNKNOWN:
            if attr == "kv_cache_groups" and frame.group_spec is not None:
                return _Groups(frame.group_spec)
            if attr == "kv_cache_spec" and frame.group_spec is not None:
                return frame.group_spec
            if self.is_dcp_name(attr, frame.module):
                return self.dcp
            if attr == "block_size" and frame.layout == 1 and base is not UNKNOWN and base.name.endswith("cache_config"):
                return self.block_size
            if isinstance(base, _Opaque):
                return _Opaque(f"{base.name}.{attr}")
        return UNKNOWN

    def _subscript(self, node: ast.Subscript, env: dict, frame: _Frame):
        base = self.eval(node.value, env, frame)
        key = self.eval(node.slice, env, frame)
        if isinstance(base, _Groups):
            return _Group(base.spec)
        if isinstance(base, _LayerDict):
            return base.layers[0] if len(set(base.layers)) == 1 else UNKNOWN
        if isinstance(base, (tuple, _Seq)) and _known_number(key):
            items = base if isinstance(base, tuple) else base.items
            return items[key] if -len(items) <= key < len(items) else UNKNOWN
        if isinstance(base, _Opaque) and base.name.endswith("kv_cache_groups") and frame.group_spec is not None:
            return _Group(frame.group_spec)
        return UNKNOWN

    def _boolop(self, node: ast.BoolOp, env: dict, frame: _Frame):
        undecided = False
        last = None
        for operand in node.values:
            last = self.eval(operand, env, frame)
            decided = truth(last)
            if decided is None:
                undecided = True
            elif decided is (isinstance(node.op, ast.Or)):
                return last  # short circuit: `True or …`, `False and …`
        return UNKNOWN if undecided else last

    def _compare(self, node: ast.Compare, env: dict, frame: _Frame):
        left = self.eval(node.left, env, frame)
        result = True
        for op, right_node in zip(node.ops, node.comparators):
            right = self.eval(right_node, env, frame)
            outcome = _compare(op, left, right)
            if outcome is None:
                result = UNKNOWN if result is not False else False
            elif outcome is False:
                result = False
            left = right
        return result

    def _binop(self, op: ast.operator, left, right):
        if isinstance(left, _ClassRef) and isinstance(right, _ClassRef) and isinstance(op, ast.BitOr):
            return _ClassRef(left.names | right.names)
        if not (_known_number(left) and _known_number(right)):
            return UNKNOWN
        try:
            if isinstance(op, ast.Mult):
                return left * right
            if isinstance(op, ast.Add):
                return left + right
            if isinstance(op, ast.Sub):
                return left - right
            if isinstance(op, ast.FloorDiv):
                return left // right
            if isinstance(op, ast.Mod):
                return left % right
        except ZeroDivisionError:
            return UNKNOWN
        return UNKNOWN

    def _items(self, value, frame: _Frame) -> list:
        """The elements iterating `value` yields; [] when unknown."""
        if isinstance(value, _Groups):
            return [_Group(value.spec)]
        if isinstance(value, (_Seq, _Iter)):
            return list(value.items)
        if isinstance(value, tuple):
            return list(value)
        if isinstance(value, _LayerDict):
            return [UNKNOWN] * len(value.layers)  # keys: layer names
        return []

    def _comprehension(self, node, env: dict, frame: _Frame) -> list | None:
        """Element values, or None when the iteration is not exactly known (sites are still reached)."""
        results: list = []
        exact = True

        def run(index: int, scope: dict) -> None:
            nonlocal exact
            if index == len(node.generators):
                results.append(self.eval(node.elt, scope, frame))
                return
            generator = node.generators[index]
            iterable = self.eval(generator.iter, scope, frame)
            items = self._items(iterable, frame)
            if isinstance(iterable, _Groups) or not items:
                exact = False  # one representative group, or nothing known
                items = items or [UNKNOWN]
            for item in items:
                inner = dict(scope)
                self._assign(generator.target, item, inner)
                keep = True
                for condition in generator.ifs:
                    decided = truth(self.eval(condition, inner, frame))
                    if decided is False:
                        keep = False
                    elif decided is None:
                        exact = False
                if keep:
                    run(index + 1, inner)

        run(0, dict(env))
        return results if exact else None

    def _call(self, node: ast.Call, env: dict, frame: _Frame):
        func = node.func
        if isinstance(func, ast.Name) and func.id not in env:
            special = self._builtin(func.id, node, env, frame)
            if special is not NotImplemented:
                return special
        callee = self.eval(func, env, frame)
        args = [self.eval(a.value if isinstance(a, ast.Starred) else a, env, frame) for a in node.args]
        keywords = {k.arg: self.eval(k.value, env, frame) for k in node.keywords if k.arg is not None}
        for k in node.keywords:
            if k.arg is None:
                self.eval(k.value, env, frame)
        if isinstance(callee, _Bound):
            receiver = callee.receiver
            if isinstance(receiver, _LayerDict):
                if callee.method == "values":
                    return _Seq(receiver.layers)
                return UNKNOWN
            return self._method(receiver, callee.method, args, keywords, frame)
        if isinstance(callee, _Function):
            found = self.program.function(callee.name, frame.module.path)
            if found is None:
                return UNKNOWN
            value, _ = self.call(found[0], found[1], args, keywords, group_spec=frame.group_spec)
            return value
        if isinstance(func, ast.Attribute) and func.attr == "__setattr__" and len(args) == 3:
            if isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
                frame.setattrs.setdefault(node.args[1].value, []).append(args[2])
        return UNKNOWN

    def _builtin(self, name: str, node: ast.Call, env: dict, frame: _Frame):
        args = node.args
        if name == "isinstance" and len(args) == 2:
            return self.isinstance_of(self.eval(args[0], env, frame), self.eval(args[1], env, frame))
        if name == "type" and len(args) == 1:
            value = self.eval(args[0], env, frame)
            if isinstance(value, Layer):
                return _ClassRef(frozenset({value.cls}))
            if isinstance(value, Container):
                return _ClassRef(frozenset({CONTAINER_CLASS}))
            return UNKNOWN
        if name in ("all", "any") and len(args) == 1:
            if isinstance(args[0], (ast.GeneratorExp, ast.ListComp)):
                items = self._comprehension(args[0], env, frame)
            else:
                value = self.eval(args[0], env, frame)
                items = None if isinstance(value, _Groups) else (self._items(value, frame) if truth(value) is not None or isinstance(value, tuple) else None)
            if items is None:
                return UNKNOWN
            decisions = [truth(v) for v in items]
            if name == "all":
                return False if False in decisions else (UNKNOWN if None in decisions else True)
            return True if True in decisions else (UNKNOWN if None in decisions else False)
        if name == "len" and len(args) == 1:
            value = self.eval(args[0], env, frame)
            if isinstance(value, (_Seq, _Iter)):
                return len(value.items)
            if isinstance(value, _LayerDict):
                return len(value.layers)
            if isinstance(value, tuple):
                return len(value)
            if isinstance(value, _Groups) and frame.layout is not None:
                return frame.layout
            return UNKNOWN
        if name == "iter" and len(args) == 1:
            value = self.eval(args[0], env, frame)
            if isinstance(value, (_Seq, _Iter)):
                return _Iter(value.items)
            if isinstance(value, tuple):
                return _Iter(value)
            return UNKNOWN
        if name == "next" and args:
            value = self.eval(args[0], env, frame)
            if isinstance(value, _Iter) and value.items:
                return value.items[0]
            return UNKNOWN
        if name == "bool" and len(args) == 1:
            decided = truth(self.eval(args[0], env, frame))
            return UNKNOWN if decided is None else decided
        return NotImplemented

    def isinstance_of(self, value, classes) -> object:
        if isinstance(classes, tuple):
            names: set[str] = set()
            for item in classes:
                if not isinstance(item, _ClassRef):
                    return UNKNOWN
                names |= item.names
        elif isinstance(classes, _ClassRef):
            names = set(classes.names)
        else:
            return UNKNOWN
        if isinstance(value, Layer):
            cls = value.cls
        elif isinstance(value, Container):
            cls = CONTAINER_CLASS
        else:
            return UNKNOWN
        hierarchy = self.program.hierarchy
        return any(hierarchy.is_subclass(cls, name) for name in names)

    # -- spec attributes and methods ------------------------------------------------------------

    def _class_member(self, cls: str, name: str) -> tuple[str, ast.AST] | None:
        """The first definition of `name` along `cls`'s MRO: a method/property def or a class-level value."""
        for owner in self.program.mro(cls):
            body = self.program.classes.get(owner)
            if body is None:
                default = self.program.hierarchy.attribute_defaults.get(owner, {}).get(name)
                if default is not None:
                    try:
                        return owner, ast.parse(default, mode="eval").body
                    except SyntaxError:
                        return None
                continue
            for statement in body.body:
                if isinstance(statement, ast.FunctionDef) and statement.name == name:
                    return owner, statement
                if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
                    if statement.target.id == name and statement.value is not None:
                        return owner, _field_default(statement.value)
                if isinstance(statement, ast.Assign):
                    if any(isinstance(t, ast.Name) and t.id == name for t in statement.targets):
                        return owner, statement.value
        return None

    def spec_attribute(self, spec: Layer | Container, attr: str, frame: _Frame):
        if attr == "block_size":
            return self.block_size
        if isinstance(spec, Container) and attr == "kv_cache_specs":
            return _LayerDict(spec.layers)
        if isinstance(spec, Layer):
            for name, value in spec.overrides:
                if name == attr:
                    return value
        guard = (id(spec), attr)
        if guard in self._attribute_guard:
            return UNKNOWN
        self._attribute_guard.add(guard)
        try:
            cls = spec.cls if isinstance(spec, Layer) else CONTAINER_CLASS
            assigned = self._post_init_value(spec, cls, attr)
            if assigned is not NotImplemented:
                return assigned
            member = self._class_member(cls, attr)
            if member is None:
                return UNKNOWN
            owner, definition = member
            if isinstance(definition, ast.FunctionDef):
                if any(_dotted(d) in ("property", "functools.cached_property", "cached_property") for d in definition.decorator_list):
                    module = self._interface_module()
                    if module is None:
                        return UNKNOWN
                    value, _ = self.call(module, definition, [], receiver=spec)
                    return value
                return _Bound(spec, attr)
            return self.eval(definition, {}, _Frame(self._interface_module() or _EMPTY_MODULE))
        finally:
            self._attribute_guard.discard(guard)

    def _post_init_value(self, spec, cls: str, attr: str):
        """What `__post_init__` (the first along the MRO) assigns to `attr` with object.__setattr__."""
        key = (cls, attr)
        if key not in self._post_init_sets:
            member = self._class_member(cls, "__post_init__")
            sets = member is not None and isinstance(member[1], ast.FunctionDef) and any(
                isinstance(n, ast.Constant) and n.value == attr for n in ast.walk(member[1])
            )
            self._post_init_sets[key] = member if sets else None
        member = self._post_init_sets[key]
        if member is None:
            return NotImplemented
        module = self._interface_module()
        if module is None:
            return NotImplemented
        _, frame = self.call(module, member[1], [], receiver=spec)
        values = frame.setattrs.get(attr)
        return _join(values) if values else NotImplemented

    def _method(self, receiver, method: str, args: list, keywords: dict, frame: _Frame):
        if not isinstance(receiver, (Layer, Container)):
            return UNKNOWN
        cls = receiver.cls if isinstance(receiver, Layer) else CONTAINER_CLASS
        member = self._class_member(cls, method)
        module = self._interface_module()
        if member is None or module is None or not isinstance(member[1], ast.FunctionDef):
            return UNKNOWN
        if any(_dotted(d) in ("classmethod", "staticmethod") for d in member[1].decorator_list):
            return UNKNOWN
        value, _ = self.call(module, member[1], args, keywords, receiver=receiver)
        return value

    def _interface_module(self) -> Module | None:
        return self.program.modules.get(INTERFACE_MODULE) or next(iter(self.program.modules.values()), None)


_EMPTY_MODULE = Module("<none>", ast.Module(body=[], type_ignores=[]), "")


def _compare(op: ast.cmpop, left, right) -> bool | None:
    if left is UNKNOWN or right is UNKNOWN or isinstance(left, (_Opaque, _Function)) or isinstance(right, (_Opaque, _Function)):
        return None
    if isinstance(op, (ast.Is, ast.IsNot, ast.Eq, ast.NotEq)):
        if isinstance(left, _ClassRef) or isinstance(right, _ClassRef):
            if not (isinstance(left, _ClassRef) and isinstance(right, _ClassRef)):
                return False if isinstance(op, (ast.Is, ast.Eq)) else True
            equal = left.names == right.names and len(left.names) == 1
        elif isinstance(left, (int, str, float, type(None))) and isinstance(right, (int, str, float, type(None))):
            equal = left is right if isinstance(op, (ast.Is, ast.IsNot)) and (left is None or right is None) else left == right
        else:
            return None
        return equal if isinstance(op, (ast.Is, ast.Eq)) else not equal
    if isinstance(op, (ast.In, ast.NotIn)):
        if not isinstance(right, tuple):
            return None
        found = None if any(r is UNKNOWN for r in right) else False
        for item in right:
            if _compare(ast.Eq(), left, item) is True:
                found = True
        if found is None:
            return None
        return found if isinstance(op, ast.In) else not found
    if _known_number(left) and _known_number(right):
        return {ast.Lt: left < right, ast.LtE: left <= right, ast.Gt: left > right, ast.GtE: left >= right}.get(type(op))
    return None


def _own_statements(body: list[ast.stmt]):
    """Statements of a loop body, not descending into nested loops or functions."""
    stack = list(body)
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (ast.For, ast.AsyncFor, ast.While, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        stack.extend(child for child in ast.iter_child_nodes(node) if isinstance(child, ast.stmt))


def _merge(a: dict | None, b: dict | None) -> dict | None:
    if a is None:
        return b
    if b is None:
        return a
    merged = dict(a)
    for key in set(a) | set(b):
        if key not in a or key not in b or not _same(a[key], b[key]):
            merged[key] = UNKNOWN
    return merged


# ---------------------------------------------------------------------------------------------- kinds


@dataclass(frozen=True)
class SpecKind:
    """A row of the matrix: what a KV cache group's spec can be."""

    label: str
    spec: Layer | Container
    # Why vLLM refuses this kind when DCP > 1 (an assertion in the tree), or None when it accepts it.
    rejected_under_dcp: str | None = None

    @property
    def is_container(self) -> bool:
        return isinstance(self.spec, Container)

    def flattened(self) -> Layer:
        """What the scheduler's config holds for this group: the engine keeps the first layer's spec."""
        return self.spec.layers[0] if isinstance(self.spec, Container) else self.spec


def _short(cls: str) -> str:
    return cls.removesuffix("Spec") or cls


def spec_kinds(program: Program, evaluator: Evaluator) -> tuple[SpecKind, ...]:
    hierarchy = program.hierarchy
    roots = {n for n, bases in hierarchy.bases.items() if not any(b in hierarchy.bases for b in bases)}
    abstract = roots | {ATTENTION_ROOT, CONTAINER_CLASS}
    rejected = {cls: _dcp_rejection(program, evaluator, cls) for cls in hierarchy.bases if cls not in abstract}
    kinds = [SpecKind(cls, Layer(cls), rejected[cls]) for cls in hierarchy.bases if cls not in abstract]
    if CONTAINER_CLASS in hierarchy.bases:
        containers: list[tuple[str, tuple[Layer, ...]]] = []
        if "MLAAttentionSpec" in hierarchy.bases:
            indexer = program.indexer or Layer("MLAAttentionSpec")
            indexer = Layer(indexer.cls, indexer.overrides, role="indexer")
            containers.append(("{MLA, indexer}", (Layer("MLAAttentionSpec"), indexer)))
        if "FullAttentionSpec" in hierarchy.bases:
            containers.append(("{FullAttention×2}", (Layer("FullAttentionSpec"), Layer("FullAttentionSpec"))))
        if "SlidingWindowSpec" in hierarchy.bases and "FullAttentionSpec" in hierarchy.bases:
            containers.append(("{SlidingWindow, FullAttention}", (Layer("SlidingWindowSpec"), Layer("FullAttentionSpec"))))
        for label, layers in containers:
            reasons = [rejected.get(layer.cls) for layer in layers if rejected.get(layer.cls)]
            kinds.append(SpecKind(f"{CONTAINER_CLASS}{label}", Container(layers), reasons[0] if reasons else None))
    return tuple(kinds)


def _dcp_rejection(program: Program, evaluator: Evaluator, cls: str) -> str | None:
    """An `assert` on the DCP size, at the top of a method this class has, that fails for it when DCP > 1."""
    module = evaluator._interface_module()
    if module is None:
        return None
    seen: set[str] = set()
    for owner in program.mro(cls):
        body = program.classes.get(owner)
        for method in body.body if body is not None else ():
            if not isinstance(method, ast.FunctionDef) or method.name in seen:
                continue
            seen.add(method.name)
            for statement in method.body:
                if not isinstance(statement, ast.Assert):
                    continue
                text = ast.unparse(statement.test)
                if "decode_context_parallel" not in text and "dcp" not in text:
                    continue
                frame = _Frame(module)
                env = evaluator._bind(method, [], {}, Layer(cls), frame)
                if truth(evaluator.eval(statement.test, env, frame)) is False:
                    return f"{owner}.{method.name} asserts `{text}`"
    return None


# ---------------------------------------------------------------------------------------------- results


@dataclass(frozen=True)
class SizingPath:
    """A column: one sizing path or predicate and the DCP factor it applies to each kind."""

    name: str  # module:function, module dotted
    module_path: str
    qualname: str
    line: int
    role: str  # reference | resolver | predicate | scheduler | worker | both
    # Per view ("group" = container as given, "scheduler" = flattened): one factor per kind.
    views: tuple[tuple[str, tuple[str, ...]], ...]

    def factors(self, view: str) -> tuple[str, ...] | None:
        return next((f for v, f in self.views if v == view), None)

    def cell(self, index: int) -> str:
        values = [f[index] for _, f in self.views]
        if len(set(values)) == 1:
            return values[0]
        return "/".join(f"{'w' if v == 'group' else 's'}:{f[index]}" for v, f in self.views)


@dataclass(frozen=True)
class SizingAnalysis:
    """Plain, picklable results of the cross-file analysis (ProjectIndex.sizing)."""

    kinds: tuple[SpecKind, ...]
    paths: tuple[SizingPath, ...]
    divergences: tuple[Divergence, ...]
    reference: str | None  # the scheduler's path name
    resolver: str | None
    source: str = ""
    dcp: int = DCP
    block_size: int = BLOCK_SIZE

    def divergences_in(self, module_path: str) -> tuple[Divergence, ...]:
        """The divergences placed in one module: all a rule linting that module reads of the analysis."""
        return tuple(d for d in self.divergences if d.module_path == module_path)

    def differs(self, path: SizingPath, index: int) -> bool:
        """Whether this cell disagrees with what the path is compared against."""
        against = self._against(path)
        if against is None:
            return False
        if path.role == "predicate":
            target = against.factors("group")
            return target is not None and any(f[index] != target[index] and "?" not in (f[index], target[index]) for _, f in path.views)
        return any(_differs(f[index], against, index) for _, f in path.views)

    def _against(self, path: SizingPath) -> SizingPath | None:
        if path.role in ("reference", "resolver"):
            return None
        if path.role == "predicate":
            return next((p for p in self.paths if p.name == self.resolver), None)
        found = next((p for p in self.paths if p.name == self.reference and p.role == "reference"), None)
        if found is None and self.reference == self.resolver:
            found = next((p for p in self.paths if p.name == self.resolver), None)
            if found is not None:
                found = SizingPath(found.name, found.module_path, found.qualname, found.line, "reference",
                                   (("scheduler", found.factors("scheduler") or ()),))
        return found


# ---------------------------------------------------------------------------------------------- sites


def _factor(value, measure: str) -> str:
    if not _known_number(value):
        return "?"
    if measure == "span":
        return {BLOCK_SIZE * DCP: "dcp", BLOCK_SIZE: "1"}.get(value, "?")
    return {DCP: "dcp", 1: "1"}.get(value, "?")


def _measure(value) -> str | None:
    if value in (BLOCK_SIZE, BLOCK_SIZE * DCP):
        return "span"
    if value in (1, DCP):
        return "factor"
    return None


def _mentions_dcp(node: ast.AST, evaluator: Evaluator, module: Module) -> bool:
    for child in ast.walk(node):
        name = child.id if isinstance(child, ast.Name) else child.attr if isinstance(child, ast.Attribute) else None
        if name is not None and evaluator.is_dcp_name(name, module):
            return True
    return False


def _spec_like(name: str) -> bool:
    lowered = name.lower()
    return "spec" in lowered and not lowered.endswith("specs")


def _is_block_size_of_spec(node: ast.AST) -> bool:
    if not (isinstance(node, ast.Attribute) and node.attr == "block_size"):
        return False
    owner = _dotted(node.value) or ast.unparse(node.value)
    return "spec" in owner.lower()


def _functions(module: Module):
    """(qualname, def, enclosing class names) for module-level functions and methods of top-level classes."""
    for node in module.tree.body:
        if isinstance(node, ast.FunctionDef):
            yield node.name, node, []
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    yield f"{node.name}.{item.name}", item, [node.name]


def _sizing_sites(function: ast.FunctionDef, module: Module, evaluator: Evaluator, helpers: set[str]) -> dict[int, ast.AST]:
    sites: dict[int, ast.AST] = {}
    segment = module.segment(function)
    if "block_size" not in segment and not any(name in segment for name in helpers):
        return sites
    for node in ast.walk(function):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            for spec_side, other in ((node.left, node.right), (node.right, node.left)):
                if _is_block_size_of_spec(spec_side) and _mentions_dcp(other, evaluator, module):
                    sites[id(node)] = node
        elif isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Mult):
            target = _dotted(node.target) or ""
            if "block_size" in target and _mentions_dcp(node.value, evaluator, module):
                sites[id(node)] = node
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in helpers:
            if node.args and any("spec" in ast.unparse(a).lower() for a in node.args[:1]):
                sites[id(node)] = node
    return sites


def _spec_roots(function: ast.FunctionDef) -> set[str]:
    return {a.arg for a in [*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs] if _spec_like(a.arg)}


def _has_dcp_param(function: ast.FunctionDef, evaluator: Evaluator, module: Module) -> bool:
    params = [*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs]
    return any(evaluator.is_dcp_name(a.arg, module) for a in params)


def _site_spec_from_parameter(site: ast.AST, spec_params: set[str]) -> bool:
    """Whether the spec a site sizes is the enclosing function's own parameter (a helper, not a path)."""
    target = site.args[0] if isinstance(site, ast.Call) else site
    for child in ast.walk(target):
        if isinstance(child, ast.Name) and child.id in spec_params:
            return True
        if isinstance(child, ast.Attribute) and child.attr == "kv_cache_spec":
            return False
    return False


def _parents(function: ast.FunctionDef) -> dict[int, ast.AST]:
    parents: dict[int, ast.AST] = {}
    for node in ast.walk(function):
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
    return parents


def _widen(sites: dict[int, ast.AST], function: ast.FunctionDef) -> dict[int, ast.AST]:
    """`S.block_size * dcp if <test> else S.block_size`: the whole conditional is the span."""
    if not sites:
        return sites
    parents = _parents(function)
    widened: dict[int, ast.AST] = {}
    for node in sites.values():
        parent = parents.get(id(node))
        while isinstance(parent, ast.IfExp) and node is not parent.test:
            other = parent.orelse if node is parent.body else parent.body
            if "block_size" not in ast.unparse(other):
                break
            node, parent = parent, parents.get(id(parent))
        widened[id(node)] = node
    # A site inside another site is part of it.
    inner = {id(c) for s in widened.values() for c in ast.walk(s) if c is not s}
    return {k: v for k, v in widened.items() if k not in inner}


def _gates(function: ast.FunctionDef, module: Module, evaluator: Evaluator) -> dict[int, ast.IfExp]:
    """`dcp if <test on a spec> else 1` and kin: inline predicates that decide DCP sharding."""
    gates: dict[int, ast.IfExp] = {}
    for node in ast.walk(function):
        if isinstance(node, ast.IfExp) and "spec" in ast.unparse(node.test).lower():
            body, orelse = _mentions_dcp(node.body, evaluator, module), _mentions_dcp(node.orelse, evaluator, module)
            if body != orelse and not _mentions_dcp(node.test, evaluator, module):
                gates[id(node)] = node
    return gates


def _first_layer_picks(function: ast.FunctionDef) -> list[ast.Call]:
    """`next(iter(X.kv_cache_specs.values()))`."""
    picks = []
    for node in ast.walk(function):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "next"
            and node.args
            and isinstance(node.args[0], ast.Call)
            and isinstance(node.args[0].func, ast.Name)
            and node.args[0].func.id == "iter"
            and "kv_cache_specs" in ast.unparse(node.args[0])
        ):
            picks.append(node)
    return picks


def _role(module: Module, qualname: str, classes: list[str], scheduler_only_paths: tuple[str, ...]) -> str:
    if sees_only_scheduler_config(module.path, classes, scheduler_only_paths):
        return "scheduler"
    parts = module.path.split("/")
    if any("worker" in p or "model_runner" in p for p in parts) or any(c.endswith("Worker") for c in classes):
        return "worker"
    return "both"


@dataclass
class _Candidate:
    module: Module
    qualname: str
    function: ast.FunctionDef
    classes: list[str]
    spec_params: set[str]
    sites: dict[int, ast.AST]

    @property
    def name(self) -> str:
        return f"{self.module.dotted}:{self.qualname}"

    @property
    def receiver(self):
        params = [*self.function.args.posonlyargs, *self.function.args.args]
        is_static = any(_dotted(d) == "staticmethod" for d in self.function.decorator_list)
        if self.classes and params and not is_static and params[0].arg in ("self", "cls"):
            return _Opaque(params[0].arg)
        return None


def _combine(values: list) -> str:
    factors = {_factor(v, _measure(v) or "span") for v in values}
    return factors.pop() if len(factors) == 1 else "?"


class _Analyser:
    def __init__(self, program: Program):
        self.program = program
        self.evaluator = Evaluator(program)
        self.kinds = spec_kinds(program, self.evaluator)

    def run(self, candidate: _Candidate, spec, as_helper: bool, sites: dict[int, ast.AST] | None = None):
        keywords = {p: spec for p in candidate.spec_params} if as_helper else {}
        return self.evaluator.call(
            candidate.module, candidate.function, [], keywords,
            receiver=candidate.receiver, group_spec=spec, sites=sites if sites is not None else candidate.sites,
        )

    def factor(self, candidate: _Candidate, spec, as_helper: bool) -> str:
        value, frame = self.run(candidate, spec, as_helper)
        if as_helper and _known_number(value):
            return _factor(value, _measure(value) or "span")
        if as_helper and any(isinstance(n, ast.Return) and n.value is not None for n in ast.walk(candidate.function)):
            return "?"  # what it returns is its answer; a size computed on one branch is not
        recorded = [_join(frame.recorded[k]) for k in candidate.sites if k in frame.recorded]
        return _combine(recorded) if recorded else "?"

    def single_group_factor(self, candidate: _Candidate, spec) -> str:
        """The scheduler's span when the config has one group: what the function returns first."""
        value, _ = self.evaluator.call(candidate.module, candidate.function, [], {}, receiver=candidate.receiver,
                                       group_spec=spec, sites={}, layout=1)
        if isinstance(value, tuple) and value:
            value = value[0]
        return _factor(value, "span") if _known_number(value) else "?"

    def candidates(self) -> tuple[list[_Candidate], list[_Candidate]]:
        """(helpers: take a spec and decide its DCP factor themselves, paths: size groups of a config)."""
        helpers, paths = [], []
        for module in self.program.modules.values():
            for qualname, function, classes in _functions(module):
                spec_params = _spec_roots(function)
                sites = _widen(_sizing_sites(function, module, self.evaluator, {RESOLVER_NAME}), function)
                from_params = any(_site_spec_from_parameter(s, spec_params) for s in sites.values())
                if spec_params and (from_params or _has_dcp_param(function, self.evaluator, module) or function.name == RESOLVER_NAME):
                    helpers.append(_Candidate(module, qualname, function, classes, spec_params, sites))
        self.predicates = []
        for helper in helpers:
            delegates = helper.sites and all(
                isinstance(s, ast.Call) and isinstance(s.func, ast.Name) and s.func.id == RESOLVER_NAME for s in helper.sites.values()
            )
            if delegates and helper.function.name != RESOLVER_NAME:
                continue  # a wrapper of the resolver agrees with it by construction
            factors = tuple(self.factor(helper, kind.spec, as_helper=True) for kind in self.kinds)
            known = {f for f in factors if f != "?"}
            if helper.function.name == RESOLVER_NAME or len(known) > 1:
                self.predicates.append((helper, factors))
        names = {h.function.name for h, _ in self.predicates if not h.classes} | {RESOLVER_NAME}
        helper_ids = {id(h.function) for h in helpers}
        for module in self.program.modules.values():
            for qualname, function, classes in _functions(module):
                if id(function) in helper_ids:
                    continue
                sites = _widen(_sizing_sites(function, module, self.evaluator, names), function)
                if sites:
                    paths.append(_Candidate(module, qualname, function, classes, _spec_roots(function), sites))
        return helpers, paths

    def analyse(self) -> SizingAnalysis:
        _, path_candidates = self.candidates()
        columns: list[SizingPath] = []
        issues: list[Divergence] = []
        resolver_column = None
        for helper, factors in self.predicates:
            is_resolver = helper.function.name == RESOLVER_NAME and not helper.classes
            views = [("group", factors)]
            if is_resolver:
                views.append(("scheduler", tuple(self.factor(helper, k.flattened(), True) for k in self.kinds)))
            column = SizingPath(helper.name, helper.module.path, helper.qualname, helper.function.lineno,
                                "resolver" if is_resolver else "predicate", tuple(views))
            if is_resolver and (resolver_column is None or helper.module.path.startswith("vllm/v1/core/")):
                resolver_column = column
            columns.append(column)
        path_columns: list[tuple[_Candidate, SizingPath]] = []
        gates: list[tuple[_Candidate, ast.IfExp, tuple[str, ...]]] = []
        named = [c for c in path_candidates if c.function.name == SCHEDULER_REFERENCE and not c.classes]
        reference_candidate = next((c for c in named if c.module.path.startswith("vllm/v1/core/")), named[0] if named else None)
        reference = None
        for candidate in path_candidates:
            is_reference = candidate is reference_candidate
            role = "reference" if is_reference else _role(candidate.module, candidate.qualname, candidate.classes, self.program.scheduler_only_paths)
            views = []
            if role in ("worker", "both"):
                views.append(("group", tuple(self.factor(candidate, k.spec, False) for k in self.kinds)))
            if role in ("reference", "scheduler", "both"):
                views.append(("scheduler", tuple(self.factor(candidate, k.flattened(), False) for k in self.kinds)))
            if role == "reference":
                single = tuple(self.single_group_factor(candidate, k.flattened()) for k in self.kinds)
                if set(single) != {"?"}:  # the function may not special-case one group at all
                    views.append(("single-group", single))
            column = SizingPath(candidate.name, candidate.module.path, candidate.qualname, candidate.function.lineno, role, tuple(views))
            path_columns.append((candidate, column))
            if is_reference:
                reference = column
            for gate in _gates(candidate.function, candidate.module, self.evaluator).values():
                sites = {id(gate): gate}
                values = []
                for kind in self.kinds:
                    _, frame = self.run(candidate, kind.spec, False, sites)
                    values.append(_combine([_join(frame.recorded[id(gate)])]) if id(gate) in frame.recorded else "?")
                gates.append((candidate, gate, tuple(values)))
        ordered = sorted((c for _, c in path_columns), key=lambda c: (c is not reference, c.module_path, c.line))
        columns = ([resolver_column] if resolver_column else []) + [c for c in columns if c is not resolver_column]
        columns = ordered[:1] + columns + ordered[1:] if reference is not None else columns + ordered
        scheduler = reference or (
            SizingPath(resolver_column.name, resolver_column.module_path, resolver_column.qualname, resolver_column.line, "reference",
                       (("scheduler", resolver_column.factors("scheduler")),))
            if resolver_column is not None else None
        )
        if scheduler is not None:
            for candidate, column in path_columns:
                if column is not reference:
                    issue = self.divergent_path(candidate, column, scheduler)
                    if issue is not None:
                        issues.append(issue)
        if resolver_column is not None:
            truth_table = resolver_column.factors("group")
            for helper, factors in self.predicates:
                if helper.function.name == RESOLVER_NAME and not helper.classes:
                    continue
                issue = self.divergent_predicate(helper, helper.function, factors, truth_table, resolver_column, None)
                if issue is not None:
                    issues.append(issue)
            for candidate, gate, factors in gates:
                issue = self.divergent_predicate(candidate, gate.test, factors, truth_table, resolver_column, gate)
                if issue is not None:
                    issues.append(issue)
        for candidate, as_helper in [*((h, True) for h, _ in self.predicates), *((c, False) for c, _ in path_columns)]:
            issues.extend(self.first_layer_unwraps(candidate, as_helper))
        return SizingAnalysis(
            kinds=self.kinds,
            paths=tuple(columns),
            divergences=tuple(issues),
            reference=scheduler.name if scheduler is not None else None,
            resolver=resolver_column.name if resolver_column is not None else None,
            source=self.program.source,
        )

    # -- findings -------------------------------------------------------------------------------

    def _pick(self, differing: list[int]) -> tuple[int, bool]:
        """The counterexample to show (a reachable container first) and whether any is reachable."""
        reachable = [i for i in differing if self.kinds[i].rejected_under_dcp is None]
        pool = reachable or differing
        pool = sorted(pool, key=lambda i: (not self.kinds[i].is_container, i))
        return pool[0], bool(reachable)

    def divergent_path(self, candidate: _Candidate, column: SizingPath, scheduler: SizingPath) -> PathDivergence | None:
        reference = scheduler.factors("scheduler")
        differing: dict[int, tuple[str, str]] = {}
        for view, factors in column.views:
            for index, mine in enumerate(factors):
                if index not in differing and _differs(mine, scheduler, index):
                    differing[index] = (view, mine)
        if not differing:
            return None
        index, reachable = self._pick(list(differing))
        view, mine = differing[index]
        kind = self.kinds[index]
        return PathDivergence(
            candidate.module.path, candidate.qualname, candidate.function.lineno,
            path=column.name,
            scheduler=scheduler.name,
            kind=kind.label,
            view=view if kind.is_container else None,
            tokens=_tokens(mine),
            expected_tokens=_tokens(reference[index]),
            dcp=DCP,
            also=tuple(self.kinds[i].label for i in differing if i != index),
            rejected_under_dcp=None if reachable else kind.rejected_under_dcp,
        )

    def divergent_predicate(self, candidate: _Candidate, anchor: ast.AST, factors, truth_table, resolver: SizingPath,
                            gate: ast.IfExp | None) -> PredicateDivergence | None:
        differing = [i for i, (a, b) in enumerate(zip(factors, truth_table)) if "?" not in (a, b) and a != b]
        if not differing:
            return None
        _, reachable = self._pick(differing)
        return PredicateDivergence(
            candidate.module.path, candidate.qualname, anchor.lineno,
            column=candidate.module.column(anchor) if gate is not None else None,
            predicate=candidate.name,
            gate=" ".join(ast.unparse(gate).split()) if gate is not None else None,
            resolver=resolver.name,
            kinds=tuple((self.kinds[i].label, factors[i], truth_table[i]) for i in differing),
            rejected_under_dcp=() if reachable else tuple(sorted({self.kinds[i].rejected_under_dcp for i in differing})),
        )

    def first_layer_unwraps(self, candidate: _Candidate, as_helper: bool) -> list[FirstLayerPick]:
        picks = _first_layer_picks(candidate.function)
        if not picks:
            return []
        layers = [k.spec for k in self.kinds if not k.is_container]
        rejected = {k.spec.cls: k.rejected_under_dcp for k in self.kinds if not k.is_container}
        found: list[tuple[bool, Layer, Layer, str, str]] = []
        cache: dict[tuple, str] = {}

        def answer(spec) -> str:
            if spec not in cache:
                cache[spec] = self.factor(candidate, spec, as_helper)
            return cache[spec]

        for i, first in enumerate(layers):
            for second in layers[i + 1:]:
                a, b = answer(Container((first, second))), answer(Container((second, first)))
                if "?" in (a, b) or a == b:
                    continue
                plausible = self._family(first.cls) == self._family(second.cls) and not (rejected[first.cls] or rejected[second.cls])
                found.append((plausible, first, second, a, b))
        if not found:
            return []
        attention = self.program.hierarchy.attention_family()
        found.sort(key=lambda f: (not f[0], not (f[1].cls in attention and f[2].cls in attention)))
        plausible, first, second, a, b = found[0]
        return [
            FirstLayerPick(candidate.module.path, candidate.qualname, pick.lineno, candidate.module.column(pick),
                           function=candidate.name, first=first.cls, second=second.cls, answer=a, reversed_answer=b,
                           plausible=plausible)
            for pick in picks
        ]

    def _family(self, cls: str) -> str:
        """The class right below the root (or right below AttentionSpec) that `cls` descends from."""
        bases = self.program.hierarchy.bases
        roots = {name for name, own in bases.items() if not any(b in bases for b in own)}
        for name in self.program.mro(cls):
            if any(b == ATTENTION_ROOT or b in roots for b in bases.get(name, ())):
                return name
        return cls


def _differs(mine: str, scheduler: SizingPath, index: int) -> bool:
    """Whether `mine` matches none of the scheduler's known answers for this kind (one per layout)."""
    theirs = {factors[index] for _, factors in scheduler.views} - {"?"}
    return mine != "?" and bool(theirs) and mine not in theirs


def _tokens(factor: str) -> str:
    return {"dcp": str(BLOCK_SIZE * DCP), "1": str(BLOCK_SIZE)}.get(factor, "?")


def analyse_program(program: Program) -> SizingAnalysis:
    return _Analyser(program).analyse()
