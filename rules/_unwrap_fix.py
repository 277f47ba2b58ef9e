"""Build KV101's fix: a container-blind check rewritten to the scanned tree's own unwrapping idiom.

- the tree's helper for the checked class (`is_full_attention_spec(spec)`, kvlint.analysis.layer_helpers);
- else the check on every layer: `all(isinstance(spec, C) for spec in iter_layer_specs(x))`;
- and where the checked name is a parameter of a per-spec function that a call inside `all(…)`/`any(…)`
  hands a group spec, the layers unwrapped at that call, as vLLM 0.30.0 did in the offloading connector:
  `all(f(spec) for group in groups for spec in iter_layer_specs(group.kv_cache_spec))`.

Safe when `any` and `all` over a container's layers agree for every composition the tree can build
(kvlint.analysis.census.compositions); otherwise unsafe, and the finding says which composition splits them. No
fix where the tree has neither such a helper nor `iter_layer_specs`, or was not read.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from kvlint import Applicability, Fix, ImportChange, Rule, TextEdit
from kvlint.analysis.cst_walk import preorder
from kvlint.analysis.flow.cst_bindings import argument_for, is_static, positional_index
from kvlint.analysis.flow.provenance import Kind
from kvlint.analysis.layer_helpers import LAYER_ITERATOR, QUANTIFIERS
from kvlint.analysis.layer_mixes import class_test, spec_class_mixes, split_composition
from kvlint.analysis.scaling import class_names
from kvlint.analysis.target_names import dotted as dotted_module
from kvlint.analysis.vocabulary import CONTAINER_CLASS, INTERFACE_MODULE, RESOLVER_NAME
from kvlint.rules._fix_scope import free_name, guarded_use, rebinding, resolved_calls
from kvlint.rules._resolver_call import (
    LINE_LIMIT,
    _imported_from,
    _indent_of_line,
    _line_end,
    _line_start,
    _newline_of,
    _one_line,
    target_gap,
)

_OPERATORS = {cst.Is: "is", cst.Equal: "==", cst.In: "in", cst.IsNot: "is not", cst.NotEqual: "!=", cst.NotIn: "not in"}
_NEGATIVE = (cst.IsNot, cst.NotEqual, cst.NotIn)


@dataclass
class UnwrapPlan:
    """What KV101's fix will be, decided before positions are known (the message needs its safety)."""

    form: str  # "helper", "layers" or "call-site"
    quantifier: str
    helper: str | None
    node: cst.CSTNode
    subject: cst.BaseExpression
    classes: cst.BaseExpression | None
    split: frozenset[str] | None
    # A use of the checked spec that the check guards (`spec.mamba_type` after it): a container that passed
    # would reach it, as a container — so no fix (a vLLM test of 0.29.0's offloading config broke on one).
    guarded_use: str | None = None
    # The calls that hand the per-spec function a group spec, with that argument (form "call-site").
    calls: tuple[tuple[cst.Call, cst.BaseExpression], ...] = ()
    # Why the rewrite cannot be written here (a name it calls that the scope rebinds, a walrus that would
    # land in a comprehension's iterable): no fix.
    blocker: str | None = None

    @property
    def safe(self) -> bool:
        return self.split is None and self.guarded_use is None and self.blocker is None

    def note(self, check: str) -> str:
        """What the finding says of an unsafe fix: the composition that splits `any` and `all`."""
        if self.safe:
            return ""
        if self.blocker is not None:
            return f"no automatic fix: {self.blocker}: unwrap the layers by hand"
        if self.guarded_use is not None:  # no fix: rewriting the check alone would let a container reach it
            return (
                f"no automatic fix: `{self.guarded_use}` is used where the check lets it through, and a container "
                "that passed it would reach that use whole: unwrap it there too"
            )
        other = next(q for q in QUANTIFIERS if q != self.quantifier)
        mixed = ", ".join(sorted(self.split))
        if self.form == "call-site":
            called = ", ".join(sorted({f"`{c.func.value}()`" for c, _ in self.calls if isinstance(c.func, cst.Name)}))
            check = f"the class tests of {called or 'the function'}"
        else:
            check = f"`{check}`"
        return (
            f"unsafe fix: a {CONTAINER_CLASS}{{{mixed}}} the tree can build has layers that answer {check} "
            f"differently, so `any` and `all` over its layers differ; the fix takes `{self.quantifier}`, the "
            f"author must choose it or `{other}`"
        )


def unwrap_plan(rule: Rule, node: cst.CSTNode, subject: cst.BaseExpression, classes: cst.BaseExpression, exact: bool):
    """The fix for one check, or None when the tree offers no idiom (or was not read)."""
    project = rule.context.project
    hierarchy = project.hierarchy
    compositions = spec_class_mixes(project)
    named = class_names(classes)
    if compositions is None or not named:
        return None
    iterates = LAYER_ITERATOR in project.interface_functions()  # every targeted release defines it
    negative = isinstance(node, cst.Comparison) and isinstance(node.comparisons[0].operator, _NEGATIVE)
    quantifier = "any" if negative else "all"
    split = split_composition(compositions, class_test(hierarchy, named, exact), hierarchy)
    calls = _group_spec_calls(rule, subject) if iterates else None
    if calls:
        tests = _parameter_tests(rule, subject) or [(named, exact)]
        answers = [class_test(hierarchy, frozenset(c), e) for c, e in tests]
        # Split when some test tells two layers of one composition apart: the function may answer apart.
        split = split_composition(compositions, lambda name: tuple(a(name) for a in answers), hierarchy)
        outer = calls[0][0]
        quantifier = rule.flow.parent(rule.flow.parent(rule.flow.parent(outer))).func.value
        blocker = next(filter(None, (_blocker(rule, c, a, (LAYER_ITERATOR,)) for c, a in calls)), None)
        return UnwrapPlan(
            "call-site", quantifier, None, node, subject, None, split, calls=tuple(calls), blocker=blocker
        )
    helper = None
    if not exact and isinstance(classes, cst.Name):
        usable = project.interface_functions()  # the helpers every targeted release defines
        helper = next(
            (h for h, (_, c) in sorted(hierarchy.layer_helpers.items()) if c == classes.value and h in usable), None
        )
    use = guarded_use(rule.flow, node, subject)
    if helper is not None:
        quantifier = hierarchy.layer_helpers[helper][0]
        blocker = _blocker(rule, node, subject, (helper,))
        return UnwrapPlan("helper", quantifier, helper, node, subject, classes, split, use, blocker=blocker)
    if not iterates:
        return None
    blocker = _blocker(rule, node, subject, (quantifier, LAYER_ITERATOR))
    return UnwrapPlan("layers", quantifier, None, node, subject, classes, split, use, blocker=blocker)


def _blocker(rule: Rule, node: cst.CSTNode, moved: cst.BaseExpression, names: tuple[str, ...]) -> str | None:
    """Why the rewrite of `node`, which calls `names` and moves `moved` into a comprehension's iterable,
    cannot be written: a name the scope rebinds would be called instead; a walrus there is a SyntaxError."""
    if any(isinstance(n, cst.NamedExpr) for n in preorder(moved)):
        shown = " ".join(rule.code_of(moved).split())
        return f"`{shown}` holds an assignment expression, which a comprehension's iterable cannot hold"
    own = rule.context.module_path.removesuffix(".py").replace("/", ".")
    rebound = rebinding(rule.flow, node, names, own)
    return None if rebound is None else f"{rebound}, and the rewrite would call that"


def target_fix_gap(project, plan: UnwrapPlan | None, gated_scaling: bool) -> str | None:
    """Why KV101 gives no fix to code outside the vLLM tree: what it would import (the unwrapping idiom, or
    the resolver for a gated scaling) is missing from a release the code targets. None otherwise."""
    if gated_scaling:
        return target_gap(project, project.resolver_module, RESOLVER_NAME)
    return target_gap(project, dotted_module(INTERFACE_MODULE), LAYER_ITERATOR) if plan is None else None


def unwrap_fix(rule: Rule, plan: UnwrapPlan | None) -> Fix | None:
    if plan is None or plan.guarded_use is not None or plan.blocker is not None:
        return None
    if plan.form == "call-site":
        edits = [edit for call, argument in plan.calls for edit in _call_site_edits(rule, call, argument)]
        imported = LAYER_ITERATOR
        title = f"Unwrap the group spec where it is passed: `… for spec in {LAYER_ITERATOR}(…)`"
    else:
        edits = [_check_edit(rule, plan)]
        imported = plan.helper or LAYER_ITERATOR
        title = (
            f"Replace with `{plan.helper}(…)`, which tests every layer"
            if plan.helper
            else f"Test every layer: `{plan.quantifier}(… for spec in {LAYER_ITERATOR}(…))`"
        )
    return Fix(
        title=title,
        applicability=Applicability.SAFE if plan.safe else Applicability.UNSAFE,
        edits=tuple(sorted(edits, key=lambda e: e.start)),
        imports=_imports(rule, plan, imported),
    )


# ------------------------------------------------------------------------------------------ the check


def _check_edit(rule: Rule, plan: UnwrapPlan) -> TextEdit:
    source = rule.context.source
    # The check without its own parentheses: they stay, with any comment between them and the check.
    start, end = rule.span(plan.node, own_parentheses=False)
    subject = _one_line(rule.code_of(plan.subject))
    if plan.form == "helper":
        single = f"{plan.helper}({subject})"
        parts = (f"{plan.helper}(", subject)
    else:
        classes = _one_line(rule.code_of(plan.classes))
        name = free_name(subject + " " + classes)
        if isinstance(plan.node, cst.Comparison):
            test = f"type({name}) {_OPERATORS[type(plan.node.comparisons[0].operator)]} {classes}"
        else:
            test = f"isinstance({name}, {classes})"
        loop = f"for {name} in {LAYER_ITERATOR}({subject})"
        single = f"{plan.quantifier}({test} {loop})"
        parts = (f"{plan.quantifier}(", test, loop)
    # Comments between the check's parts (after `isinstance(`, after an argument) have no place in the
    # one-line form: they end the lines of the wrapped form, in their order, a `# kvlint: ignore` among them.
    kept = [n for part in (plan.subject, plan.classes) if part is not None for n in preorder(part)]
    comments = [n.value for n in preorder(plan.node) if isinstance(n, cst.Comment) and n not in set(kept)]
    offsets = rule.context.line_offsets
    line_start, line_end = _line_start(source, offsets, start), _line_end(source, offsets, end)
    # As ruff format writes it: on one line when that fits (a wrapped check whose rewrite fits is joined),
    # else the call's content on one line of its own when that fits, else one part a line.
    prefix, suffix = start - line_start, line_end - end
    indent = _indent_of_line(source, offsets, start)
    unit = rule.flow.module.default_indent  # a tab-indented file's unit is a tab
    middle = f"{indent}{unit}{' '.join(parts[1:])}"
    # Inside an f-string a line break is valid only on Python 3.12 and later: one line there.
    in_fstring = rule.flow.enclosing(plan.node, (cst.FormattedString,)) is not None
    if in_fstring or not comments and (prefix + len(single) + suffix <= LINE_LIMIT or "\n" in subject):
        replacement = single
    else:
        newline = _newline_of(source)
        lines = [middle] if not comments and len(middle.expandtabs(4)) <= LINE_LIMIT else []
        lines = lines or [f"{indent}{unit}{part}" for part in parts[1:]]
        for index, comment in enumerate(comments):
            if index < len(lines):
                lines[index] += f"  {comment}"
            else:
                lines.append(f"{indent}{unit}{comment}")
        body = "".join(f"{newline}{line}" for line in lines)
        replacement = f"{parts[0]}{body}{newline}{indent})"
    return _edit(rule, plan.node, start, end, replacement)


# ------------------------------------------------------------------------------------ the call site


def _parameter_of(rule: Rule, subject: cst.BaseExpression):
    """(function, parameter) when every binding of `subject` that reaches the check is that parameter."""
    if not isinstance(subject, cst.Name):
        return None
    bindings = rule.flow.bindings_of(subject)
    if not bindings or any(b.param is None or b.function is None for b in bindings):
        return None
    return bindings[0].function, bindings[0].param


def _group_spec_calls(rule: Rule, subject: cst.BaseExpression) -> list[tuple[cst.Call, cst.BaseExpression]] | None:
    """The calls handing the function a group spec, each the element of `all(… for …)`/`any(…)`; None
    when the name is no such parameter or some call has another shape (then the check itself is fixed)."""
    found = _parameter_of(rule, subject)
    if found is None:
        return None
    function, param = found
    flow = rule.flow
    position = positional_index(function, param)
    calls = []
    reaching, unknown = resolved_calls(flow, function)
    for call in unknown:  # may reach another function of the name: its tests are not these
        via_attribute = isinstance(call.func, cst.Attribute) and not is_static(function)
        argument = argument_for(call, param.name.value, position, via_attribute)
        if argument is not None and flow.classify(argument).kind is Kind.GROUP_SPEC:
            return None
    for call in reaching:
        via_attribute = isinstance(call.func, cst.Attribute) and not is_static(function)
        argument = argument_for(call, param.name.value, position, via_attribute)
        if argument is None or flow.classify(argument).kind is not Kind.GROUP_SPEC:
            continue
        generator, arg = flow.parent(call), flow.parent(flow.parent(call))
        outer = flow.parent(arg) if arg is not None else None
        if not (
            isinstance(generator, cst.GeneratorExp)
            and generator.elt is call
            and isinstance(outer, cst.Call)
            and isinstance(outer.func, cst.Name)
            and outer.func.value in QUANTIFIERS
            and len(outer.args) == 1
        ):
            return None
        calls.append((call, argument))
    quantifiers = {flow.parent(flow.parent(flow.parent(c))).func.value for c, _ in calls}
    return calls if len(quantifiers) == 1 else None


def _parameter_tests(rule: Rule, subject: cst.Name) -> list[tuple[frozenset[str], bool]]:
    """Every class test the function makes of the parameter: all of them change for a container's layers."""
    function, param = _parameter_of(rule, subject)
    name = param.name.value
    tests = []
    for node in preorder(function.body):
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "isinstance":
            if len(node.args) == 2 and isinstance(node.args[0].value, cst.Name) and node.args[0].value.value == name:
                tests.append((class_names(node.args[1].value) or frozenset(), False))
        elif isinstance(node, cst.Comparison) and isinstance(node.left, cst.Call) and len(node.comparisons) == 1:
            left = node.left
            if isinstance(left.func, cst.Name) and left.func.value == "type" and len(left.args) == 1:
                if isinstance(left.args[0].value, cst.Name) and left.args[0].value.value == name:
                    tests.append((class_names(node.comparisons[0].comparator) or frozenset(), True))
    return tests


def _call_site_edits(rule: Rule, call: cst.Call, argument: cst.BaseExpression) -> list[TextEdit]:
    source = rule.context.source
    generator = rule.flow.parent(call)
    name = free_name(rule.code_of(generator))
    argument_code = _one_line(rule.code_of(argument))
    start, end = rule.span(argument)
    loops_start, loops_end = rule.span(generator.for_in)
    offsets = rule.context.line_offsets
    loops_start = _past_space(source, offsets, loops_start)  # the span holds the whitespace before `for`
    line_start = _line_start(source, offsets, loops_start)
    loop = f"for {name} in {LAYER_ITERATOR}({argument_code})"
    if source[line_start:loops_start].strip():
        inserted = f" {loop}"
    else:  # the loops stand on lines of their own: one more line, as ruff format writes it
        newline = _newline_of(source)
        inserted = f"{newline}{source[line_start:loops_start]}{loop}"
    return [
        _edit(rule, argument, start, end, name),
        _edit(rule, generator.for_in, loops_end, loops_end, inserted, at_end=True),
    ]


def _past_space(source: str, offsets: list[int], offset: int) -> int:
    """The offset of the next code character: past whitespace, line continuations and comments."""
    while offset < len(source):
        if source[offset] in " \t\r\n\\\f":
            offset += 1
        elif source[offset] == "#":
            offset = _line_end(source, offsets, offset)
        else:
            break
    return offset


# ---------------------------------------------------------------------------------------- shared


def _edit(rule: Rule, node: cst.CSTNode, start: int, end: int, replacement: str, at_end: bool = False) -> TextEdit:
    position = rule.context.position(node)
    first = position.end if at_end else position.start
    return TextEdit(
        start=start,
        end=end,
        replacement=replacement,
        line=first.line,
        column=first.column + 1,
        end_line=position.end.line,
        end_column=position.end.column + 1,
    )


def _imports(rule: Rule, plan: UnwrapPlan, name: str) -> tuple[ImportChange, ...]:
    """The helper from the interface module, as the resolver's import is added (kvlint.fixing.imports)."""
    module = rule.flow.module
    home = INTERFACE_MODULE.removesuffix(".py").replace("/", ".")
    own = rule.context.module_path.removesuffix(".py").replace("/", ".")
    defined = any(isinstance(s, (cst.FunctionDef, cst.ClassDef)) and s.name.value == name for s in module.body)
    imports = []
    if own != home and not defined and _imported_from(module, name) is None:
        imports.append(ImportChange(home, name))
    if plan.form == "helper" and isinstance(plan.classes, cst.Name) and not _reexports(rule, plan.classes.value):
        origin = _imported_from(module, plan.classes.value)
        if origin is not None:  # the class may be used nowhere else now
            imports.append(ImportChange(origin, plan.classes.value, add=False))
    return tuple(imports)


def _reexports(rule: Rule, name: str) -> bool:
    """A package's `__init__.py`, or a module whose `__all__` names it: its imports are its interface, so an
    import no code of the file uses is not unused."""
    if rule.context.module_path.rsplit("/", 1)[-1] == "__init__.py":
        return True
    for node in rule.flow.module.body:
        if isinstance(node, cst.SimpleStatementLine):
            for small in node.body:
                targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else []
                if isinstance(small, (cst.AnnAssign, cst.AugAssign)):
                    targets = [small.target]
                if any(isinstance(t, cst.Name) and t.value == "__all__" for t in targets):
                    return True
    return False
