"""The census of `kvlint containers`: each container a model of the tree builds, the models and the path
that build it, by default, under an opt-in setting or only possibly — the premise of every KV101 error, on one
screen — with its evidence: the guard of the path that lets the layers through, and where each model builds
each layer (file:line)."""

from __future__ import annotations

import json

from kvlint.analysis.census.compositions import ContainerComposition
from kvlint.escaping import printable


def grouped(compositions: tuple[ContainerComposition, ...]) -> list[tuple[ContainerComposition, list[str]]]:
    """One row per (layers, setting, path): the first composition and every model that builds it, each named
    once (a model whose checkpoints give those layers several spec classes builds the row more than once)."""
    rows: dict[tuple, tuple[ContainerComposition, list[str]]] = {}
    for composition in compositions:
        key = (composition.layer_classes, composition.setting, composition.path)
        models = rows.setdefault(key, (composition, []))[1]
        if composition.model not in models:
            models.append(composition.model)
    return list(rows.values())


def listing(items: list[str], limit: int = 3) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def render_markdown(compositions: tuple[ContainerComposition, ...]) -> list[str]:
    lines = ["| container of | spec classes | setting | built by | models |", "|---|---|---|---|---|"]
    for composition, models in grouped(compositions):
        lines.append(
            f"| {', '.join(sorted(composition.layer_classes))} | {', '.join(sorted(composition.spec_classes))} "
            f"| {composition.setting} | `{composition.path.split(':')[-1]}` ({composition.where()}) "
            f"| {listing(models)} |"
        )
    return lines


def _counts(rows) -> str:
    kinds = [composition.kind for composition, _ in rows]
    return ", ".join(f"{kinds.count(kind)} {label}" for kind, label in _KINDS)


_KINDS = (("default", "by default"), ("opt-in", "opt-in"), ("possible", "possible"))


def _evidence(compositions: tuple[ContainerComposition, ...]) -> dict[tuple, list[ContainerComposition]]:
    """Every model's composition of a row (each carries where that model builds its layers)."""
    found: dict[tuple, list[ContainerComposition]] = {}
    for composition in compositions:
        key = (composition.layer_classes, composition.setting, composition.path)
        found.setdefault(key, []).append(composition)
    return found


def render_text(
    compositions: tuple[ContainerComposition, ...], models: int, layers: int, unread: tuple[str, ...] = ()
) -> str:
    rows = grouped(compositions)
    evidence = _evidence(compositions)
    unread_note = f" (not read by the census: {len(unread)}, e.g. {listing(list(unread))})" if unread else ""
    lines = [
        f"{models} models{unread_note}, {layers} layer classes; {len(rows)} container compositions ({_counts(rows)})",
        "",
    ]
    for composition, names in rows:
        lines.append(
            f"{{{', '.join(sorted(composition.layer_classes))}}} ({', '.join(sorted(composition.spec_classes))})"
        )
        lines.append(f"    {composition.setting}")
        lines.append(f"    path: `{composition.path}` ({composition.where()})")
        if composition.guard:
            lines.append(f"    guard: {composition.guard}")
        lines.append(f"    models: {listing(names, 5)}")
        first = evidence[(composition.layer_classes, composition.setting, composition.path)][0]
        for layer, site in first.built_at:
            lines.append(f"    {layer} built at {site or '?'} (in {first.model})")
    return "".join(f"{printable(line)}\n" for line in lines)


def render_json(compositions: tuple[ContainerComposition, ...]) -> str:
    evidence = _evidence(compositions)
    rows = [
        {
            "layer_classes": sorted(composition.layer_classes),
            "spec_classes": sorted(composition.spec_classes),
            "setting": composition.setting,
            "kind": composition.kind,
            "path": composition.path,
            "line": composition.line,
            "guard": composition.guard,
            "models": models,
            "evidence": [
                {
                    "model": one.model,
                    "built_at": dict(one.built_at),
                    "checkpoints": [list(checkpoint) for checkpoint in one.checkpoints],
                }
                for one in evidence[(composition.layer_classes, composition.setting, composition.path)]
            ],
        }
        for composition, models in grouped(compositions)
    ]
    return json.dumps(rows, indent=2) + "\n"
