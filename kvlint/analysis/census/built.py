"""What a constructor builds, as the census combines it: alternatives of layer-class sets (a config branch
makes two), products of what its statements build, and a merge past too many alternatives.

The witness sets (where each layer class is built, which are configured apart, the spec classes its calls can
build) are joined only when read (`Joined`): a product of one more statement costs what that statement adds,
not a copy of all a constructor built before it (a crafted constructor of 20,000 layer constructions took 30 s;
the census reads each model's sets once, at its end).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

_MAX_ALTERNATIVES = 16


class Joined:
    """A set made by unions, joined when first read: each union keeps its parts (constant time), the read
    walks every part once, shared ones too, and keeps the set."""

    __slots__ = ("_parts", "_set")

    def __init__(self, items: frozenset = frozenset(), parts: tuple[Joined, ...] = ()):
        self._set: frozenset | None = None if parts else items
        self._parts = parts

    @staticmethod
    def of(*parts: Joined) -> Joined:
        """The union of `parts`: one of them when the others are empty."""
        kept = tuple(part for part in parts if part._set is None or part._set)  # a union of parts is never empty
        return kept[0] if len(kept) == 1 else Joined(parts=kept) if kept else _EMPTY

    def read(self) -> frozenset:
        if self._set is None:
            leaves, seen, pending = [], set(), list(self._parts)
            while pending:
                part = pending.pop()
                if id(part) in seen:
                    continue
                seen.add(id(part))
                if part._set is None:
                    pending.extend(part._parts)
                else:
                    leaves.append(part._set)
            self._set, self._parts = frozenset().union(*leaves), ()
        return self._set


_EMPTY = Joined()
# In Built._calls, a layer class called at two or more sites (no site is ""): built twice where both sides run.
_SEVERAL = ""


@dataclass(frozen=True)
class Built:
    """What a constructor builds: each alternative a set of layer classes; `merged` when alternatives were
    joined (too many to keep apart): then a set may hold classes no one checkpoint builds together."""

    alternatives: tuple[frozenset[str], ...]
    merged: bool = False
    _sites: Joined = _EMPTY
    _varied: Joined = _EMPTY
    # Layer class → the one "module:line" that calls it, or _SEVERAL: all `product` needs of the calls, kept per
    # class (a class object only read, `attn_cls is MLAAttention`, is no call: `referenced`).
    _calls: dict[str, str] = field(default_factory=dict)
    _specs: Joined = _EMPTY

    @property
    def sites(self) -> frozenset[tuple[str, str]]:
        """(layer class, "module:line") of each call or reference that builds a layer class."""
        return self._sites.read()

    @property
    def varied(self) -> frozenset[str]:
        """The layer classes whose instances in one model can be configured apart, so choose their spec apart:
        built with an argument read from the layer's position (a window given only to the sliding layers; also
        through a class held in a local, varied_by_call), or built twice in one alternative (by two calls that
        both run, not by the two branches of an `if`; a class object only named is no call, see `referenced`)."""
        return self._varied.read()

    @property
    def specs(self) -> frozenset[tuple[str, str]]:
        """(layer class, spec class) its calls can build, "*" for any of the class's (a call whose arguments are
        unknown or decide nothing): a call leaving the attribute that chooses the spec to its None default builds
        only what the class builds then (kvlint.analysis.census.spec_parameters)."""
        return self._specs.read()


NOTHING = Built((frozenset(),))


def layer_built(name: str, site: str, apart: bool, specs: frozenset[str] = frozenset({"*"})) -> Built:
    """A layer class built once, at `site`; `apart`: the call gives what chooses its spec a value read from the
    layer's position; `specs`: the spec classes the call can build ("*": any)."""
    return Built(
        (frozenset({name}),),
        _sites=Joined(frozenset({(name, site)})),
        _varied=Joined(frozenset({name} if apart else ())),
        _calls={name: site},
        _specs=Joined(frozenset((name, spec) for spec in specs)),
    )


def varied_by_call(named: frozenset[str]) -> Built:
    """A call with per-layer arguments of a class held in a variable: each layer class the variable's value
    names configured apart (the classes those build are given nothing of the call's arguments)."""
    return Built((frozenset(),), _varied=Joined(named))


def referenced(built: Built) -> Built:
    """What naming a class object builds: as calling it would, but no call of it here (see Built.varied)."""
    return replace(built, _calls={})


def product(left: Built, right: Built) -> Built:
    if right is NOTHING or left is NOTHING:  # most statements build nothing: the product is the other side
        return left if right is NOTHING else right
    combined = list(dict.fromkeys(a | b for a in left.alternatives for b in right.alternatives))
    varied = Joined.of(left._varied, right._varied)
    if left._calls and right._calls:  # both call a layer class: one both call at different lines is built twice
        shared = frozenset().union(*(a & b for a in left.alternatives for b in right.alternatives))
        twice = frozenset(name for name in shared if _called_twice(left._calls.get(name), right._calls.get(name)))
        varied = Joined.of(varied, Joined(twice))
    return _built(combined, left.merged or right.merged, [left, right], varied)


def either(choices: list[Built]) -> Built:
    combined = list(dict.fromkeys(a for choice in choices for a in choice.alternatives))
    merged = any(choice.merged for choice in choices)
    return _built(combined, merged, choices, Joined.of(*(choice._varied for choice in choices)))


def _built(combined: list[frozenset[str]], merged: bool, parts: list[Built], varied: Joined) -> Built:
    """Alternatives and what `parts` witness, together; merged past _MAX_ALTERNATIVES."""
    sites, specs = Joined.of(*(part._sites for part in parts)), Joined.of(*(part._specs for part in parts))
    calls: dict[str, str] = {}
    for part in parts:
        calls = _joined_calls(calls, part._calls)
    if len(combined) > _MAX_ALTERNATIVES:
        return Built((frozenset().union(*combined),), True, sites, varied, calls, specs)
    return Built(tuple(combined), merged, sites, varied, calls, specs)


def _called_twice(left: str | None, right: str | None) -> bool:
    """Whether the calls of one class on both sides (its one site, _SEVERAL, or None for none) are two or more."""
    return left == _SEVERAL or right == _SEVERAL or (left is not None and right is not None and left != right)


def _joined_calls(left: dict[str, str], right: dict[str, str]) -> dict[str, str]:
    """Both sides' calls per class, in time the smaller side's: the larger is kept when it already says all
    (never changed in place: a constructor's Built is shared by every caller)."""
    small, large = (left, right) if len(left) <= len(right) else (right, left)
    changed = {}
    for name, site in small.items():
        known = large.get(name)
        joined = site if known is None else known if known == site else _SEVERAL
        if joined != known:
            changed[name] = joined
    return {**large, **changed} if changed else large
