"""The census of `kvlint containers`: each container a model of the tree builds, the models and the path
that build it, by default or under an opt-in setting — the premise of every KV101 error, on one screen."""

from __future__ import annotations

import json

from kvlint.analysis.census.compositions import ContainerComposition
from kvlint.escaping import printable


def grouped(compositions: tuple[ContainerComposition, ...]) -> list[tuple[ContainerComposition, list[str]]]:
    """One row per (layers, setting, path): the first composition and every model that builds it."""
    rows: dict[tuple, tuple[ContainerComposition, list[str]]] = {}
    for composition in compositions:
        key = (composition.layer_classes, composition.setting, composition.path)
        rows.setdefault(key, (composition, []))[1].append(composition.model)
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


def render_text(compositions: tuple[ContainerComposition, ...], models: int, layers: int) -> str:
    rows = grouped(compositions)
    defaults = sum(composition.is_default for composition, _ in rows)
    lines = [
        f"{models} models, {layers} layer classes; {len(rows)} container compositions "
        f"({defaults} by default, {len(rows) - defaults} opt-in)",
        "",
    ]
    for composition, names in rows:
        lines.append(
            f"{{{', '.join(sorted(composition.layer_classes))}}} ({', '.join(sorted(composition.spec_classes))})"
        )
        lines.append(f"    {composition.setting}: `{composition.path}` ({composition.where()})")
        lines.append(f"    models: {listing(names, 5)}")
    return "".join(f"{printable(line)}\n" for line in lines)


def render_json(compositions: tuple[ContainerComposition, ...]) -> str:
    return (
        json.dumps(
            [
                {
                    "layer_classes": sorted(composition.layer_classes),
                    "spec_classes": sorted(composition.spec_classes),
                    "setting": composition.setting,
                    "path": composition.path,
                    "line": composition.line,
                    "models": models,
                }
                for composition, models in grouped(compositions)
            ],
            indent=2,
        )
        + "\n"
    )
