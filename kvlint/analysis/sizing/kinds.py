"""The rows of the sizing matrix: what a KV cache group's spec can be in the scanned tree.

Every concrete spec class of the tree's hierarchy, and the containers vLLM builds (a DSA group's MLA and
indexer layers, one of full-attention layers, a mixed one), each with the reason vLLM rejects it under
DCP when an assertion in the tree says so.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from kvlint.analysis.sizing.evaluator import Evaluator
from kvlint.analysis.sizing.frame import Frame
from kvlint.analysis.sizing.program import Program
from kvlint.analysis.sizing.values import Container, Layer, truth
from kvlint.analysis.vocabulary import ATTENTION_ROOT, CONTAINER_CLASS


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


def spec_kinds(program: Program, evaluator: Evaluator) -> tuple[SpecKind, ...]:
    hierarchy = program.hierarchy
    roots = {n for n, bases in hierarchy.bases.items() if not any(b in hierarchy.bases for b in bases)}
    abstract = roots | {ATTENTION_ROOT, CONTAINER_CLASS}
    rejected = {cls: dcp_rejection(program, evaluator, cls) for cls in hierarchy.bases if cls not in abstract}
    kinds = [SpecKind(cls, Layer(cls), rejected[cls]) for cls in hierarchy.bases if cls not in abstract]
    if CONTAINER_CLASS in hierarchy.bases:
        for label, layers in _containers(program):
            reasons = [rejected.get(layer.cls) for layer in layers if rejected.get(layer.cls)]
            kinds.append(SpecKind(f"{CONTAINER_CLASS}{label}", Container(layers), reasons[0] if reasons else None))
    return tuple(kinds)


def _containers(program: Program) -> list[tuple[str, tuple[Layer, ...]]]:
    bases = program.hierarchy.bases
    containers: list[tuple[str, tuple[Layer, ...]]] = []
    if "MLAAttentionSpec" in bases:
        indexer = program.indexer or Layer("MLAAttentionSpec")
        indexer = Layer(indexer.cls, indexer.overrides, role="indexer")
        containers.append(("{MLA, indexer}", (Layer("MLAAttentionSpec"), indexer)))
    if "FullAttentionSpec" in bases:
        containers.append(("{FullAttention×2}", (Layer("FullAttentionSpec"), Layer("FullAttentionSpec"))))
    if "SlidingWindowSpec" in bases and "FullAttentionSpec" in bases:
        containers.append(("{SlidingWindow, FullAttention}", (Layer("SlidingWindowSpec"), Layer("FullAttentionSpec"))))
    return containers


def dcp_rejection(program: Program, evaluator: Evaluator, cls: str) -> str | None:
    """An `assert` on the DCP size, at the top of a method this class has, that fails for it when DCP > 1."""
    module = evaluator.interface_module()
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
                frame = Frame(module)
                env = evaluator.bind(method, [], {}, Layer(cls), frame)
                if truth(evaluator.eval(statement.test, env, frame)) is False:
                    return f"{owner}.{method.name} asserts `{text}`"
    return None
