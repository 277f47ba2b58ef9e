"""Backend-selection flags decided at run time, and what they leave unproven on a platform that refuses them.

vLLM decides some of a layer's backend at run time: `MLAAttention.__init__(…, use_sparse=False)` hands its
`use_sparse` on to `get_attn_backend(…, use_sparse=use_sparse)`, and a model builds it with
`use_sparse=self.is_sparse` (a DSA model's MLA layers are sparse, a plain MLA model's are not). A platform
whose backend selection raises for that flag (the CPU platform: "Sparse Attention is not supported") never
starts a model whose layers carry it, but which checkpoint carries it is the model's config: a container
holding such a layer, built where the flag is not a literal, is one the platform may refuse — *possible*,
never *default*, with the link said. Built with a literal True everywhere: refused (dropped); with a literal
False or without the flag: the platform accepts it. Read with `ast` from the census's texts, never imported.
"""

from __future__ import annotations

import ast
from dataclasses import replace

from kvlint.analysis.ast_helpers import walk
from kvlint.analysis.census.compositions import POSSIBLE, ContainerComposition
from kvlint.analysis.census.parsing import ModuleTrees
from kvlint.analysis.census.reading import Census

_PARAMETER = "parameter"
_REFUSED = "refused"


def passed_flags(census: Census, trees: ModuleTrees) -> tuple[tuple[str, str, str], ...]:
    """(layer class, flag, how) for each `use_…=<not a literal>` the layer's class passes in a call: how is
    "parameter" when the value is one of its constructor's parameters (the builder decides it), else the
    code and where (the class computes it)."""
    found: dict[tuple[str, str], str] = {}
    for layer in census.layers:
        module, _, line = layer.where.rpartition(":")
        cls = trees.class_at(module, int(line or 0), layer.name)
        if cls is None:
            continue
        init = next((s for s in cls.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"), None)
        parameters = {a.arg for a in [*init.args.args, *init.args.kwonlyargs]} if init is not None else set()
        for node in walk(cls):
            if not isinstance(node, ast.Call):
                continue
            for keyword in node.keywords:
                if not (keyword.arg or "").startswith("use_") or isinstance(keyword.value, ast.Constant):
                    continue
                value = keyword.value
                how = (
                    _PARAMETER
                    if isinstance(value, ast.Name) and value.id in parameters
                    else f"`{keyword.arg}={_code(value)}` ({module.rsplit('/', 1)[-1]}:{node.lineno})"
                )
                found.setdefault((layer.name, keyword.arg), how)  # type: ignore[arg-type]
    return tuple((layer, flag, how) for (layer, flag), how in sorted(found.items()))


def site_flags(census: Census, trees: ModuleTrees) -> tuple[tuple[str, str, str, str], ...]:
    """(site, layer class, flag, value as written) for each `use_…=` keyword of the call that builds a layer
    class where a model's code builds it; (site, layer, "", "") where the site only names the class."""
    found: set[tuple[str, str, str, str]] = set()
    for model in census.models:
        for layer, site in model.sites:
            module, _, line = site.rpartition(":")
            calls = [n for n in trees.calls_at(module, int(line or 0)) if _callee(n.func) == layer]
            if not calls:
                found.add((site, layer, "", ""))
            for call in calls:
                for keyword in call.keywords:
                    if (keyword.arg or "").startswith("use_"):
                        found.add((site, layer, keyword.arg, _code(keyword.value)))  # type: ignore[arg-type]
    return tuple(sorted(found))


def judged(
    compositions: tuple[ContainerComposition, ...],
    flags: frozenset[str],
    platforms: tuple[str, ...],
    passed: tuple[tuple[str, str, str], ...],
    sites: tuple[tuple[str, str, str, str], ...],
) -> tuple[ContainerComposition, ...]:
    """The compositions a platform refusing `flags` may meet: refused ones dropped, undecided ones possible."""
    kept = []
    for composition in compositions:
        verdict = _verdict(composition, flags, passed, sites)
        if verdict == _REFUSED:
            continue
        if verdict:
            where = " and ".join(platforms) or "this"
            link = f"that the {where} platform builds it is unproven: {verdict}, and its backend selection refuses it"
            composition = replace(composition, setting=POSSIBLE + link)
        kept.append(composition)
    return tuple(kept)


def _verdict(composition, flags, passed, sites) -> str:
    """ "refused", "" (accepted), or the run-time decision that leaves it unproven."""
    built_at = dict(composition.built_at)
    doubts = []
    for layer, flag, how in passed:
        if layer not in composition.layer_classes or flag not in flags:
            continue
        if how != _PARAMETER:
            doubts.append(f"{layer} passes {how}, decided at run time")
            continue
        places = [place for place in built_at.get(layer, "").split(", ") if place]
        values = [(s, f, v) for s, name, f, v in sites if name == layer and s in places and f in (flag, "")]
        named_only = [s for s, f, _ in values if f == ""]
        given = [(s, v) for s, f, v in values if f == flag]
        if given and not named_only and all(v == "True" for _, v in given):
            return _REFUSED
        undecided = [(s, v) for s, v in given if v not in ("True", "False")]
        if undecided:
            site, value = undecided[0]
            doubts.append(f"{layer} is built with `{flag}={value}` ({site.rsplit('/', 1)[-1]}), decided at run time")
        elif named_only:
            doubts.append(
                f"{layer} is built through a reference ({named_only[0].rsplit('/', 1)[-1]}): its `{flag}` is not read"
            )
    return "; ".join(doubts)


def _callee(func: ast.expr) -> str:
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def _code(node: ast.expr) -> str:
    text = " ".join(ast.unparse(node).split())
    return text if len(text) <= 60 else text[:59] + "…"
