"""Which half of a KV connector a statement of plugin code runs in, by the connector's role argument.

vLLM builds a connector twice: once with `KVConnectorRole.SCHEDULER`, handed the scheduler's flattened KV cache
config, and once with `KVConnectorRole.WORKER`, handed the worker's (containers unflattened). A connector that
keeps both halves in one class or one function tells them apart by that argument:

    if role == KVConnectorRole.SCHEDULER:        # or `is`, or `!= KVConnectorRole.WORKER`, or `not …`
        ...                                      # the scheduler's config: never a container
    else:
        ...                                      # the worker's

or past an early exit (`if self._role != KVConnectorRole.SCHEDULER: return`). The role is the constructor's
`role` parameter, a parameter of the function holding the test (named `role`, or annotated `KVConnectorRole`:
another role a function is handed decides nothing of its own), or the attribute (`self._role`, `self.role`)
the constructor stores it in (vLLM's connector base stores it in `self._role`, read by `self.role`).
`role_side` answers the innermost such test a node is under; kvlint.analysis.plugin_roles asks it first.
"""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

SCHEDULER = "SCHEDULER"
WORKER = "WORKER"
ROLE_ENUM = "KVConnectorRole"
_OTHER = {SCHEDULER: WORKER, WORKER: SCHEDULER}
# The attributes vLLM's connector base keeps the role in (`self._role = role`, the `role` property).
BASE_ROLE_ATTRIBUTES = frozenset({"_role", "role"})

Parent = Callable[[cst.CSTNode], "cst.CSTNode | None"]


class RoleTests:
    """Reads the role tests of one file. `is_role_enum(expression)`: whether an expression names vLLM's
    `KVConnectorRole` (as the file imports it); `stored_role(class_node)`: the attributes of `self` that hold the
    role in that class (its constructor's assignments from its role parameter, the base's when it derives one)."""

    def __init__(self, is_role_enum: Callable[[cst.BaseExpression], bool], stored_role):
        self.is_role_enum = is_role_enum
        self.stored_role = stored_role
        self._parent: Parent = lambda node: None

    def role_side(self, node: cst.CSTNode, parent: Parent) -> str | None:
        """SCHEDULER or WORKER: the half whose config `node` sees, by the innermost role test it is under;
        None when no role test decides it."""
        self._parent = parent
        child, current = node, parent(node)
        while current is not None:
            side = None
            if isinstance(current, (cst.If, cst.IfExp)) and child is not current.test:
                on_true, on_false = self._sides(current.test, current)
                side = on_true if child is current.body else on_false
            elif isinstance(current, (cst.IndentedBlock, cst.Module)):
                side = self._past_early_exit(current, child)
            if side is not None:
                return side
            child, current = current, parent(current)
        return None

    def _past_early_exit(self, block, statement) -> str | None:
        """The side a statement is on when an earlier statement of its block leaves on the other side
        (`if role != KVConnectorRole.SCHEDULER: return`)."""
        for earlier in block.body:
            if earlier is statement:
                return None
            if isinstance(earlier, cst.If) and earlier.orelse is None and _leaves(earlier.body):
                side = self._sides(earlier.test, earlier)[1]
                if side is not None:
                    return side
        return None

    def _sides(self, test: cst.BaseExpression, at: cst.CSTNode) -> tuple[str | None, str | None]:
        """(the side when `test` is true, the side when it is false); None where it does not decide one."""
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            on_true, on_false = self._sides(test.expression, at)
            return on_false, on_true
        if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
            # Both hold when the `and` does: either one's side; a false `and` says nothing of either.
            left, right = self._sides(test.left, at)[0], self._sides(test.right, at)[0]
            return left or right, None
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
            target = test.comparisons[0]
            member = self._member(test.left, target.comparator, at) or self._member(target.comparator, test.left, at)
            if member is None:
                return None, None
            if isinstance(target.operator, (cst.Equal, cst.Is)):
                return member, _OTHER[member]
            if isinstance(target.operator, (cst.NotEqual, cst.IsNot)):
                return _OTHER[member], member
        return None, None

    def _member(self, constant: cst.BaseExpression, subject: cst.BaseExpression, at: cst.CSTNode) -> str | None:
        """SCHEDULER or WORKER when `constant` is that member of KVConnectorRole and `subject` the role."""
        if not (isinstance(constant, cst.Attribute) and constant.attr.value in _OTHER):
            return None
        if not self.is_role_enum(constant.value) or not self._is_role(subject, at):
            return None
        return constant.attr.value

    def _is_role(self, subject: cst.BaseExpression, at: cst.CSTNode) -> bool:
        function, klass = _enclosing(at, self._parent)
        if isinstance(subject, cst.Name):
            return function is not None and subject.value in self._role_parameters(function)
        if isinstance(subject, cst.Attribute) and isinstance(subject.value, cst.Name) and klass is not None:
            return subject.value.value == "self" and subject.attr.value in self.stored_role(klass)
        return False

    def _role_parameters(self, function: cst.FunctionDef) -> set[str]:
        """The parameters holding a connector's role: named `role`, or annotated `KVConnectorRole`."""
        parameters = function.params
        every = [*parameters.posonly_params, *parameters.params, *parameters.kwonly_params]
        return {
            p.name.value
            for p in every
            if p.name.value == "role" or (p.annotation is not None and self.is_role_enum(p.annotation.annotation))
        }


def _leaves(body: cst.BaseSuite) -> bool:
    """Whether a block always leaves the function (its last statement returns or raises)."""
    statements = body.body
    last = statements[-1] if statements else None
    if isinstance(last, cst.SimpleStatementLine):
        return isinstance(last.body[-1], (cst.Return, cst.Raise))
    return False


def _enclosing(node: cst.CSTNode, parent: Parent) -> tuple[cst.FunctionDef | None, cst.ClassDef | None]:
    """The innermost function holding `node`, and the class that function is a method of."""
    function = None
    current = parent(node)
    while current is not None:
        if isinstance(current, cst.FunctionDef) and function is None:
            function = current
        elif isinstance(current, cst.ClassDef):
            return function, current
        current = parent(current)
    return function, None


def _parameters(function: cst.FunctionDef) -> set[str]:
    parameters = function.params
    every = [*parameters.posonly_params, *parameters.params, *parameters.kwonly_params]
    return {p.name.value for p in every}


def constructor_role_attributes(klass: cst.ClassDef) -> frozenset[str]:
    """The attributes of `self` the class's constructor sets from its `role` parameter (`self.role = role`)."""
    constructor = next(
        (s for s in klass.body.body if isinstance(s, cst.FunctionDef) and s.name.value == "__init__"), None
    )
    if constructor is None or "role" not in _parameters(constructor):
        return frozenset()
    found = set()
    stack: list[cst.CSTNode] = [constructor.body]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Assign) and isinstance(current.value, cst.Name) and current.value.value == "role":
            for target in current.targets:
                attribute = target.target
                if isinstance(attribute, cst.Attribute) and isinstance(attribute.value, cst.Name):
                    if attribute.value.value == "self":
                        found.add(attribute.attr.value)
        elif not isinstance(current, (cst.FunctionDef, cst.ClassDef)):
            stack.extend(current.children)
    return frozenset(found)
