"""What a constructor builds, as the census combines it: alternatives of layer-class sets (a config branch
makes two), products of what its statements build, and a merge past too many alternatives."""

from __future__ import annotations

from dataclasses import dataclass, replace

_MAX_ALTERNATIVES = 16


@dataclass(frozen=True)
class Built:
    """What a constructor builds: each alternative a set of layer classes; `merged` when alternatives were
    joined (too many to keep apart): then a set may hold classes no one checkpoint builds together."""

    alternatives: tuple[frozenset[str], ...]
    merged: bool = False
    # (layer class, "module:line") of each call or reference that builds a layer class.
    sites: frozenset[tuple[str, str]] = frozenset()
    # The layer classes whose instances in one model can be configured apart, so choose their spec apart: built
    # with an argument read from the layer's position (a window given only to the sliding layers; also through
    # a class held in a local, varied_by_call), or built twice in one alternative (by two calls that both run,
    # not by the two branches of an `if`; a class object only named is no call, see `called`).
    varied: frozenset[str] = frozenset()
    # The (layer class, "module:line") of the calls among `sites`: a class object only read (`attn_cls is
    # MLAAttention`, `return MLAAttention`) is built where it is called, once, however often it is named.
    called: frozenset[tuple[str, str]] = frozenset()
    # (layer class, spec class) its calls can build, "*" for any of the class's (a call whose arguments are
    # unknown or decide nothing): a call leaving the attribute that chooses the spec to its None default builds
    # only what the class builds then (kvlint.analysis.census.spec_parameters).
    specs: frozenset[tuple[str, str]] = frozenset()


NOTHING = Built((frozenset(),))


def layer_built(name: str, site: str, apart: bool, specs: frozenset[str] = frozenset({"*"})) -> Built:
    """A layer class built once, at `site`; `apart`: the call gives what chooses its spec a value read from the
    layer's position; `specs`: the spec classes the call can build ("*": any)."""
    return Built(
        (frozenset({name}),),
        sites=frozenset({(name, site)}),
        varied=frozenset({name} if apart else ()),
        called=frozenset({(name, site)}),
        specs=frozenset((name, spec) for spec in specs),
    )


def varied_by_call(named: frozenset[str]) -> Built:
    """A call with per-layer arguments of a class held in a variable: each layer class the variable's value
    names configured apart (the classes those build are given nothing of the call's arguments)."""
    return Built((frozenset(),), varied=named)


def referenced(built: Built) -> Built:
    """What naming a class object builds: as calling it would, but no call of it here (see Built.called)."""
    return replace(built, called=frozenset())


def product(left: Built, right: Built) -> Built:
    if right is NOTHING or left is NOTHING:  # most statements build nothing: the product is the other side
        return left if right is NOTHING else right
    combined = list(dict.fromkeys(a | b for a in left.alternatives for b in right.alternatives))
    merged = left.merged or right.merged
    sites, varied, called = left.sites | right.sites, left.varied | right.varied, left.called | right.called
    specs = left.specs | right.specs
    if left.called and right.called:  # both call a layer class: one both call at different lines is built twice
        shared = frozenset().union(*(a & b for a in left.alternatives for b in right.alternatives))
        places = [site for site in called if site[0] in shared]
        varied = varied | {name for name in shared if sum(site[0] == name for site in places) > 1}
    if len(combined) > _MAX_ALTERNATIVES:
        return Built((frozenset().union(*combined),), True, sites, varied, called, specs)
    return Built(tuple(combined), merged, sites, varied, called, specs)


def either(choices: list[Built]) -> Built:
    combined = list(dict.fromkeys(a for choice in choices for a in choice.alternatives))
    merged = any(choice.merged for choice in choices)
    sites = frozenset().union(*(choice.sites for choice in choices))
    varied = frozenset().union(*(choice.varied for choice in choices))
    called = frozenset().union(*(choice.called for choice in choices))
    specs = frozenset().union(*(choice.specs for choice in choices))
    if len(combined) > _MAX_ALTERNATIVES:
        return Built((frozenset().union(*combined),), True, sites, varied, called, specs)
    return Built(tuple(combined), merged, sites, varied, called, specs)
