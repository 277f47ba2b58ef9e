"""`kvlint verify --census`: does the static census mean what vLLM's grouping code does?

The census's cases (kvlint.verify.census_cases) go to census_child.py, which groups each model's layers with
the tree's own `get_kv_cache_groups` in a child interpreter; here its answers meet the census's default
containers, model by model. Plain records that know their exit code (0 every model compared agrees, 1 some
model differs, 2 none could be compared) and two renderings; nothing here prints.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvlint.engine.summary import exit_code
from kvlint.errors import VerifyError
from kvlint.escaping import printable
from kvlint.verify.census_cases import CensusCase

CENSUS_CHILD = Path(__file__).parent / "census_child.py"
Containers = frozenset[frozenset[str]]


@dataclass(frozen=True)
class ModelOutcome:
    model: str  # the case's name: the model's, "#N" for its checkpoint N > 1
    census: Containers  # the census's default containers, each its spec classes
    vllm: Containers | None  # what the tree's grouping built; None when it raised or could not run
    error: str | None = None  # what the grouping raised on the census's layers
    not_buildable: str | None = None  # why this runtime cannot ask vLLM about the model
    layout: str | None = None  # the KV cache layout the model's backends resolve to
    possible: Containers = frozenset()  # containers the census says the checkpoint may get (unproven link)
    checkpoint: tuple[str, ...] = ()  # the checkpoint's "LayerClass:SpecClass" kinds

    @property
    def agree(self) -> bool | None:
        """Every default container built, nothing built the census rules out; a configuration vLLM refuses
        (it raised) agrees when the census claims no container for it."""
        if self.not_buildable is not None:
            return None
        if self.vllm is None:
            return self.error is not None and not self.census
        return self.census <= self.vllm <= self.census | self.possible

    @property
    def refused(self) -> bool:
        return self.not_buildable is None and self.vllm is None and self.error is not None

    @property
    def model_name(self) -> str:
        return self.model.split("#", 1)[0]


@dataclass(frozen=True)
class CensusReport:
    vllm_version: str
    vllm_path: str
    outcomes: tuple[ModelOutcome, ...]
    unread: tuple[str, ...] = ()  # models of the registry the census could not read

    @property
    def compared(self) -> tuple[ModelOutcome, ...]:
        return tuple(outcome for outcome in self.outcomes if outcome.agree is not None)

    @property
    def differing(self) -> tuple[ModelOutcome, ...]:
        return tuple(outcome for outcome in self.outcomes if outcome.agree is False)

    @property
    def not_buildable(self) -> tuple[ModelOutcome, ...]:
        return tuple(outcome for outcome in self.outcomes if outcome.agree is None)

    @property
    def exit_code(self) -> int:
        return exit_code(bool(self.differing), error=not self.compared)


class CensusResultError(Exception):
    """The child's document is not an answer to the cases it was given."""


def compare(cases: Sequence[CensusCase], raw: dict[str, Any], unread: tuple[str, ...] = ()) -> CensusReport:
    """The child's answers (its JSON document) against the cases' expectations, in the cases' order."""
    answers = {answer.get("model"): answer for answer in raw.get("models", ()) if isinstance(answer, dict)}
    outcomes = []
    for case in cases:
        answer = answers.get(case.model)
        if answer is None:
            raise CensusResultError(f"the census child gave no answer for {case.model}")
        built = answer.get("containers")
        outcomes.append(
            ModelOutcome(
                case.model,
                case.expected,
                frozenset(frozenset(c) for c in built) if isinstance(built, list) else None,
                error=answer.get("error"),
                not_buildable=answer.get("not_buildable")
                or (None if isinstance(built, list) or "error" in answer else "the child said nothing"),
                layout=answer.get("layout"),
                possible=case.possible,
                checkpoint=case.checkpoint,
            )
        )
    version = raw.get("vllm", {})
    return CensusReport(
        str(version.get("version", "unknown")), str(version.get("path", "")), tuple(outcomes), tuple(unread)
    )


def cases_document(cases: Sequence[CensusCase]) -> dict[str, Any]:
    return {"cases": [case.document() for case in cases]}


# ------------------------------------------------------------------------- rendering


def describe(containers: Containers | None) -> str:
    if containers is None:
        return "-"
    if not containers:
        return "no container"
    return " + ".join("{" + ", ".join(sorted(c)) + "}" for c in sorted(containers, key=sorted))


def _vllm_says(outcome: ModelOutcome) -> str:
    return f"raises {outcome.error}" if outcome.error is not None else describe(outcome.vllm)


def _names(models: list[str], shown: int = 6) -> str:
    more = f" and {len(models) - shown} more" if len(models) > shown else ""
    return ", ".join(models[:shown]) + more


def _models(outcomes) -> list[str]:
    return list(dict.fromkeys(outcome.model_name for outcome in outcomes))


def render_text(report: CensusReport) -> str:
    """Counts, then the differing checkpoints grouped by what each side says, then what could not be asked."""
    out = [f"vLLM {report.vllm_version} at {report.vllm_path}: the census against get_kv_cache_groups"]
    compared, differing = report.compared, report.differing
    models, wrong = _models(compared), _models(differing)
    out.append(
        f"{len(models)} models compared ({len(compared)} checkpoints): {len(models) - len(wrong)} agree, "
        f"{len(wrong)} differ ({len(differing)} checkpoints); {len(_models(report.not_buildable))} not buildable here"
    )
    refused = [o for o in compared if o.refused]
    if refused:
        out.append(
            f"vLLM refuses {len(refused)} checkpoints of {len(_models(refused))} models with kvlint's shapes "
            "(it raises; the census claims no container for them)"
        )
    possible = [o for o in compared if o.vllm and o.vllm - o.census]
    if possible:
        out.append(f"{len(possible)} checkpoints got containers the census says are only possible")
    if report.unread:
        out.append(f"not read by the census: {len(report.unread)}, e.g. {_names(list(report.unread), 4)}")
    groups: dict[tuple[str, str, str], list[str]] = {}
    for outcome in differing:
        key = (describe(outcome.census), describe(outcome.possible), _vllm_says(outcome))
        groups.setdefault(key, []).append(f"{outcome.model} [{', '.join(outcome.checkpoint)}]")
    if groups:
        out += ["", "differing (census says | vLLM builds):"]
        for (census, maybe, vllm), names in sorted(groups.items(), key=lambda item: (-len(item[1]), item[0])):
            out.append(f"  {len(names)} checkpoint(s): {_names(names, 3)}")
            out.append(f"    census: {census}" + (f" (possible: {maybe})" if maybe != "no container" else ""))
            out.append(f"    vLLM:   {vllm}")
    agreeing = [m for m in models if m not in wrong]
    if agreeing:
        out += ["", f"agreeing: {_names(agreeing, 12)}"]
    reasons: dict[str, list[str]] = {}
    for outcome in report.not_buildable:
        reasons.setdefault(str(outcome.not_buildable), []).append(outcome.model)
    if reasons:
        out += ["", "not buildable here:"]
        out += [f"  {_names(models)}: {reason}" for reason, models in sorted(reasons.items())]
    return "\n".join(printable(line) for line in out)  # model names and vLLM's messages come from the tree


def render_json(report: CensusReport) -> str:
    def containers(value: Containers | None) -> list[list[str]] | None:
        return None if value is None else sorted(sorted(c) for c in value)

    document = {
        "vllm": {"version": report.vllm_version, "path": report.vllm_path},
        "compared": len(report.compared),
        "differing": len(report.differing),
        "not_buildable": len(report.not_buildable),
        "models_compared": len(_models(report.compared)),
        "models_differing": len(_models(report.differing)),
        "unread": list(report.unread),
        "models": [
            {
                "model": outcome.model,
                "agree": outcome.agree,
                "checkpoint": list(outcome.checkpoint),
                "census": containers(outcome.census),
                "possible": containers(outcome.possible),
                "vllm": containers(outcome.vllm),
                **({"error": outcome.error} if outcome.error is not None else {}),
                **({"not_buildable": outcome.not_buildable} if outcome.not_buildable is not None else {}),
                **({"layout": outcome.layout} if outcome.layout is not None else {}),
            }
            for outcome in report.outcomes
        ],
    }
    return json.dumps(document, indent=2)


def installed_vllm(python: str, timeout_s: float = 60) -> Path:
    """The folder holding the vllm package `python` imports, found without importing it (find_spec)."""
    probe = "import importlib.util as u; s = u.find_spec('vllm'); print(s.submodule_search_locations[0] if s else '')"
    try:
        found = subprocess.run(
            [python, "-I", "-c", probe], capture_output=True, text=True, timeout=timeout_s, check=False
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as error:
        raise VerifyError(f"cannot ask {python!r} where its vllm is: {error}") from None
    if not found:
        raise VerifyError(f"{python} has no vllm installed: give --vllm PATH or --vllm-release VERSION")
    return Path(found).parent
