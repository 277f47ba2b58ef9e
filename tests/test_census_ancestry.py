"""A layer class's ancestry (kvlint.analysis.census.ancestry) answers each question as the census read it before:
a walk of every class of the name, then their bases breadth first, each name once, up to the class that settles
the question. Compared on random class graphs — chains, diamonds, several definitions of one name, bases that
loop — with that walk written out plainly here."""

from __future__ import annotations

import random
import re

import pytest

from kvlint.analysis.census.class_texts import ClassText, attribute_values, classes_of, returned_texts
from kvlint.analysis.census.reading import _CALLED, _Reader

SPECS = frozenset({"SpecA", "SpecB", "SpecC"})
NAMES = [f"L{i}" for i in range(10)]


class _PlainWalk:
    """The census's reading before ancestry.py: one breadth-first walk per class name and question."""

    def __init__(self, classes: dict[str, list[ClassText]]):
        self.classes = classes

    def _mro(self, name: str) -> list[ClassText]:
        order, seen, queue = [], set(), [name]
        while queue:
            current = queue.pop(0)
            if current in seen:
                continue
            seen.add(current)
            for cls in self.classes.get(current, ()):
                order.append(cls)
                queue.extend(cls.bases)
        return order

    def spec_method(self, name: str) -> tuple[set[str], list[str]]:
        built, texts = set(), []
        for cls in self._mro(name):
            method = cls.methods.get("get_kv_cache_spec")
            if method is None:
                continue
            texts.append(method)
            built |= set(_CALLED.findall(method)) & SPECS
            if "super()" not in method:
                break
        return built, texts

    def value(self, name: str, attribute: str) -> str | None:
        values: set[str] = set()
        for cls in self._mro(name):
            found = attribute_values(cls, attribute)
            if found is not None:
                values |= found
                if "?" not in found:
                    break
        return "|".join(sorted(values)) if values else None

    def layouts(self, name: str) -> tuple[str, ...] | None:
        for cls in self._mro(name):
            method = cls.methods.get("get_attn_backend")
            if method is None:
                continue
            backend = [name for name in returned_texts(method) if name.isidentifier()]
            if len(backend) != 1:
                return None
            for backend_cls in self._mro(backend[0]):
                declared = backend_cls.methods.get("supported_kv_cache_layouts")
                if declared is not None:
                    return tuple(dict.fromkeys(re.findall(r"\bKVCacheLayout\.(\w+)", declared))) or None
            return None
        return None


def _body(rng: random.Random) -> str:
    lines = []
    kind = rng.random()
    if kind < 0.3:
        lines.append(f"    kind = Kind.{rng.choice('XYZ')}")
    elif kind < 0.45:
        lines.append("    kind = compute()")
    elif kind < 0.55:
        lines.append(f"    def __init__(self):\n        self.kind = Kind.{rng.choice('XYZ')}")
    elif kind < 0.65:  # a constant and a value set at run time: read on past it, with a value of its own
        lines.append(f"    kind = Kind.{rng.choice('XYZ')}\n    def __init__(self):\n        self.kind = pick()")
    spec = rng.random()
    if spec < 0.3:
        lines.append(f"    def get_kv_cache_spec(self):\n        return {rng.choice(sorted(SPECS))}(1)")
    elif spec < 0.55:
        lines.append(
            f"    def get_kv_cache_spec(self):\n        return super().get_kv_cache_spec() or {rng.choice(sorted(SPECS))}()"
        )
    elif spec < 0.6:
        lines.append("    def get_kv_cache_spec(self):\n        return None")
    backend = rng.random()
    if backend < 0.3:
        lines.append(f"    def get_attn_backend(self):\n        return Backend{rng.randrange(2)}")
    elif backend < 0.35:
        lines.append("    def get_attn_backend(self):\n        return a if b else c")
    if rng.random() < 0.3:
        lines.append(
            f"    def supported_kv_cache_layouts():\n        return [KVCacheLayout.{rng.choice(['NHD', 'HND'])}]"
        )
    return "\n".join(lines) or "    pass"


def _module(rng: random.Random, loops: bool) -> str:
    parts = []
    for _ in range(rng.randint(2, 14)):
        index = rng.randrange(len(NAMES))
        # Mostly bases defined lower down the list (a hierarchy Python can build); with `loops`, any name.
        candidates = NAMES if loops else NAMES[:index]
        count = min(len(candidates), rng.choice([0, 1, 1, 1, 2, 2, 3]))
        bases = rng.sample(candidates, count) + (["nn.Module"] if rng.random() < 0.2 else [])
        parts.append(f"class {NAMES[index]}({', '.join(bases)}):\n{_body(rng)}\n")
    for backend in range(2):
        if rng.random() < 0.6:
            base = rng.choice(["", "Backend0", "L1"])
            layouts = f"KVCacheLayout.{rng.choice(['NHD', 'HND'])}"
            parts.append(
                f"class Backend{backend}({base}):\n    def supported_kv_cache_layouts():\n        return [{layouts}]\n"
            )
    rng.shuffle(parts)
    return "\n".join(parts)


@pytest.mark.parametrize("loops", [False, True], ids=["hierarchies", "bases-that-loop"])
def test_each_question_is_answered_as_one_walk_per_name_answered_it(loops):
    rng = random.Random(30 + loops)
    answered = 0
    for _ in range(1000):
        text = _module(rng, loops)
        classes: dict[str, list[ClassText]] = {}
        for cls in classes_of("m.py", text.encode()):
            classes.setdefault(cls.name, []).append(cls)
        reader, plain = _Reader(classes, SPECS), _PlainWalk(classes)
        for name in [*NAMES, "Backend0", "Backend1", "Missing"]:
            expected = (plain.spec_method(name), plain.value(name, "kind"), plain.layouts(name))
            assert (reader._spec_method(name), reader._value(name, "kind"), reader._layouts(name)) == expected, text
            answered += bool(expected[0][0] or expected[1] or expected[2])
    assert answered > 1000  # the graphs give most names something to find


def test_two_bases_values_join_only_as_far_as_the_walk_reads():
    # An attribute's values (no order of their own): a base that settles them stops the walk there, so a second
    # base's runtime value counts only when the walk reaches it first, or nearer.
    text = (
        "class Runtime:\n    kind = pick()\nclass Constant:\n    kind = Kind.FULL\n"
        "class DeepConstant(Constant):\n    pass\nclass DeepRuntime(Runtime):\n    pass\n"
        "class SettledFirst(Constant, Runtime):\n    pass\nclass RuntimeFirst(Runtime, Constant):\n    pass\n"
        "class RuntimeNearer(DeepConstant, Runtime):\n    pass\nclass SettledNearer(Constant, DeepRuntime):\n    pass\n"
        "class BothDeep(DeepConstant, DeepRuntime):\n    pass\nclass Own(Runtime, Constant):\n    kind = Kind.SWA\n"
        "class MixedY:\n    kind = Kind.Y\n    def __init__(self):\n        self.kind = pick()\n"
        "class MixedZ:\n    kind = Kind.Z\n    def __init__(self):\n        self.kind = pick()\n"
        "class DeepMixedZ(MixedZ):\n    pass\nclass Three(DeepConstant, MixedY, DeepMixedZ):\n    pass\n"
    )
    classes: dict[str, list[ClassText]] = {}
    for cls in classes_of("m.py", text.encode()):
        classes.setdefault(cls.name, []).append(cls)
    reader, plain = _Reader(classes, SPECS), _PlainWalk(classes)
    expected = {
        "SettledFirst": "FULL",
        "RuntimeFirst": "?|FULL",
        "RuntimeNearer": "?|FULL",
        "SettledNearer": "FULL",
        "BothDeep": "FULL",  # both at two bases from it: the walk reaches Constant first
        "Own": "SWA",
        "Three": "?|FULL|Y",  # MixedY is read before Constant settles it; MixedZ, as far as Constant, is not
    }
    assert {name: reader._value(name, "kind") for name in expected} == expected
    assert {name: plain.value(name, "kind") for name in expected} == expected
