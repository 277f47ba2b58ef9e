"""How each statement changes the evaluator's environment (a handler per statement kind).

A handler returns the environment after the statement, or None when every path through it returned or
raised. Where a test cannot be decided both branches run and their environments merge (a name keeps its
value only where both agree); a loop over an exactly known sequence runs every iteration, any other loop
runs once and may run zero times.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import TYPE_CHECKING

from kvlint.analysis.sizing.values import UNKNOWN, Groups, merge, truth

if TYPE_CHECKING:
    from kvlint.analysis.sizing.evaluator import Evaluator
    from kvlint.analysis.sizing.frame import Frame

_MAX_UNROLLED = 64  # iterations of a loop over a known sequence; a longer one runs once


def run(evaluator: Evaluator, node: ast.stmt, env: dict, frame: Frame) -> dict | None:
    handler = _STATEMENTS.get(type(node))
    if handler is not None:
        return handler(evaluator, node, env, frame)
    # Anything else (match, delete, …): forget what it may assign; what it may read counts as read.
    for child in ast.walk(node):
        if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store):
            env[child.id] = UNKNOWN
        elif isinstance(child, ast.Name):
            frame.read(child.id)
    return env


def _expression(evaluator: Evaluator, node: ast.Expr, env: dict, frame: Frame) -> dict | None:
    evaluator.eval(node.value, env, frame)
    return env


def _assignment(evaluator: Evaluator, node: ast.Assign | ast.AnnAssign, env: dict, frame: Frame) -> dict | None:
    if node.value is None:
        return env
    value = evaluator.eval(node.value, env, frame)
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    for target in targets:
        if isinstance(target, ast.Name):
            frame.rebind(target.id)
        evaluator.assign(target, value, env)
    if len(targets) == 1 and isinstance(targets[0], ast.Name) and id(node.value) in frame.sites:
        frame.defer(node.value, targets[0].id)
    return env


def _augmented(evaluator: Evaluator, node: ast.AugAssign, env: dict, frame: Frame) -> dict | None:
    current = evaluator.eval(node.target, env, frame)
    value = evaluator.binop(node.op, current, evaluator.eval(node.value, env, frame))
    frame.record(node, value)
    evaluator.assign(node.target, value, env)
    return env


def _return(evaluator: Evaluator, node: ast.Return, env: dict, frame: Frame) -> dict | None:
    frame.returns.append(evaluator.eval(node.value, env, frame) if node.value is not None else None)
    return None


def _raise(evaluator: Evaluator, node: ast.Raise, env: dict, frame: Frame) -> dict | None:
    return None


def _assert(evaluator: Evaluator, node: ast.Assert, env: dict, frame: Frame) -> dict | None:
    return None if truth(evaluator.eval(node.test, env, frame)) is False else env


def _if(evaluator: Evaluator, node: ast.If, env: dict, frame: Frame) -> dict | None:
    decided = truth(evaluator.eval(node.test, env, frame))
    if decided is True:
        return evaluator.block(node.body, env, frame)
    if decided is False:
        return evaluator.block(node.orelse, env, frame)
    return merge(evaluator.block(node.body, dict(env), frame), evaluator.block(node.orelse, dict(env), frame))


def _for(evaluator: Evaluator, node: ast.For | ast.AsyncFor, env: dict, frame: Frame) -> dict | None:
    iterable = evaluator.eval(node.iter, env, frame)
    items = evaluator.items(iterable)
    jumps = any(isinstance(n, (ast.Break, ast.Continue)) for n in _own_statements(node.body))
    if items and not isinstance(iterable, Groups) and not jumps and len(items) <= _MAX_UNROLLED:
        # An exactly known sequence (the layers of a container): run every iteration.
        current: dict | None = env
        for item in items:
            current = dict(current)
            evaluator.assign(node.target, item, current)
            current = evaluator.block(node.body, current, frame)
            if current is None:
                return None
        return evaluator.block(node.orelse, current, frame) if node.orelse else current
    inner = dict(env)
    evaluator.assign(node.target, items[0] if items else UNKNOWN, inner)
    frame.jumps.append([])
    after = evaluator.block(node.body, inner, frame)
    jumped = frame.jumps.pop()
    after = merge(after, evaluator.block(node.orelse, dict(env), frame)) if node.orelse else after
    for exit_env in jumped:  # `break` / `continue` leave the (once-run) loop with their state
        after = merge(after, exit_env)
    return merge(env, after)  # the loop may run zero times


def _while(evaluator: Evaluator, node: ast.While, env: dict, frame: Frame) -> dict | None:
    evaluator.eval(node.test, env, frame)
    frame.jumps.append([])
    after = evaluator.block(node.body, dict(env), frame)
    for exit_env in frame.jumps.pop():
        after = merge(after, exit_env)
    return merge(env, after)


def _with(evaluator: Evaluator, node: ast.With | ast.AsyncWith, env: dict, frame: Frame) -> dict | None:
    for item in node.items:
        evaluator.eval(item.context_expr, env, frame)
    return evaluator.block(node.body, env, frame)


def _try(evaluator: Evaluator, node: ast.Try, env: dict, frame: Frame) -> dict | None:
    after = evaluator.block(node.body, dict(env), frame)
    after = evaluator.block(node.orelse, after, frame) if after is not None and node.orelse else after
    for handler in node.handlers:
        after = merge(after, evaluator.block(handler.body, dict(env), frame))
    return evaluator.block(node.finalbody, after, frame) if after is not None and node.finalbody else after


def _jump(evaluator: Evaluator, node: ast.Break | ast.Continue, env: dict, frame: Frame) -> dict | None:
    if frame.jumps:
        frame.jumps[-1].append(dict(env))
    return None


def _definition(
    evaluator: Evaluator, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef, env: dict, frame: Frame
) -> dict | None:
    for child in ast.walk(node):  # a closure may read a held value when it is called
        if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Load):
            frame.read(child.id)
    env[node.name] = UNKNOWN
    return env


def _nothing(evaluator: Evaluator, node: ast.stmt, env: dict, frame: Frame) -> dict | None:
    return env


def _own_statements(body: list[ast.stmt]):
    """Statements of a loop body, not descending into nested loops or functions."""
    stack = list(body)
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (ast.For, ast.AsyncFor, ast.While, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        stack.extend(child for child in ast.iter_child_nodes(node) if isinstance(child, ast.stmt))


_StatementHandler = Callable[["Evaluator", ast.stmt, dict, "Frame"], "dict | None"]
_STATEMENTS: dict[type, _StatementHandler] = {
    ast.Expr: _expression,
    ast.Assign: _assignment,
    ast.AnnAssign: _assignment,
    ast.AugAssign: _augmented,
    ast.Return: _return,
    ast.Raise: _raise,
    ast.Assert: _assert,
    ast.If: _if,
    ast.For: _for,
    ast.AsyncFor: _for,
    ast.While: _while,
    ast.With: _with,
    ast.AsyncWith: _with,
    ast.Try: _try,
    ast.Break: _jump,
    ast.Continue: _jump,
    ast.FunctionDef: _definition,
    ast.AsyncFunctionDef: _definition,
    ast.ClassDef: _definition,
    ast.Pass: _nothing,
    ast.Import: _nothing,
    ast.ImportFrom: _nothing,
    ast.Global: _nothing,
    ast.Nonlocal: _nothing,
}
