"""A class name's ancestry as the census reads it: every class of that name, then their bases breadth first, each
name once (`Ancestry._walked`: the order the census always read), and the questions the census asks along it (the
spec method, an attribute's values, the attention backend and its layouts), each read up to the class that settles it.

Each question is answered once per name (`Ancestry.answer`), from its bases' answers where they give it: a name with
one base that bears on the question reads on as that base does (bases that reach nothing to read change nothing of
the rest's order); with several, an attribute's values (no order) join when at most one base settles them, farther
than the others find any. A chain of a few thousand layer classes, with or without a second base at each, was walked
whole for every class and question (quadratic: 4,000 classes 18 s). A name whose bases' answers do not give the order
(several bases that bear on the spec method, or that settle the backend) or that lies on a loop of bases other than a
ring is walked as before, up to the class that settles it, each class read charged to the census's budget (no
release walks; a crafted module of such names stops there instead of costing minutes).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from functools import partial
from itertools import chain

from kvlint.analysis.census.budget import Budget
from kvlint.analysis.census.class_texts import ClassText, attribute_values

# What a class read on a walk costs the census's budget. No vLLM release walks at all (counted on 0.24.0, 0.26.0-
# 0.31.0, 0.33.0, 0.34.0: every answer is composed from the bases'); a crafted module walks each name through all
# the others, quadratic — a loop of 4,000 classes each with a mixin, or 4,000 classes each with two bases whose spec
# methods call `super()` — and stops at the budget (the index then says its analysis is incomplete) within 40,000
# reads (the default budget over this cost), under a second.
_WALK_READ_COST = 10_000


@dataclass(frozen=True)
class Question:
    """What a reading asks of each class along a walk: `of(cls)` gives what it finds there (a tuple) and whether
    the reading stops there."""

    key: Hashable  # the answers kept, per question
    of: Callable[[ClassText], tuple[tuple, bool]]
    ordered: bool  # the findings in walk order, repeats kept; else only which were found (a frozenset)


@dataclass(frozen=True)
class Answer:
    found: tuple | frozenset
    stopped: bool  # some class settled the question (else every class reached was read)
    # How far from the name (in bases) the class that settled it lies; unsettled: at most how far the classes that
    # found something lie. What lets two bases' answers be joined (`_composed`).
    reach: int = 0


def _method(name: str, settles: Callable[[str], bool], cls: ClassText) -> tuple[tuple, bool]:
    method = cls.methods.get(name)
    return ((), False) if method is None else ((method,), settles(method))


def _values(attribute: str, cls: ClassText) -> tuple[tuple, bool]:
    found = attribute_values(cls, attribute)
    return ((), False) if found is None else (tuple(found), "?" not in found)


# The spec method's texts: the nearest, and the bases' only through `super().get_kv_cache_spec`.
SPEC_METHOD = Question("spec method", partial(_method, "get_kv_cache_spec", lambda text: "super()" not in text), True)
# The nearest class's attention backend, and the nearest backend class's layouts.
BACKEND = Question("backend", partial(_method, "get_attn_backend", lambda text: True), True)
LAYOUTS = Question("layouts", partial(_method, "supported_kv_cache_layouts", lambda text: True), True)


def attribute_question(attribute: str) -> Question:
    """The values the nearest classes set `attribute` to, up to one that sets it to constants only."""
    return Question(("attribute", attribute), partial(_values, attribute), ordered=False)


class Ancestry:
    def __init__(self, classes: dict[str, list[ClassText]], budget: Budget | None = None):
        self.classes = classes
        self._budget = budget if budget is not None else Budget()
        # The bases that have classes, each once, in the walk's order (a name its own base adds nothing).
        self._bases = {
            name: tuple(dict.fromkeys(b for cls in found for b in cls.bases if b in classes and b != name))
            for name, found in classes.items()
        }
        self._tangled: frozenset[str] | None = None
        self._answers: dict[Hashable, dict[str, Answer]] = {}

    def answer(self, name: str, question: Question) -> Answer:
        """The question read along the walk from `name`, as `_walked` reads it; a chain of names answered by a
        stack of the names waiting for their bases (no recursion: chains are thousands long)."""
        answers = self._answers.setdefault(question.key, {})
        if self._tangled is None:
            self._tangled = _tangled(self._bases)
        waiting, stack = set(), [name]
        while stack:
            current = stack[-1]
            if current in answers:
                stack.pop()
                continue
            own, stops = self._own(current, question)
            unanswered = [base for base in self._bases.get(current, ()) if base not in answers]
            if stops or current in self._tangled:
                answers[current] = Answer(_found(own, question), True) if stops else self._walked(current, question)
            elif current in waiting and unanswered:
                self._answer_ring(current, question, answers)  # back round a ring that nothing on it settles
            elif unanswered:
                waiting.add(current)
                stack.extend(unanswered)
            else:
                composed = _composed(own, [answers[base] for base in self._bases.get(current, ())], question)
                answers[current] = composed if composed is not None else self._walked(current, question)
        return answers[name]

    def _own(self, name: str, question: Question) -> tuple[tuple, bool]:
        found: list = []
        for cls in self.classes.get(name, ()):
            part, stops = question.of(cls)
            found += part
            if stops:
                return tuple(found), True
        return tuple(found), False

    def _walked(self, name: str, question: Question) -> Answer:
        """The classes of the name and of its bases, breadth first, each name once, read up to one that settles
        the question."""
        found: list = []
        reach = 0
        seen: set[str] = set()
        queue = deque([(name, 0)])
        while queue:
            current, distance = queue.popleft()
            if current in seen:
                continue
            seen.add(current)
            for cls in self.classes.get(current, ()):
                self._budget.spend(_WALK_READ_COST, cls.module)
                part, stops = question.of(cls)
                found += part
                if stops:
                    return Answer(_found(found, question), True, distance)
                reach = distance if part else reach
                queue.extend((base, distance + 1) for base in cls.bases)
        return Answer(_found(found, question), False, reach)

    def _answer_ring(self, name: str, question: Question, answers: dict[str, Answer]) -> None:
        """A ring of names, each with one base (the next), none settling the question: each reads the whole ring
        from itself round."""
        ring = [name]
        while (following := self._bases[ring[-1]][0]) != name:
            ring.append(following)
        owns = [self._own(member, question)[0] for member in ring]
        if not question.ordered:
            found = frozenset(chain.from_iterable(owns))
            answers.update((member, Answer(found, False, len(ring) - 1)) for member in ring)
            return
        for index, member in enumerate(ring):
            answers[member] = Answer(tuple(chain.from_iterable(owns[index:] + owns[:index])), False, len(ring) - 1)


def _found(found: tuple | list, question: Question) -> tuple | frozenset:
    return tuple(found) if question.ordered else frozenset(found)


def _composed(own: tuple, bases: list[Answer], question: Question) -> Answer | None:
    """A name's answer from its own classes' findings (none settling it) and its bases' answers; None where they
    do not give it."""
    bearing = [answer for answer in bases if answer.found or answer.stopped]  # the others reach nothing to read
    if not bearing:
        return Answer(_found(own, question), False)
    if len(bearing) == 1:
        base = bearing[0]
        found = base.found if not own else own + base.found if question.ordered else base.found.union(own)
        return Answer(found, base.stopped, base.reach + 1)
    settled = [answer for answer in bearing if answer.stopped]
    if question.ordered or len(settled) > 1:
        return None  # the order of several bases' classes settles it: walked
    # Read in whatever order: every class the unsettled bases reach, and the settled base's up to the class that
    # settles it, when that class lies farther than all of them (no other class can settle it).
    if settled and any(answer.reach >= settled[0].reach for answer in bearing if not answer.stopped):
        return None
    reach = settled[0].reach if settled else max(answer.reach for answer in bearing)
    return Answer(frozenset(own).union(*(answer.found for answer in bearing)), bool(settled), reach + 1)


def _tangled(bases: dict[str, tuple[str, ...]]) -> frozenset[str]:
    """The names on a loop of bases other than a ring of names with one base each (Tarjan's strongly connected
    components, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    tangled: set[str] = set()
    for root in bases:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            name, position = work.pop()
            if position == 0:
                index[name] = low[name] = len(index)
                stack.append(name)
                on_stack.add(name)
            children = bases[name]
            if position < len(children):
                work.append((name, position + 1))
                child = children[position]
                if child not in index:
                    work.append((child, 0))
                elif child in on_stack:
                    low[name] = min(low[name], index[child])
                continue
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[name])
            if low[name] == index[name]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == name:
                        break
                if len(component) > 1 and any(len(bases[member]) != 1 for member in component):
                    tangled.update(component)
    return frozenset(tangled)
