"""Which kinds of group spec a hand-written sizing site really serves, read from the code around it.

Two shapes keep kinds from a site's value even though the site itself runs for them:
- the group is picked by an index an earlier `isinstance` test chose (`for i, g in enumerate(groups): if
  isinstance(g.kv_cache_spec, FullAttentionSpec): self.fa_gidx = i` … `groups[self.fa_gidx].kv_cache_spec
  .block_size * dcp`): only kinds that pass the test are sized there;
- the value is assigned to a name that only some branches of the `if`/`elif` chain right after read
  (`block_size = spec.block_size * dcp; if isinstance(spec, MambaSpec): n += 2 elif …: use(block_size)`):
  a kind whose branch never reads it gets no wrong size from it.

Each answer is a test (a libcst expression kvlint.analysis.kind_tests can answer per kind) that holds for
every kind the site serves.
"""

from __future__ import annotations

import libcst as cst

from kvlint.analysis.cst_walk import preorder
from kvlint.analysis.flow.cst_bindings import Remembered, asked, statement_places
from kvlint.analysis.flow.provenance import dotted


def index_tests(
    spec: cst.BaseExpression | None, function: cst.CSTNode | None, remembered: Remembered | None = None
) -> list[cst.BaseExpression]:
    """`groups[I].kv_cache_spec` where every non-constant assignment of `I` in the function sits under an
    `isinstance(<loop group>.kv_cache_spec, C)` test: that test."""
    if function is None or not isinstance(spec, cst.Attribute) or not isinstance(spec.value, cst.Subscript):
        return []
    elements = spec.value.slice
    if len(elements) != 1 or not isinstance(elements[0].slice, cst.Index):
        return []
    index = dotted(elements[0].slice.value)
    if not index:
        return []
    # One answer per index and function, the same `or` for each site that reads it (not one built per site).
    return list(asked(f"index tests: {index}", function, lambda f: _index_tests(index, f, remembered), remembered))


def _index_tests(index: str, function: cst.CSTNode, remembered: Remembered | None) -> tuple[cst.BaseExpression, ...]:
    tests: list[cst.BaseExpression] = []
    guards: dict[int, cst.BaseExpression] | None = None
    for node, target, value in asked("assignments", function, _function_assignments, remembered):
        if target != index or _constant(value):
            continue  # a sentinel (`-1`) is no group index
        guards = asked("group tests", function, _guards, remembered) if guards is None else guards
        test = guards.get(id(node))
        if test is None:
            return ()  # chosen some other way: every kind may reach the site
        tests.append(test)
    return (_any_of(tests),) if tests else ()


def _function_assignments(function: cst.CSTNode) -> list[tuple[cst.CSTNode, str | None, cst.BaseExpression]]:
    """(statement, target, value) of every `=` and annotated `=` statement in the function, in preorder."""
    return [(node, target, value) for node in preorder(function) for target, value in _assignments(node)]


def _guards(function: cst.CSTNode) -> dict[int, cst.BaseExpression]:
    """Each node of the function under a group `isinstance` test's body, by id → the first such test in preorder
    whose body holds it (the outermost)."""
    found: dict[int, cst.BaseExpression] = {}
    for node in preorder(function):
        if isinstance(node, cst.If) and _is_group_isinstance(node.test):
            for inner in preorder(node.body):
                found.setdefault(id(inner), node.test)
    return found


def use_test(node: cst.CSTNode, parent, remembered: Remembered | None = None) -> cst.BaseExpression | None:
    """The site is the value of `name = <site>`, read only in some branches of the `if`/`elif` chain that
    follows it (and nowhere after the chain): the test that a kind takes one of those branches."""
    assign = parent(node)
    if not isinstance(assign, cst.Assign) or assign.value is not node or len(assign.targets) != 1:
        return None
    target = assign.targets[0].target
    if not isinstance(target, cst.Name):
        return None
    line = parent(assign)
    block = parent(line) if isinstance(line, cst.SimpleStatementLine) else None
    if not isinstance(block, cst.IndentedBlock):
        return None
    body = block.body
    position = asked("statement places", block, statement_places, remembered).get(id(line))
    if position is None or position + 1 >= len(body) or not isinstance(body[position + 1], cst.If):
        return None
    last_reads = asked("last reads", block, _last_reads, remembered)
    if last_reads.get(target.value, -1) >= position + 2:  # read by a statement after the chain
        return None
    reading: list[cst.BaseExpression] = []
    earlier: list[cst.BaseExpression] = []
    branch: cst.If | cst.Else | None = body[position + 1]
    while isinstance(branch, cst.If):
        if _reads(branch.test, target.value):
            return None
        if _reads(branch.body, target.value):
            reading.append(_all_of([*(_not(t) for t in earlier), branch.test]))
        earlier.append(branch.test)
        branch = branch.orelse
    if isinstance(branch, cst.Else) and _reads(branch.body, target.value):
        reading.append(_all_of([_not(t) for t in earlier]))
    if not reading:
        return _never()
    return _any_of(reading)


def _last_reads(block: cst.IndentedBlock) -> dict[str, int]:
    """Each name → the last place in the block whose statement reads it."""
    last: dict[str, int] = {}
    for place, statement in enumerate(block.body):
        for inner in preorder(statement):
            if type(inner) is cst.Name:
                last[inner.value] = place
    return last


def _assignments(statement: cst.CSTNode):
    if not isinstance(statement, cst.SimpleStatementLine):
        return
    for small in statement.body:
        if isinstance(small, cst.Assign):
            for target in small.targets:
                yield dotted(target.target), small.value
        elif isinstance(small, cst.AnnAssign) and small.value is not None:
            yield dotted(small.target), small.value


def _constant(value: cst.BaseExpression) -> bool:
    return isinstance(value, cst.Integer) or (
        isinstance(value, cst.UnaryOperation) and isinstance(value.expression, cst.Integer)
    )


def _is_group_isinstance(test: cst.BaseExpression) -> bool:
    return (
        isinstance(test, cst.Call)
        and isinstance(test.func, cst.Name)
        and test.func.value == "isinstance"
        and len(test.args) == 2
        and (dotted(test.args[0].value) or "").endswith(".kv_cache_spec")
    )


def _reads(node: cst.CSTNode, name: str) -> bool:
    return any(isinstance(n, cst.Name) and n.value == name for n in preorder(node))


def _not(test: cst.BaseExpression) -> cst.BaseExpression:
    return cst.UnaryOperation(cst.Not(), test)


def _all_of(tests: list[cst.BaseExpression]) -> cst.BaseExpression:
    result = tests[0]
    for test in tests[1:]:
        result = cst.BooleanOperation(result, cst.And(), test)
    return result


def _any_of(tests: list[cst.BaseExpression]) -> cst.BaseExpression:
    result = tests[0]
    for test in tests[1:]:
        result = cst.BooleanOperation(result, cst.Or(), test)
    return result


def _never() -> cst.BaseExpression:
    """A test no kind passes: the value is read in no branch."""
    return cst.Comparison(cst.Integer("0"), [cst.ComparisonTarget(cst.Equal(), cst.Integer("1"))])


def single_group_binding(subject: str, function: cst.CSTNode | None, remembered: Remembered | None = None) -> bool:
    """`subject = groups[0].kv_cache_spec if len(groups) == 1 else None` (its only binding in the function):
    the spec of a config's only group, None with several groups."""
    if function is None:
        return False
    assignments = asked("assignments", function, _function_assignments, remembered)
    values = [value for _, target, value in assignments if target == subject]
    if len(values) != 1 or not isinstance(values[0], cst.IfExp):
        return False
    choice = values[0]
    test = choice.test
    return (
        isinstance(choice.orelse, cst.Name)
        and choice.orelse.value == "None"
        and isinstance(test, cst.Comparison)
        and len(test.comparisons) == 1
        and isinstance(test.comparisons[0].operator, cst.Equal)
        and isinstance(test.comparisons[0].comparator, cst.Integer)
        and test.comparisons[0].comparator.value == "1"
        and isinstance(test.left, cst.Call)
        and isinstance(test.left.func, cst.Name)
        and test.left.func.value == "len"
        and (dotted(test.left.args[0].value) or "").endswith("kv_cache_groups")
    )


def past_single_group_exit(
    node: cst.CSTNode, function: cst.CSTNode | None, parent, remembered: Remembered | None = None
) -> bool:
    """`node` follows, in its function, an `if len(<groups>) == 1: return …` (or `<= 1`, `< 2`) that leaves
    the function whenever the config has one group: only a config of several groups reaches it."""
    if function is None:
        return False
    groups: set[str] | None = None
    current = node
    while current is not None and current is not function:
        block = parent(current)
        if isinstance(block, cst.IndentedBlock):
            if groups is None:
                assignments = asked("assignments", function, _function_assignments, remembered)
                groups = _group_list_names(assignments)

            def first_exit(block: cst.IndentedBlock, groups: set[str] = groups) -> int:
                # the first place holding a single-group exit; past the end: none
                exits = (place for place, s in enumerate(block.body) if _single_group_exit(s, groups))
                return next(exits, len(block.body))

            places = asked("statement places", block, statement_places, remembered)
            if asked("single-group exits", block, first_exit, remembered) < places.get(id(current), 0):
                return True
        current = block
    return False


def _group_list_names(assignments: list[tuple[cst.CSTNode, str | None, cst.BaseExpression]]) -> set[str]:
    """Names the function binds to a group list (`groups = kv_cache_config.kv_cache_groups`), of its assignments."""
    return {target for _, target, value in assignments if target and (dotted(value) or "").endswith("kv_cache_groups")}


def _single_group_exit(statement: cst.CSTNode, groups: set[str]) -> bool:
    if not isinstance(statement, cst.If) or statement.orelse is not None or not _one_group(statement.test, groups):
        return False
    body = statement.body.body if isinstance(statement.body, cst.IndentedBlock) else [statement.body]
    last = body[-1] if body else None
    smalls = last.body if isinstance(last, (cst.SimpleStatementLine, cst.SimpleStatementSuite)) else ()
    return bool(smalls) and isinstance(smalls[-1], (cst.Return, cst.Raise))


def _one_group(test: cst.BaseExpression, groups: set[str]) -> bool:
    """`len(<groups>) == 1`, `<= 1` or `< 2`: true for a config of one group (and of none)."""
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    operator, bound = test.comparisons[0].operator, test.comparisons[0].comparator
    counted = test.left
    if not (isinstance(counted, cst.Call) and isinstance(counted.func, cst.Name) and counted.func.value == "len"):
        return False
    if len(counted.args) != 1:
        return False
    name = dotted(counted.args[0].value) or ""
    if not (name.endswith("kv_cache_groups") or name in groups) or not isinstance(bound, cst.Integer):
        return False
    return (isinstance(operator, (cst.Equal, cst.LessThanEqual)) and bound.value == "1") or (
        isinstance(operator, cst.LessThan) and bound.value == "2"
    )


def first_group_fallback(
    check: cst.CSTNode, function: cst.CSTNode | None, parent, remembered: Remembered | None = None
) -> bool:
    """`for i, g in enumerate(<groups>): if <check>: return i` then `return 0` right after the loop: a
    config whose only group is the container gets 0 on either branch (the same answer for it as for its
    layers); only a config of several groups can get another group's index."""
    branch = parent(check)
    if function is None or not isinstance(branch, cst.If) or branch.test is not check or branch.orelse is not None:
        return False
    loop = _enclosing_loop(branch, parent)
    if loop is None or not isinstance(loop.target, cst.Tuple) or len(loop.target.elements) != 2:
        return False
    iterated = loop.iter
    if not (
        isinstance(iterated, cst.Call) and isinstance(iterated.func, cst.Name) and iterated.func.value == "enumerate"
    ):
        return False
    index = loop.target.elements[0].value
    if not isinstance(index, cst.Name) or not _returns(
        branch.body, lambda v: isinstance(v, cst.Name) and v.value == index.value
    ):
        return False
    block = parent(loop)
    if loop.orelse is not None or not isinstance(block, cst.IndentedBlock):
        return False
    body = block.body
    position = asked("statement places", block, statement_places, remembered)[id(loop)]
    after = body[position + 1 : position + 2]
    return bool(after) and _returns(after[0], lambda v: isinstance(v, cst.Integer) and v.value == "0")


def _enclosing_loop(branch: cst.If, parent) -> cst.For | None:
    """The `for` whose body directly holds `branch`."""
    block = parent(branch)
    loop = parent(block) if isinstance(block, cst.IndentedBlock) else None
    return loop if isinstance(loop, cst.For) and loop.body is block else None


def _returns(node: cst.CSTNode, value_is) -> bool:
    """`node` (a suite or a statement) starts with `return <value>` where `value_is(value)`."""
    if isinstance(node, cst.IndentedBlock):
        node = node.body[0] if node.body else None
    smalls = node.body if isinstance(node, (cst.SimpleStatementLine, cst.SimpleStatementSuite)) else ()
    return bool(smalls) and isinstance(smalls[0], cst.Return) and value_is(smalls[0].value)
