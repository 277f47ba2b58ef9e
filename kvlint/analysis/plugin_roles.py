"""Which code of a package outside the vLLM tree only ever meets the scheduler's KV cache config.

Inside the tree a module's path says its role (`scheduler-only-paths`). A plugin's files are not the tree's:
its roles come from what its classes derive from and what its functions patch, resolved through the
TARGET release's own class hierarchy (DESIGN.md "Who sees a container"):

- a class deriving from one the target's scheduler-only modules define (its Scheduler, AsyncScheduler,
  KVCacheManager, KVCacheCoordinator, a SingleTypeKVCacheManager, …) is handed the scheduler's flattened
  config, and so is a function the plugin assigns onto such a class (`Scheduler.schedule = patched`);
- a class deriving from the target's connector base (`KVConnectorBase_V1`, or any of the tree's connectors)
  runs the base's scheduler-side methods (those under its `# Scheduler-side methods` heading) only in the
  instance built with role SCHEDULER; its other methods (`__init__`, built for both roles; the worker-side
  ones) keep a worker's config.

The tree's part is read once per index, from the text of its class headers (bounded patterns); the plugin's
part per file, from its imports of `vllm` and its own classes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from fnmatch import fnmatchcase

import libcst as cst

from kvlint.analysis.connector_role import (
    BASE_ROLE_ATTRIBUTES,
    ROLE_ENUM,
    SCHEDULER,
    RoleTests,
    constructor_role_attributes,
)
from kvlint.analysis.package_classes import PackageClasses, derived_from

CONNECTOR_BASE = "KVConnectorBase_V1"
_SCHEDULER_HEADING = b"# Scheduler-side methods"
# A class header and its bases, at most 400 characters of them (no two unbounded runs side by side).
_CLASS = re.compile(rb"^class[ \t]+(\w+)[ \t]*(?:\(([^)]{0,400})\))?[ \t]*:", re.MULTILINE)
_METHOD = re.compile(rb"^    (?:async[ \t]+)?def[ \t]+(\w+)", re.MULTILINE)


@dataclass(frozen=True)
class TreeRoles:
    """The target tree's classes whose subclasses, outside the tree, run with the scheduler's config."""

    scheduler_classes: frozenset[str] = frozenset()  # defined in scheduler-only modules, or derived from one
    connector_classes: frozenset[str] = frozenset()  # the connector base and the tree's classes derived from it
    scheduler_methods: frozenset[str] = frozenset()  # the connector base's scheduler-side methods
    # The scanned package's own classes derived from those (kvlint.analysis.package_classes), per scan.
    package_scheduler_classes: frozenset[str] = frozenset()
    package_connector_classes: frozenset[str] = frozenset()

    def with_package(self, classes: PackageClasses) -> TreeRoles:
        """These roles with the package's own classes that derive from the target's, through any of its modules."""
        return replace(
            self,
            package_scheduler_classes=derived_from(classes, self.scheduler_classes),
            package_connector_classes=derived_from(classes, self.connector_classes),
        )


def read_tree_roles(texts: dict[str, bytes], patterns: tuple[str, ...]) -> TreeRoles:
    """TreeRoles from the texts of the modules `could_shape_roles` selects (relative path → bytes)."""
    bases: dict[str, set[str]] = {}
    scheduler: set[str] = set()
    methods: frozenset[str] = frozenset()
    for relative, data in texts.items():
        only_scheduler = any(fnmatchcase(relative, pattern) for pattern in patterns)
        for match in _CLASS.finditer(data):
            name = match.group(1).decode()
            bases.setdefault(name, set()).update(_base_names((match.group(2) or b"").decode("utf-8", "replace")))
            if only_scheduler:
                scheduler.add(name)
        if b"class " + CONNECTOR_BASE.encode() in data and _SCHEDULER_HEADING in data:
            methods = _scheduler_side_methods(data)
    return TreeRoles(frozenset(_derived(bases, scheduler)), frozenset(_derived(bases, {CONNECTOR_BASE})), methods)


def _base_names(text: str) -> set[str]:
    """The last name of each base (`abc.ABC` → `ABC`); keywords (`metaclass=…`) are no base."""
    names = set()
    for part in text.split(","):
        part = part.strip()
        if part and "=" not in part:
            names.add(part.split("[")[0].rsplit(".", 1)[-1].strip())
    return names


def _derived(bases: dict[str, set[str]], roots: set[str]) -> set[str]:
    """`roots` and every class whose bases lead to one of them: down from the roots along each base's subclasses,
    each class visited once (a fixpoint rescanning every class per round was quadratic in a chain of classes)."""
    subclasses: dict[str, list[str]] = {}
    for name, direct in bases.items():
        for base in direct:
            subclasses.setdefault(base, []).append(name)
    found = set(roots)
    waiting = list(roots)
    while waiting:
        for name in subclasses.get(waiting.pop(), ()):
            if name not in found:
                found.add(name)
                waiting.append(name)
    return found


def _scheduler_side_methods(data: bytes) -> frozenset[str]:
    """The methods under the connector base's `# Scheduler-side methods` heading, to the end of the class."""
    start = data.index(_SCHEDULER_HEADING)
    following = _CLASS.search(data, start)
    section = data[start : following.start() if following else len(data)]
    return frozenset(m.group(1).decode() for m in _METHOD.finditer(section))


# -- the plugin's side: one file --------------------------------------------------------------------


class FileRoles:
    """One file of code outside the tree: which of its classes and functions run with the scheduler's config."""

    def __init__(self, module: cst.Module, roles: TreeRoles):
        self.roles = roles
        self.imported: dict[str, str] = {}  # local name → the name vllm defines it as
        self.from_package: dict[str, str] = {}  # local name → the name another module of the package defines
        self.modules: set[str] = set()  # local names of imported vllm modules (`import vllm.v1.core.sched as s`)
        self.local: dict[str, list[cst.BaseExpression]] = {}  # the file's own classes → their bases
        self.patched: set[str] = set()  # functions assigned onto a scheduler-side class
        self.classes: dict[str, cst.ClassDef] = {}
        self.module = module
        self._scheduler_built: frozenset[str] | None = None
        for node in _walk(module):
            if isinstance(node, cst.ImportFrom) and not isinstance(node.names, cst.ImportStar):
                names = self.imported if _from_vllm(node) else self.from_package
                for alias in node.names:
                    if isinstance(alias.name, cst.Name):
                        names[_bound(alias) or alias.name.value] = alias.name.value
            elif isinstance(node, cst.Import):
                for alias in node.names:
                    root = _dotted(alias.name).split(".")[0]
                    if root == "vllm":
                        self.modules.add(_bound(alias) or "vllm")
                    else:  # a module of the package (or of another library): `core.bases.NpuPolicy`
                        self.from_package[_bound(alias) or root] = root
            elif isinstance(node, cst.ClassDef):
                self.local[node.name.value] = [arg.value for arg in node.bases if arg.keyword is None]
                self.classes[node.name.value] = node
        for node in _walk(module):
            self._note_patch(node)
        self.role_tests = RoleTests(self._is_role_enum, self._stored_role)

    def _note_patch(self, node: cst.CSTNode) -> None:
        if isinstance(node, cst.Assign) and isinstance(node.value, cst.Name):
            targets = [t.target for t in node.targets if isinstance(t.target, cst.Attribute)]
            if any(self.is_scheduler_class(t.value) for t in targets):
                self.patched.add(node.value.value)
        elif isinstance(node, cst.Call) and _dotted(node.func) == "setattr" and len(node.args) == 3:
            patched = node.args[2].value
            if isinstance(patched, cst.Name) and self.is_scheduler_class(node.args[0].value):
                self.patched.add(patched.value)

    def _vllm_name(self, expression: cst.BaseExpression) -> str | None:
        """The name vllm defines a class as, when `expression` names one imported from vllm."""
        if isinstance(expression, cst.Name):
            return self.imported.get(expression.value)
        if isinstance(expression, cst.Attribute) and _dotted(expression).split(".")[0] in self.modules:
            return expression.attr.value
        return None

    def _derives(self, expression: cst.BaseExpression, scheduler: bool, seen: frozenset[str] = frozenset()):
        """Whether `expression` names a class deriving from the target's scheduler-side classes (`scheduler`),
        else from its connector classes: imported from vllm, the file's own, or another module's of the package."""
        roles = self.roles
        vllm_name = self._vllm_name(expression)
        if vllm_name is not None:
            return vllm_name in (roles.scheduler_classes if scheduler else roles.connector_classes)
        if isinstance(expression, cst.Name) and expression.value in self.local and expression.value not in seen:
            mine = seen | {expression.value}
            return any(self._derives(base, scheduler, mine) for base in self.local[expression.value])
        package = roles.package_scheduler_classes if scheduler else roles.package_connector_classes
        if isinstance(expression, cst.Name) and expression.value in self.from_package:
            return self.from_package[expression.value] in package
        if isinstance(expression, cst.Attribute) and _dotted(expression).split(".")[0] in self.from_package:
            return expression.attr.value in package  # a class of a module of the package, named through it
        return False

    def _is_role_enum(self, expression: cst.BaseExpression) -> bool:
        """vLLM's KVConnectorRole, imported from vllm or named as such (the enum's name is its own)."""
        return self._vllm_name(expression) == ROLE_ENUM or _dotted(expression).rsplit(".", 1)[-1] == ROLE_ENUM

    def _stored_role(self, klass: cst.ClassDef, seen: frozenset[str] = frozenset()) -> frozenset[str]:
        """The attributes of `self` holding the connector's role in `klass`: its constructor's, its own bases'
        in the file, and the connector base's (`self._role`, `self.role`) when it derives from the target's."""
        found = constructor_role_attributes(klass)
        if self._derives(cst.Name(klass.name.value), scheduler=False):
            found |= BASE_ROLE_ATTRIBUTES
        for base in self.local.get(klass.name.value, ()):
            name = base.value if isinstance(base, cst.Name) else None
            if name in self.classes and name not in seen:
                found |= self._stored_role(self.classes[name], seen | {klass.name.value})
        return found

    def is_scheduler_class(self, expression: cst.BaseExpression) -> bool:
        return self._derives(expression, scheduler=True)

    def scheduler_side(self, node: cst.CSTNode, parent) -> bool:
        """Whether `node` runs only with the scheduler's config: in a class derived from a scheduler-side class
        of the target, in a connector's scheduler-side method, or in a function patched onto such a class. A test
        of the connector's role argument decides first (kvlint.analysis.connector_role): its SCHEDULER branch is
        the scheduler's, its WORKER branch the worker's, whatever the class."""
        side = self.role_tests.role_side(node, parent)
        if side is not None:
            return side == SCHEDULER
        method = None
        current = parent(node)
        while current is not None:
            if isinstance(current, cst.FunctionDef):
                if current.name.value in self.patched:
                    return True
                method = current
            elif isinstance(current, cst.ClassDef):
                name = cst.Name(current.name.value)
                if self.is_scheduler_class(name) or current.name.value in self._built_for_scheduler(parent):
                    return True
                if method is not None and self._derives(name, scheduler=False):
                    return method.name.value in self.roles.scheduler_methods
                method = None
            current = parent(current)
        return False

    def _built_for_scheduler(self, parent) -> frozenset[str]:
        """The file's classes it constructs only in a role test's SCHEDULER branch (`if role ==
        KVConnectorRole.SCHEDULER: self.scheduler = MyConnectorScheduler(…)`): their code sees its config."""
        if self._scheduler_built is None:
            sides: dict[str, set[str | None]] = {}
            for node in _walk(self.module):
                if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value in self.classes:
                    sides.setdefault(node.func.value, set()).add(self.role_tests.role_side(node, parent))
            self._scheduler_built = frozenset(name for name, found in sides.items() if found == {SCHEDULER})
        return self._scheduler_built


def _walk(node: cst.CSTNode):
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(current.children))


def _from_vllm(node: cst.ImportFrom) -> bool:
    return not node.relative and node.module is not None and _dotted(node.module).split(".")[0] == "vllm"


def _bound(alias: cst.ImportAlias) -> str | None:
    return alias.asname.name.value if alias.asname and isinstance(alias.asname.name, cst.Name) else None


def _dotted(node: cst.BaseExpression) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{_dotted(node.value)}.{node.attr.value}"
    return ""


class OutsideRoles:
    """A rule's view of one file's roles: nothing inside the vLLM tree (its paths decide there), the file's
    FileRoles outside it, read on the first question (a check that would otherwise be reported). Without a
    target's classes (the built-in reference) only the connector's role tests decide: they name vLLM's enum,
    whatever the release."""

    def __init__(self, context):
        self.context = context
        self._file: FileRoles | None = None

    def scheduler_side(self, node: cst.CSTNode) -> bool:
        if self.context.module_path.startswith("vllm/"):
            return False
        if self._file is None:
            self._file = FileRoles(self.context.wrapper.module, self.context.project.roles)
        return self._file.scheduler_side(node, self.context.flow.parent)
