"""Evaluate the tree's own sizing code over abstract values (never imported).

A small abstract interpreter over stdlib `ast`: it runs a function's body with a spec *kind* bound to
its spec (a layer spec of one class of the tree's hierarchy, or a `UniformTypeKVCacheSpecs` container of
such layers), the DCP size bound to `DCP` and every block size to `BLOCK_SIZE`. It understands what the
sizing code in vLLM is made of — isinstance / `type(...) is` against the parsed hierarchy, boolean logic,
all/any over unwrapped layers, `next(iter(...))` picks, attribute defaults, properties, `__post_init__`
assignments, calls to the tree's own helpers — and answers UNKNOWN for anything else, never a guess.

Statements are run by kvlint.analysis.sizing.statements, builtins by .builtins, spec attributes and
methods by .spec_members; each expression kind has its method here, chosen by a table.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from kvlint.analysis.ast_helpers import dotted
from kvlint.analysis.sizing import builtins, statements
from kvlint.analysis.sizing.frame import Frame
from kvlint.analysis.sizing.program import Module, Program
from kvlint.analysis.sizing.spec_members import SpecMembers
from kvlint.analysis.sizing.values import (
    BLOCK_SIZE,
    DCP,
    UNKNOWN,
    Bound,
    ClassRef,
    Container,
    Function,
    Group,
    Groups,
    Iter,
    Layer,
    LayerDict,
    Opaque,
    Seq,
    compare,
    iterated,
    join,
    known_number,
    same,
    truth,
)
from kvlint.analysis.vocabulary import INTERFACE_MODULE, is_dcp_name

MAX_DEPTH = 12  # nested calls; deeper ones are UNKNOWN
MAX_CALLS_PER_RUN = 1000  # an outside call and those nested in it, then UNKNOWN (fanned-out helpers: 3^10); vLLM: 21

_EMPTY_MODULE = Module("<none>", ast.Module(body=[], type_ignores=[]), "")


class Evaluator:
    def __init__(self, program: Program, dcp: int = DCP, block_size: int = BLOCK_SIZE):
        self.program = program
        self.dcp = dcp
        self.block_size = block_size
        self.depth = 0
        self.members = SpecMembers(self)

    # -- calls ----------------------------------------------------------------------------------

    def call(
        self,
        module: Module,
        function: ast.FunctionDef,
        args: list,
        keywords: dict | None = None,
        receiver=None,
        group_spec=None,
        sites: dict[int, ast.AST] | None = None,
        layout: int | None = None,
    ) -> tuple[object, Frame]:
        """Run `function`; returns (its value, the frame with the values recorded at `sites`)."""
        frame = Frame(module, group_spec, sites, layout)
        self.calls = 1 if self.depth == 0 else self.calls + 1
        if self.depth >= MAX_DEPTH or self.calls > MAX_CALLS_PER_RUN:
            return UNKNOWN, frame
        self.depth += 1
        try:
            env = self.bind(function, args, keywords or {}, receiver, frame)
            end = self.block(function.body, env, frame)
            if end is not None:
                frame.returns.append(None)
            return join(frame.returns), frame
        except RecursionError:
            return UNKNOWN, frame
        finally:
            self.depth -= 1

    def bind(self, function: ast.FunctionDef, args: list, keywords: dict, receiver, frame: Frame) -> dict:
        """The environment a call starts with: arguments, keywords, DCP sizes, defaults, else opaque."""
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

    def parameter_value(self, name: str, frame: Frame):
        if self.is_dcp_name(name, frame.module):
            return self.dcp
        return Opaque(name)

    def is_dcp_name(self, name: str, module: Module | None) -> bool:
        return is_dcp_name(name, module.dcp_aliases if module is not None else frozenset())

    def interface_module(self) -> Module | None:
        """Where spec class bodies run: the spec interface (else any module, for a lone file)."""
        return self.program.modules.get(INTERFACE_MODULE) or next(iter(self.program.modules.values()), None)

    def eval_detached(self, node: ast.expr):
        """An expression of a class body (an attribute default), in no function's environment."""
        return self.eval(node, {}, Frame(self.interface_module() or _EMPTY_MODULE))

    # -- statements -----------------------------------------------------------------------------

    def block(self, body: list[ast.stmt], env: dict, frame: Frame) -> dict | None:
        """Run statements; the environment afterwards, or None when every path returned or raised."""
        for statement in body:
            env = statements.run(self, statement, env, frame)
            if env is None:
                return None
        return env

    def assign(self, target: ast.expr, value, env: dict) -> None:
        name = dotted(target)
        if name is not None:
            env[name] = value
            return
        if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, tuple) and len(value) == len(target.elts):
            for element, item in zip(target.elts, value):
                self.assign(element, item, env)
            return
        for child in ast.walk(target):
            if isinstance(child, ast.Name):
                env[child.id] = UNKNOWN

    # -- expressions ----------------------------------------------------------------------------

    def eval(self, node: ast.expr | None, env: dict, frame: Frame):
        if node is None:
            return None
        handler = _EXPRESSIONS.get(type(node))
        if handler is not None:
            value = handler(self, node, env, frame)
        else:
            for child in ast.iter_child_nodes(node):  # reach sites nested in anything else
                if isinstance(child, ast.expr):
                    self.eval(child, env, frame)
            value = UNKNOWN
        frame.record(node, value)
        return value

    def _constant(self, node: ast.Constant, env: dict, frame: Frame):
        return node.value

    def _name(self, node: ast.Name, env: dict, frame: Frame):
        name = node.id
        frame.read(name)
        if name in env:
            return env[name]
        if name in self.program.hierarchy.bases:
            return ClassRef(frozenset({name}))
        if self.is_dcp_name(name, frame.module):
            return self.dcp
        if self.program.function(name, frame.module.path) is not None:
            return Function(name)
        if name in ("True", "False", "None"):
            return {"True": True, "False": False, "None": None}[name]
        return Opaque(name)

    def _attribute(self, node: ast.Attribute, env: dict, frame: Frame):
        whole = dotted(node)
        if whole is not None and whole in env:
            return env[whole]
        base = self.eval(node.value, env, frame)
        attr = node.attr
        if isinstance(base, (Layer, Container)):
            return self.members.attribute(base, attr)
        if isinstance(base, Group):
            return base.spec if attr == "kv_cache_spec" else UNKNOWN
        if isinstance(base, LayerDict) and attr in ("values", "keys", "items"):
            return Bound(base, attr)
        if isinstance(base, Opaque) or base is UNKNOWN:
            return self._attribute_of_unknown(base, attr, frame)
        return UNKNOWN

    def _attribute_of_unknown(self, base, attr: str, frame: Frame):
        """`X.kv_cache_groups`, `X.kv_cache_spec`, a DCP size or a single group's block size; else followed by name."""
        if attr == "kv_cache_groups" and frame.group_spec is not None:
            return Groups(frame.group_spec)
        if attr == "kv_cache_spec" and frame.group_spec is not None:
            return frame.group_spec
        if self.is_dcp_name(attr, frame.module):
            return self.dcp
        if attr == "block_size" and frame.layout == 1 and base is not UNKNOWN and base.name.endswith("cache_config"):
            return self.block_size
        if isinstance(base, Opaque):
            return Opaque(f"{base.name}.{attr}")
        return UNKNOWN

    def _subscript(self, node: ast.Subscript, env: dict, frame: Frame):
        base = self.eval(node.value, env, frame)
        key = self.eval(node.slice, env, frame)
        if isinstance(base, Groups):
            return Group(base.spec)
        if isinstance(base, LayerDict):
            return base.layers[0] if len(set(base.layers)) == 1 else UNKNOWN
        if isinstance(base, (tuple, Seq)) and known_number(key):
            items = base if isinstance(base, tuple) else base.items
            return items[key] if -len(items) <= key < len(items) else UNKNOWN
        if isinstance(base, Opaque) and base.name.endswith("kv_cache_groups") and frame.group_spec is not None:
            return Group(frame.group_spec)
        return UNKNOWN

    def _boolop(self, node: ast.BoolOp, env: dict, frame: Frame):
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

    def _unaryop(self, node: ast.UnaryOp, env: dict, frame: Frame):
        operand = self.eval(node.operand, env, frame)
        if isinstance(node.op, ast.Not):
            decided = truth(operand)
            return UNKNOWN if decided is None else not decided
        if isinstance(node.op, ast.USub) and known_number(operand):
            return -operand
        return UNKNOWN

    def _compare(self, node: ast.Compare, env: dict, frame: Frame):
        left = self.eval(node.left, env, frame)
        result = True
        for op, right_node in zip(node.ops, node.comparators):
            right = self.eval(right_node, env, frame)
            outcome = compare(op, left, right)
            if outcome is None:
                result = UNKNOWN if result is not False else False
            elif outcome is False:
                result = False
            left = right
        return result

    def _ifexp(self, node: ast.IfExp, env: dict, frame: Frame):
        decided = truth(self.eval(node.test, env, frame))
        if decided is True:
            return self.eval(node.body, env, frame)
        if decided is False:
            return self.eval(node.orelse, env, frame)
        body, orelse = self.eval(node.body, env, frame), self.eval(node.orelse, env, frame)
        return body if same(body, orelse) else UNKNOWN

    def _binop_expression(self, node: ast.BinOp, env: dict, frame: Frame):
        return self.binop(node.op, self.eval(node.left, env, frame), self.eval(node.right, env, frame))

    def binop(self, op: ast.operator, left, right):
        if isinstance(left, ClassRef) and isinstance(right, ClassRef) and isinstance(op, ast.BitOr):
            return ClassRef(left.names | right.names)
        if not (known_number(left) and known_number(right)):
            return UNKNOWN
        operation = _ARITHMETIC.get(type(op))
        try:
            return operation(left, right) if operation is not None else UNKNOWN
        except ZeroDivisionError:
            return UNKNOWN

    def _sequence(self, node: ast.Tuple | ast.List, env: dict, frame: Frame):
        return tuple(self.eval(e, env, frame) for e in node.elts)

    def _comprehension_expression(self, node: ast.GeneratorExp | ast.ListComp | ast.SetComp, env: dict, frame: Frame):
        items = self.comprehension(node, env, frame)
        if items is None:
            return UNKNOWN
        return Seq(tuple(items)) if isinstance(node, ast.ListComp) else Iter(tuple(items))

    def _named(self, node: ast.NamedExpr, env: dict, frame: Frame):
        value = self.eval(node.value, env, frame)
        env[node.target.id] = value
        return value

    def items(self, value) -> list:
        """The elements iterating `value` yields; [] when unknown."""
        return iterated(value)

    def comprehension(self, node, env: dict, frame: Frame) -> list | None:
        """Element values, or None when the iteration is not exactly known (sites are still reached)."""
        results: list = []
        return results if self._generate(node, 0, dict(env), frame, results) else None

    def _generate(self, node, index: int, scope: dict, frame: Frame, results: list) -> bool:
        """Appends the elements the generators from `index` on give; False where their iteration is not exactly
        known. (A method: a nested function calling itself is a reference cycle, and the collector is paused.)"""
        if index == len(node.generators):
            results.append(self.eval(node.elt, scope, frame))
            return True
        exact = True
        generator = node.generators[index]
        iterable = self.eval(generator.iter, scope, frame)
        items = self.items(iterable)
        if isinstance(iterable, Groups) or not items:
            exact = False  # one representative group, or nothing known
            items = items or [UNKNOWN]
        for item in items:
            inner = dict(scope)
            self.assign(generator.target, item, inner)
            keep = True
            for condition in generator.ifs:
                decided = truth(self.eval(condition, inner, frame))
                if decided is False:
                    keep = False
                elif decided is None:
                    exact = False
            if keep:
                exact = self._generate(node, index + 1, inner, frame, results) and exact
        return exact

    def _call(self, node: ast.Call, env: dict, frame: Frame):
        func = node.func
        if isinstance(func, ast.Name) and func.id not in env:
            special = builtins.call(self, func.id, node.args, env, frame)
            if special is not NotImplemented:
                return special
        callee = self.eval(func, env, frame)
        args = [self.eval(a.value if isinstance(a, ast.Starred) else a, env, frame) for a in node.args]
        keywords = {k.arg: self.eval(k.value, env, frame) for k in node.keywords if k.arg is not None}
        for k in node.keywords:
            if k.arg is None:
                self.eval(k.value, env, frame)
        if isinstance(callee, Bound):
            receiver = callee.receiver
            if isinstance(receiver, LayerDict):
                return Seq(receiver.layers) if callee.method == "values" else UNKNOWN
            return self.members.call_method(receiver, callee.method, args, keywords)
        if isinstance(callee, Function):
            found = self.program.function(callee.name, frame.module.path)
            if found is None:
                return UNKNOWN
            value, _ = self.call(found[0], found[1], args, keywords, group_spec=frame.group_spec)
            return value
        if isinstance(func, ast.Attribute) and func.attr == "__setattr__" and len(args) == 3:
            if isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
                frame.setattrs.setdefault(node.args[1].value, []).append(args[2])
        return UNKNOWN


_ExpressionHandler = Callable[[Evaluator, ast.expr, dict, Frame], object]
_EXPRESSIONS: dict[type, _ExpressionHandler] = {
    ast.Constant: Evaluator._constant,
    ast.Name: Evaluator._name,
    ast.Attribute: Evaluator._attribute,
    ast.Call: Evaluator._call,
    ast.BoolOp: Evaluator._boolop,
    ast.UnaryOp: Evaluator._unaryop,
    ast.Compare: Evaluator._compare,
    ast.IfExp: Evaluator._ifexp,
    ast.BinOp: Evaluator._binop_expression,
    ast.Tuple: Evaluator._sequence,
    ast.List: Evaluator._sequence,
    ast.Subscript: Evaluator._subscript,
    ast.GeneratorExp: Evaluator._comprehension_expression,
    ast.ListComp: Evaluator._comprehension_expression,
    ast.SetComp: Evaluator._comprehension_expression,
    ast.NamedExpr: Evaluator._named,
}

_ARITHMETIC: dict[type, Callable[[int, int], int]] = {
    ast.Mult: lambda a, b: a * b,
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b,
}
