"""Which layer classes a model's constructor builds, read with `ast` and followed through the tree's own code.

From the registry's model class: its `__init__` (its bases' through `super().__init__`), the methods it calls
on `self`, the classes it constructs (their constructors in turn: `MultiHeadLatentAttentionWrapper` builds its
`MLAAttention`), the tree's functions it calls (factories, `make_layers`' layer function), lambdas, nested
functions and the module-level values it reads (a hybrid's dict of layer types). An import adds nothing. A class
or function none of whose words can lead to a layer class is neither parsed nor followed (may_build).

Branches make *alternatives*, not a union: `if c: A() else: B()` builds {A} or {B}. A platform check is
decided for the default platform (`is_rocm()` False, `is_cuda()` True, `TYPE_CHECKING` False). Too many
alternatives collapse into their union, marked `merged`: their compositions are only possible.
A class picked through `self` (`self.model_cls(...)`, a class attribute a subclass may rebind) is the instance
class's binding, through its bases; an instance attribute wins. A branch on the layer's position
(constructor_shapes.position_names) goes both ways within one model.
"""

from __future__ import annotations

import ast

from kvlint.analysis.ast_helpers import shape
from kvlint.analysis.census.budget import Budget, BudgetExceeded
from kvlint.analysis.census.built import NOTHING as _NOTHING
from kvlint.analysis.census.built import Built, layer_built, referenced, varied_by_call
from kvlint.analysis.census.built import either as _either
from kvlint.analysis.census.built import product as _product
from kvlint.analysis.census.constant_arguments import UNKNOWN_ARGUMENTS, constant_arguments, decide
from kvlint.analysis.census.constructor_shapes import (
    PER_LAYER,
    assigns_self_attribute,
    bases_nearest_first,
    class_binding,
    constructor_bases,
    differing_keywords,
    given_or_default,
    instance_class,
    local_value,
    method,
    parameter_default,
    passed_parameters,
    per_layer_call,
    per_layer_test,
    platform_test,
    position_names,
    returned_values,
    self_methods_called,
    site,
    super_init_call,
)
from kvlint.analysis.census.may_build import LayerReach
from kvlint.analysis.census.parsing import ModuleTrees
from kvlint.analysis.census.resolution import Resolver
from kvlint.analysis.census.spec_branches import SpecBranching
from kvlint.analysis.census.spec_parameters import SpecCalls

# Constructors and functions followed inside one another: vLLM's deepest is about ten (model, decoder layer,
# attention, wrapper, layer); a crafted chain past this is "incomplete", never a crash of the recursion.
_MAX_DEPTH = 100
_NOT_BUILT = ("isinstance", "issubclass", "type", "cast", "super", "getattr", "hasattr")


class Program(Resolver):
    """The layer classes the tree's constructors build, read from its modules (resolution.Resolver)."""

    def __init__(self, texts: dict[str, bytes], layers: dict, budget: Budget, trees: ModuleTrees | None = None):
        """`layers`: each layer class's name → how its spec is chosen (spec_branches.SpecBranching, or None)."""
        super().__init__(texts, budget, trees)
        self.layers: dict[str, SpecBranching | None] = layers if isinstance(layers, dict) else dict.fromkeys(layers)
        self._spec_calls = SpecCalls(self.layers)
        self._reach = LayerReach(self.layers)
        self._built: dict[tuple[str, ...], Built] = {}
        self._nothing: dict[tuple[str, ...], bool] = {}  # _builds_nothing's answers
        self._busy: set[tuple[str, ...]] = set()
        # The instance whose constructor is followed (module, class): `self.<attribute>` is looked up there.
        self._instances: list[tuple[str, ast.ClassDef]] = []
        self._functions: list[ast.FunctionDef | ast.AsyncFunctionDef] = []  # followed, innermost last
        self._position_names: dict[tuple[int, frozenset[str]], tuple[ast.AST, frozenset[str]]] = {}
        # The parameters each constructor being followed was given a value (innermost last).
        self._passed: list[frozenset[str]] = []
        # Per enclosing `if`: (callee's shape, keyword) given apart values (constructor_shapes.differing_keywords).
        self._apart: list[frozenset[tuple[object, str]]] = []

    def of_class(self, relative: str, cls: ast.ClassDef, site: str = "", passed: frozenset[str] | None = None) -> Built:
        """The layer classes an instance of `cls` builds: itself when it is a layer (built at `site`, the
        "module:line" that names it; `passed`: what its call gives, None for a class only named), and its
        constructor's."""
        own = _NOTHING
        if cls.name in self.layers:
            apart, specs = self._spec_calls.choice(self.resolve_expr, relative, cls, passed)
            own = layer_built(cls.name, site or f"{relative}:{cls.lineno}", apart, specs)
        self._instances.append((relative, cls))
        try:
            return _product(own, self._constructor(relative, cls, UNKNOWN_ARGUMENTS if passed is None else passed))
        finally:
            self._instances.pop()

    def _constructor(self, relative: str, cls: ast.ClassDef, passed: frozenset[str] = frozenset()) -> Built:
        """`passed`: the constructor's parameters its caller gave a value (`layer_types or DEFAULTS` reads only
        the caller's then)."""
        init = method(cls, "__init__")
        # What a constructor builds may depend on the instance's class (a subclass binds `self.<attribute>`
        # otherwise), its own or a base's: keyed by both.
        instance = self._instances[-1] if self._instances else (relative, cls)
        key = (relative, cls.name, "__init__", f"{instance[0]}:{instance[1].name}", ",".join(sorted(passed)))
        if key in self._built:
            return self._built[key]
        if key in self._busy:
            return _NOTHING
        self._enter(key, relative)
        built = _NOTHING
        if init is not None:
            self._passed.append(passed)
            try:
                built = self._within(init, lambda: self._body(relative, init.body, cls))
            finally:
                self._passed.pop()
        upward = super_init_call(init) if init is not None else None
        if init is None or upward is not None:
            for where, base in constructor_bases(self.resolve_expr, relative, cls, upward):
                found = self.resolve_expr(where, base)
                if found is not None and found[1] == "class":
                    # What the base's constructor is given: the same call's arguments, or its `super().__init__`'s.
                    base_init = method(found[2], "__init__")  # type: ignore[arg-type]
                    given = passed if upward is None else passed_parameters(upward, base_init)
                    given = given if upward is None else given | constant_arguments(upward, base_init)
                    built = _product(built, self._constructor(found[0], found[2], given))  # type: ignore[arg-type]
        self._busy.discard(key)
        self._built[key] = built
        return built

    def _instance_attribute(self, name: str) -> Built:
        """What calling `self.<name>` builds when `name` is a class attribute of the instance's class or one
        of its bases (the nearest binding, as Python's lookup): the value it is bound to, evaluated in the
        module that binds it."""
        if not self._instances:
            return _NOTHING
        mro = bases_nearest_first(self.resolve_expr, *self._instances[-1], _MAX_DEPTH)
        if any(assigns_self_attribute(cls, name) for _, cls in mro):
            # An instance attribute wins over any class attribute; its value was followed where assigned.
            return _NOTHING
        for module, cls in mro:
            for statement in cls.body:
                value = class_binding(statement, name)
                if value is not None:
                    return self._expr(module, value, None)
        return _NOTHING

    def _builds_nothing(self, relative: str, node: ast.expr) -> bool:
        """Whether the class or function `node` names could build no layer (may_build): neither parsed nor
        followed then."""
        # Asked ~59,000 times on vLLM 0.29.0 of ~5,000 names: the answer is the name's, kept per module.
        if type(node) is ast.Name:
            key: tuple[str, ...] = (relative, node.id)
        elif type(node) is ast.Attribute and type(node.value) is ast.Name:
            key = (relative, node.value.id, node.attr)
        else:
            return False  # binding_expr reads only those two
        answer = self._nothing.get(key)
        if answer is None:
            bound = self.binding_expr(relative, node)
            answer = self._nothing[key] = (
                bound is not None
                and bound[1] in ("class", "function")
                and not self._reach.could_build(self, *bound[::2])
            )
        return answer

    def _enter(self, key: tuple[str, ...], relative: str) -> None:
        self._busy.add(key)
        self.budget.spend(1000, relative)
        if len(self._busy) > _MAX_DEPTH:
            raise BudgetExceeded(f"{relative} (constructors and calls nested over {_MAX_DEPTH} deep)")

    def _function(self, relative: str, function: ast.FunctionDef | ast.AsyncFunctionDef) -> Built:
        key = (relative, function.name, f"def:{function.lineno}")
        if key in self._built:
            return self._built[key]
        if key in self._busy:
            return _NOTHING
        self._enter(key, relative)
        built = self._within(function, lambda: self._body(relative, function.body, None))
        self._busy.discard(key)
        self._built[key] = built
        return built

    def _within(self, function, follow) -> Built:
        self._functions.append(function)
        try:
            return follow()
        finally:
            self._functions.pop()

    def _positions(self, function) -> frozenset[str]:
        """The function's names holding the layer's position, read once per function and what it is given: a
        constructor's parameters given a position-read value; a method's `self.x` its instance's constructor set
        from the position (GPT-OSS's `_build_attention`). The node is kept: its id stays its own."""
        passed = self._passed[-1] if self._passed and function.name == "__init__" else frozenset()
        init = method(self._instances[-1][1], "__init__") if self._instances and function.name != "__init__" else None
        seeds = frozenset(n for n in self._positions(init) if n.startswith("self.")) if init else frozenset()
        key = (id(function), passed, seeds)
        if key not in self._position_names:
            self._position_names[key] = (function, position_names(function, passed, seeds))
        return self._position_names[key][1]

    def _decided(self, test: ast.expr) -> bool | None:
        """A test's value on the default platform, or in a constructor by its caller's constant arguments."""
        decided = platform_test(test)
        if decided is None and self._passed and self._functions and self._functions[-1].name == "__init__":
            return decide(test, self._passed[-1], self._functions[-1])
        return decided

    def _per_layer(self, test: ast.expr) -> bool:
        """Whether a test reads the layer's position (constructor_shapes.per_layer_test), itself or through a
        method of the instance it calls (MiMo-V2's `self.is_compressed_softmax_layer()` reads `self.layer_id`)."""
        if not self._functions:
            return False
        if per_layer_test(test, self._positions(self._functions[-1])):
            return True
        methods = (
            [method(self._instances[-1][1], name) for name in self_methods_called(test)] if self._instances else []
        )
        return any(per_layer_test(v, self._positions(f)) for f in methods if f for v in returned_values(f))

    def _branches(self, per_layer: bool, body: Built, orelse: Built) -> Built:
        """A branch the config decides is two alternatives; one on the layer's position is taken both ways
        within one model: either, or both."""
        return _either([body, orelse, _product(body, orelse)] if per_layer else [body, orelse])

    def _body(self, relative: str, statements: list[ast.stmt], cls: ast.ClassDef | None) -> Built:
        built = _NOTHING
        for statement in statements:
            built = _product(built, self._statement(relative, statement, cls))
        return built

    def _statement(self, relative: str, statement: ast.stmt, cls: ast.ClassDef | None) -> Built:
        if isinstance(statement, ast.If):
            decided = self._decided(statement.test)
            test = self._expr(relative, statement.test, cls)
            if decided is True:
                return _product(test, self._body(relative, statement.body, cls))
            if decided is False:
                return _product(test, self._body(relative, statement.orelse, cls))
            per_layer = self._per_layer(statement.test)
            # Keywords the two ways give apart values are per layer when the branch is (constructor_shapes).
            self._apart.append(differing_keywords(statement.body, statement.orelse) if per_layer else frozenset())
            try:
                body, orelse = self._body(relative, statement.body, cls), self._body(relative, statement.orelse, cls)
            finally:
                self._apart.pop()
            return _product(test, self._branches(per_layer, body, orelse))
        if isinstance(statement, (ast.For, ast.AsyncFor, ast.While)):
            head = self._expr(relative, statement.iter if not isinstance(statement, ast.While) else statement.test, cls)
            return _product(head, self._body(relative, statement.body + statement.orelse, cls))
        if isinstance(statement, (ast.With, ast.AsyncWith)):
            return self._body(relative, statement.body, cls)
        if isinstance(statement, ast.Try):
            return self._body(relative, statement.body + statement.orelse + statement.finalbody, cls)
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
            # A layer function handed to make_layers: its `prefix` is each layer's.
            return self._within(statement, lambda: self._body(relative, statement.body, cls))
        if isinstance(statement, (ast.ClassDef, ast.Import, ast.ImportFrom, ast.Raise, ast.Assert)):
            return _NOTHING
        if isinstance(statement, ast.AnnAssign):
            # The annotation names classes (`attn_cls: Callable[..., A | B]`), it builds none of them.
            return self._expr(relative, statement.value, cls) if statement.value is not None else _NOTHING
        built = _NOTHING
        for child in ast.iter_child_nodes(statement):
            if isinstance(child, ast.expr):
                built = _product(built, self._expr(relative, child, cls))
        return built

    def _expr(self, relative: str, node: ast.expr, cls: ast.ClassDef | None) -> Built:
        given = given_or_default(node, self._passed[-1]) if self._passed else None
        if given is not None:
            return self._expr(relative, given, cls)
        if isinstance(node, ast.IfExp):
            decided = self._decided(node.test)
            if decided is not None:
                return self._expr(relative, node.body if decided else node.orelse, cls)
            return self._branches(
                self._per_layer(node.test), self._expr(relative, node.body, cls), self._expr(relative, node.orelse, cls)
            )
        if isinstance(node, ast.Call):
            return self._call(relative, node, cls)
        if isinstance(node, ast.Lambda):
            return self._expr(relative, node.body, cls)
        if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(getattr(node, "ctx", None), ast.Load):
            return self._reference(relative, node)
        built = _NOTHING
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                built = _product(built, self._expr(relative, child, cls))
            elif isinstance(child, ast.comprehension):
                built = _product(built, self._expr(relative, child.iter, cls))
        return built

    def _reference(self, relative: str, node: ast.expr) -> Built:
        """A class object or a module-level value read (`layer_type = LAYER_TYPES[t]`): what it builds."""
        if isinstance(node, ast.Attribute) and not isinstance(node.value, ast.Name):
            return _NOTHING
        if self._builds_nothing(relative, node):
            return _NOTHING
        found = self.resolve_expr(relative, node)
        if found is None:
            return _NOTHING
        module, kind, target = found
        if kind == "class":
            return referenced(self.of_class(module, target, site(relative, node)))  # type: ignore[arg-type]
        if kind == "value" and isinstance(target, (ast.Dict, ast.Tuple, ast.List, ast.Set)):
            key = (module, getattr(node, "id", getattr(node, "attr", "")), "value")
            if key in self._built or key in self._busy:
                return self._built.get(key, _NOTHING)
            self._busy.add(key)
            built = self._expr(module, target, None)
            self._busy.discard(key)
            self._built[key] = built
            return built
        return _NOTHING

    def _call(self, relative: str, call: ast.Call, cls: ast.ClassDef | None) -> Built:
        func = call.func
        if isinstance(func, ast.Name) and func.id in _NOT_BUILT:
            return _NOTHING
        built = _NOTHING
        for argument in [*call.args, *(keyword.value for keyword in call.keywords)]:
            built = _product(built, self._expr(relative, argument, cls))
        if cls is not None and isinstance(func, ast.Attribute) and instance_class(func.value):
            return _product(built, self._instance_attribute(func.attr))
        if (
            cls is not None
            and isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id == "self"
        ):
            own = method(cls, func.attr)
            if own is not None:
                return _product(built, self._function(relative, own))
            return _product(built, self._instance_attribute(func.attr))
        if isinstance(func, (ast.Name, ast.Attribute)) and self._builds_nothing(relative, func):
            return built
        found = self.resolve_expr(relative, func) if isinstance(func, (ast.Name, ast.Attribute)) else None
        if found is None and isinstance(func, ast.Name) and self._functions:
            # A class handed in as a parameter: its default (callers that hand it on pass it down unchanged).
            default = parameter_default(self._functions[-1], func.id)
            found = self.resolve_expr(relative, default) if isinstance(default, (ast.Name, ast.Attribute)) else None
        if found is None and isinstance(func, ast.Name) and self._functions:
            # A class held in a local (`attn_cls = A if … else B`), called with per-layer arguments (Gemma3's window).
            positions = self._positions(self._functions[-1])  # the call first: `len(…)` needs no local's value
            value = local_value(self._functions[-1], func.id) if per_layer_call(call, positions) else None
            named = {n.id for n in ast.walk(value) if isinstance(n, ast.Name)} & self.layers.keys() if value else set()
            return _product(built, varied_by_call(frozenset(named))) if named else built
        if found is None:
            return _product(built, self._expr(relative, func, cls))
        module, kind, target = found
        if kind == "class":
            positions = self._positions(self._functions[-1]) if self._functions else frozenset()
            init = method(target, "__init__")  # type: ignore[arg-type]
            passed = passed_parameters(call, init, positions) | constant_arguments(call, init)
            if any(self._apart):
                callee = shape(func)
                passed |= {k + PER_LAYER for apart in self._apart for c, k in apart if c == callee}
            return _product(built, self.of_class(module, target, site(relative, call), passed))  # type: ignore[arg-type]
        if kind == "function":
            return _product(built, self._function(module, target))  # type: ignore[arg-type]
        return _product(built, self._reference(relative, func))
