"""The shapes of constructor code the census reads (kvlint.analysis.census.instantiation): platform tests
decided for the default platform, branches on the layer's position, class-body bindings, `self.<attribute>`
assignments, `super().__init__`."""

from __future__ import annotations

import ast
import weakref
from collections import Counter

from kvlint.analysis.ast_helpers import nodes_under, shape, walk
from kvlint.analysis.census.skeletons import method_of

# `current_platform.is_X()` on the default platform (CUDA): what vLLM's own CI and most users run.
_DEFAULT_PLATFORM = {"is_cuda": True, "is_cuda_alike": True}
_OTHER_PLATFORMS = ("is_rocm", "is_cpu", "is_xpu", "is_tpu", "is_hpu", "is_neuron", "is_out_of_tree")


def platform_test(test: ast.expr) -> bool | None:
    """The value of a test on the default platform; None when it is not a platform test (a config's)."""
    if isinstance(test, ast.Name) and test.id == "TYPE_CHECKING":
        return False
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = platform_test(test.operand)
        return None if inner is None else not inner
    if isinstance(test, ast.BoolOp):
        values = [platform_test(value) for value in test.values]
        if isinstance(test.op, ast.Or):
            return True if True in values else (False if all(v is False for v in values) else None)
        return False if False in values else (True if all(v is True for v in values) else None)
    if isinstance(test, ast.Call) and isinstance(test.func, ast.Attribute) and not test.args:
        receiver = test.func.value
        name = receiver.id if isinstance(receiver, ast.Name) else getattr(receiver, "attr", "")
        if name == "current_platform":
            method = test.func.attr
            if method in _DEFAULT_PLATFORM:
                return _DEFAULT_PLATFORM[method]
            if method in _OTHER_PLATFORMS:
                return False
    return None


def method(cls: ast.ClassDef, name: str) -> ast.FunctionDef | None:
    """The class's own method `name` (parsed now when the class was parsed without it: census.skeletons)."""
    index = next((i for i, s in enumerate(cls.body) if isinstance(s, ast.FunctionDef) and s.name == name), None)
    return method_of(cls, index) if index is not None else None


def site(relative: str, node: ast.AST) -> str:
    return f"{relative}:{getattr(node, 'lineno', 0)}"


def class_binding(statement: ast.stmt, name: str) -> ast.expr | None:
    """The value a class-body statement binds to `name` (`model_cls = DeepseekV2Model`), else None."""
    if isinstance(statement, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in statement.targets):
        return statement.value
    if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
        return statement.value if statement.target.id == name else None
    return None


def assigns_self_attribute(cls: ast.ClassDef, name: str) -> bool:
    """Whether the class's constructor assigns `self.<name> = …`."""
    init = method(cls, "__init__")
    return init is not None and name in self_assignments(init)


# Per constructor: `self.<x>` → the values it is assigned, read in one walk (asked once per attribute a model's
# code reads, and per test of a constant argument: one walk per question would be quadratic in its size).
_ASSIGNED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def self_assignments(init: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, list[ast.expr]]:
    found = _ASSIGNED.get(init)
    if found is None:
        found = {}
        for statement in walk(init):
            if isinstance(statement, ast.Assign):
                for target in statement.targets:
                    if _self_attribute(target) is not None:
                        found.setdefault(target.attr, []).append(statement.value)  # type: ignore[attr-defined]
        _ASSIGNED[init] = found
    return found


# The mark of a parameter (in a constructor's `passed`) whose caller gave it a value read from the layer's
# position (`layer_type=config.layer_types[extract_layer_index(prefix)]`): the value differs layer by layer.
PER_LAYER = "@layer"


def per_layer_test(test: ast.expr, positions: frozenset[str]) -> bool:
    """Whether a branch test reads the position of the layer being built (`positions`: position_names, where
    `self.x` stands for an attribute the constructor set from one)."""
    return any(
        (isinstance(n, ast.Name) and n.id in positions) or (_self_attribute(n) or "") in positions for n in walk(test)
    )


def _self_attribute(node: ast.AST) -> str | None:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return f"self.{node.attr}"
    return None


def position_names(
    function: ast.FunctionDef | ast.AsyncFunctionDef, passed: frozenset[str] = frozenset(), seeds=frozenset()
) -> frozenset[str]:
    """The names of a function that hold the position of the layer being built — its `prefix` parameter
    (vLLM hands every module its dotted name, which ends in its layer index: `make_layers` builds each layer
    with its own) or a loop variable — and its locals assigned from them (`layer_id = int(prefix.split(".")
    [-1])`; `is_sparse = layer_id in sparse_ids`). A branch on one goes both ways within one model (MiniMax-M3's
    first layers dense, the rest sparse), unlike a config branch."""
    arguments = function.args
    given = {name.removesuffix(PER_LAYER) for name in passed if name.endswith(PER_LAYER)}
    derived = {a.arg for a in [*arguments.args, *arguments.kwonlyargs] if a.arg == "prefix" or a.arg in given}
    derived |= seeds  # names the function's caller knows hold the position (`self.x` its constructor set)
    loop_names, readers = _position_reads(function)
    derived |= loop_names
    pending = list(derived)
    while pending:  # each name once: what the assignments reading it bind holds the position too
        for targets in readers.get(pending.pop(), ()):
            new = targets - derived
            pending.extend(new)
            derived |= new
    return frozenset(derived)


# Per function: what position_names reads of its body, the same whatever its callers pass (the census asks
# once per constructor and set of passed parameters; weak keys: the trees go with their scan).
_READS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _position_reads(
    function: ast.FunctionDef | ast.AsyncFunctionDef,
) -> tuple[set[str], dict[str, list[set[str]]]]:
    """(the function's loop variables, name → the names each assignment reading it binds), in one walk of the
    function (each assignment's value walked once, apart, for what it reads)."""
    found = _READS.get(function)
    if found is not None:
        return found
    loop_names: set[str] = set()
    # Per assignment: the names it binds, what its value reads, the tests of the `if`s it is under.
    assignments: list[tuple[set[str], set[str], tuple[set[str], ...]]] = []
    pending: list[tuple[ast.AST, tuple[set[str], ...]]] = [(function, ())]
    while pending:
        node, tests = pending.pop()
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = {n.id for t in targets for n in _bound(t)} | {a for t in targets if (a := _self_attribute(t))}
            reads, inner = _value_reads(node.value)
            loop_names |= inner
            assignments.append((names, reads, tests))
            pending.extend((t, tests) for t in targets)  # an annotation is not run: no loop of its own
            continue
        if isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            loop_names.update(n.id for n in nodes_under(node.target) if isinstance(n, ast.Name))
        if isinstance(node, ast.If):
            test = {n.id for n in nodes_under(node.test) if isinstance(n, ast.Name)}
            test |= {a for n in nodes_under(node.test) if (a := _self_attribute(n))}
            pending.append((node.test, tests))
            inside = (*tests, test)
            pending.extend((statement, inside) for statement in node.body + node.orelse)
            continue
        for field in node._fields:
            value = getattr(node, field, None)
            if isinstance(value, list):
                pending.extend((item, tests) for item in value if isinstance(item, ast.AST))
            elif isinstance(value, ast.AST):
                pending.append((value, tests))
    assigned = [(names, reads) for names, reads, _ in assignments]
    # A name assigned more than once, once under an `if`, holds what the test chose (Cohere2-MoE: `self.
    # sliding_window = None`, then set only when the layer's type, read from its position, is sliding); one
    # assigned once under it (a local the branch needs) holds the same in every layer that has it.
    again = Counter(name for names, _ in assigned for name in names)
    for names, _, tests in assignments:
        assigned.extend(({name for name in names if again[name] > 1}, test) for test in tests)
    readers: dict[str, list[set[str]]] = {}
    for names, reads in assigned:
        for read in reads:
            readers.setdefault(read, []).append(names)
    _READS[function] = loop_names, readers
    return loop_names, readers


def _value_reads(value: ast.expr) -> tuple[set[str], set[str]]:
    """(what an assigned value reads: names and `self.x` attributes, a comprehension's own variables aside —
    `all(d == 0 for d in dims)` is one value; those variables)."""
    nodes = nodes_under(value)
    inner = {
        n.id
        for c in nodes
        if isinstance(c, ast.comprehension)
        for n in nodes_under(c.target)
        if isinstance(n, ast.Name)
    }
    reads = {n.id for n in nodes if isinstance(n, ast.Name)} | {a for n in nodes if (a := _self_attribute(n))}
    return reads - inner, inner


def _bound(target: ast.expr) -> list[ast.Name]:
    """The names an assignment target binds: `a`, `a, b` — not `self` of `self.x = …`."""
    if isinstance(target, ast.Name):
        return [target]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for element in target.elts for n in _bound(element)]
    if isinstance(target, ast.Starred):
        return _bound(target.value)
    return []


def bases_nearest_first(resolve_expr, module: str, cls: ast.ClassDef, limit: int) -> list[tuple[str, ast.ClassDef]]:
    """The class and its bases the tree defines, nearest first (breadth first: enough for the single
    chains models use)."""
    order: list[tuple[str, ast.ClassDef]] = []
    pending = [(module, cls)]
    seen: set[tuple[str, str]] = set()
    while pending and len(seen) <= limit:
        module, cls = pending.pop(0)
        if (module, cls.name) in seen:
            continue
        seen.add((module, cls.name))
        order.append((module, cls))
        for base in cls.bases:
            found = resolve_expr(module, base)
            if found is not None and found[1] == "class":
                pending.append((found[0], found[2]))  # type: ignore[arg-type]
    return order


def passed_parameters(
    call: ast.Call, init: ast.FunctionDef | ast.AsyncFunctionDef | None, positions: frozenset[str] = frozenset()
) -> frozenset[str]:
    """The parameters of a constructor (`self` first) that a call gives a value, `None` aside: by keyword,
    or by position where the constructor is known; each given a value read from `positions` (the caller's
    position_names) once more, marked PER_LAYER."""
    given = [(k.arg, k.value) for k in call.keywords if k.arg and not _is_none(k.value)]
    if init is not None:
        names = [a.arg for a in [*init.args.posonlyargs, *init.args.args]][1:]
        for index, argument in enumerate(call.args):
            if isinstance(argument, ast.Starred) or index >= len(names):
                break
            if not _is_none(argument):
                given.append((names[index], argument))
    passed = {name for name, _ in given}
    passed |= {name + PER_LAYER for name, value in given if positions and per_layer_test(value, positions)}
    return frozenset(passed)


# Per constructor: its `super().__init__(…)` call, found once (asked per class built, per model: a walk each time).
_SUPER_CALLS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def super_init_call(init: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.Call | None:
    """The constructor's `super().__init__(…)` call, if it makes one."""
    if init not in _SUPER_CALLS:
        _SUPER_CALLS[init] = next((node for node in walk(init) if _calls_super_init(node)), None)
    return _SUPER_CALLS[init]


def _calls_super_init(node: ast.AST) -> bool:
    function = node.func if isinstance(node, ast.Call) else None
    return isinstance(function, ast.Attribute) and function.attr == "__init__" and _is_super(function.value)


def _is_super(node: ast.expr) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"


def constructor_bases(resolve_expr, relative: str, cls: ast.ClassDef, upward: ast.Call | None):
    """(module, base) for each base whose constructor `super().__init__` runs: the class's own; for
    `super(B, self)`, the classes after B in the method resolution order — the bases listed after B, then B's
    own (`super(Qwen3NextDecoderLayer, self).__init__()` skips Qwen3NextDecoderLayer's constructor and the
    layers it builds; `class CausalMixin(VllmModelForTextGeneration, Base)` reaches Base's)."""
    start = upward.func.value.args[0] if upward is not None and upward.func.value.args else None  # type: ignore[attr-defined]
    found = resolve_expr(relative, start) if start is not None else None
    if found is None or found[1] != "class" or found[2] is cls:
        return [(relative, base) for base in cls.bases]
    listed = [resolve_expr(relative, base) for base in cls.bases]
    after = next((i + 1 for i, b in enumerate(listed) if b is not None and b[2] is found[2]), 0)
    return [(relative, base) for base in cls.bases[after:]] + [(found[0], base) for base in found[2].bases]


def parameter_default(function: ast.FunctionDef | ast.AsyncFunctionDef | None, name: str) -> ast.expr | None:
    """The default value of `function`'s parameter `name` (`decoder_layer_type: type = Qwen3MoeDecoderLayer`),
    or None: what a call of that parameter builds when the callers hand it on unchanged."""
    if function is None:
        return None
    arguments = function.args
    positional = [*arguments.posonlyargs, *arguments.args]
    pairs = list(zip(positional[len(positional) - len(arguments.defaults) :], arguments.defaults))
    pairs += [(a, d) for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults) if d is not None]
    return next((default for argument, default in pairs if argument.arg == name), None)


def given_or_default(node: ast.expr, passed: frozenset[str]) -> ast.expr | None:
    """For `<parameter> or <default>` where the caller gave the parameter a value: the parameter (what the
    caller built was counted at its call; the default is never read). None otherwise."""
    if (
        isinstance(node, ast.BoolOp)
        and isinstance(node.op, ast.Or)
        and isinstance(node.values[0], ast.Name)
        and node.values[0].id in passed
    ):
        return node.values[0]
    return None


def _is_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def instance_class(node: ast.expr) -> bool:
    """`type(self)` or `self.__class__`: the class of the instance being built (`type(self).indexer_cls(…)`
    reads the class attribute as `self.indexer_cls(…)` does)."""
    if isinstance(node, ast.Attribute):
        return node.attr == "__class__" and isinstance(node.value, ast.Name) and node.value.id == "self"
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "type"
        and len(node.args) == 1
        and isinstance(node.args[0], ast.Name)
        and node.args[0].id == "self"
    )


def given_per_layer(passed: frozenset[str]) -> bool:
    """Whether a call gives a constructor an argument read from the layer's position, its `prefix` aside
    (every module is handed its own dotted name; that alone configures no layer apart from the others)."""
    return any(name.endswith(PER_LAYER) and name != "prefix" + PER_LAYER for name in passed)


# Per function: its locals' first plain assignments, read in one walk (a function of many calls asks often).
_LOCALS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def local_value(function: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> ast.expr | None:
    """The value a plain assignment in `function` binds to the local `name` (`attn_cls = A if … else B`; the
    first one), or None."""
    found = _LOCALS.get(function)
    if found is None:
        found = {}
        for node in walk(function):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        found.setdefault(target.id, node.value)
        _LOCALS[function] = found
    return found.get(name)


def per_layer_call(call: ast.Call, positions: frozenset[str]) -> bool:
    """Whether a call passes an argument read from the layer's position, its `prefix` aside."""
    given = [*call.args, *(k.value for k in call.keywords if k.arg != "prefix")]
    return bool(positions) and any(per_layer_test(value, positions) for value in given)


def differing_keywords(body: list[ast.stmt], orelse: list[ast.stmt]) -> frozenset[tuple[object, str]]:
    """(callee, keyword) for each keyword that the calls of one callee in the two ways of an `if` give apart
    values (MiMo-V2: `MiMoV2Attention(sliding_window_size=config.sliding_window_size)` on its compressed-softmax
    layers, `=-1` on the others): the branch chooses that value, so it is per layer when the branch is."""
    left, right = _keyword_values(body), _keyword_values(orelse)
    differ: set[tuple[object, str]] = set()
    for callee in left.keys() & right.keys():
        for one in left[callee]:
            for other in right[callee]:
                differ |= {(callee, k) for k in one.keys() | other.keys() if one.get(k) != other.get(k)}
    return frozenset(differ)


def _keyword_values(statements: list[ast.stmt]) -> dict[object, list[dict[str, object]]]:
    found: dict[object, list[dict[str, object]]] = {}
    for statement in statements:
        for node in walk(statement):
            if isinstance(node, ast.Call):
                values = {k.arg: shape(k.value) for k in node.keywords if k.arg}
                found.setdefault(shape(node.func), []).append(values)
    return found


def self_methods_called(test: ast.expr) -> list[str]:
    """The names of the instance's methods a test calls (`self.is_compressed_softmax_layer()`)."""
    return [n.func.attr for n in walk(test) if isinstance(n, ast.Call) and _self_attribute(n.func)]


def returned_values(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.expr]:
    return [n.value for n in walk(function) if isinstance(n, ast.Return) and n.value is not None]
