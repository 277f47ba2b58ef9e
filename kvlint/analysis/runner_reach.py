"""Which model-runner code a worker runs only when a setting selects it, read from the workers' own code.

vLLM 0.27.1's GPU worker imports its second model runner only under `if self.use_v2_model_runner:` (the
`vllm/v1/worker/gpu/` package), a setting that is off unless the model is one of a few or the user sets
`VLLM_USE_V2_MODEL_RUNNER`. A finding in such code meets a model's groups only where that setting is on
for the model: a link the analysis cannot prove for a witness, so the finding says so and stays a warning.

Read with `ast` from the worker modules (`vllm/v1/worker/*worker.py`): an `if` whose test reads a
`use_…` setting and whose body imports a module of another folder makes that folder selected by the
setting (where: the worker's module and line). The `else` branch is the default and selects nothing.
"""

from __future__ import annotations

import ast
import re
from posixpath import dirname

from kvlint.analysis.census.parsing import parsed
from kvlint.analysis.vocabulary import WORKERS_DIR, is_worker_module

_SETTING = re.compile(r"\buse_\w+")


def read_runner_selection(texts: dict[str, bytes]) -> tuple[tuple[str, str, str], ...]:
    """(folder, the setting as written, "module:line") for each folder of runner code a worker imports only
    under a test of a `use_…` setting."""
    found: dict[str, tuple[str, str, str]] = {}
    for relative, data in sorted(texts.items()):
        if not is_worker_module(relative) or b"use_" not in data:
            continue
        tree = parsed(data, relative)
        for node in ast.walk(tree) if tree is not None else ():
            if not isinstance(node, ast.If):
                continue
            setting = _SETTING.search(ast.unparse(node.test))
            if setting is None or isinstance(node.test, ast.UnaryOp):  # `if not use_x:` selects the default
                continue
            for statement in node.body:
                for imported in ast.walk(statement):
                    if isinstance(imported, ast.ImportFrom) and imported.module and not imported.level:
                        folder = dirname(imported.module.replace(".", "/"))
                        if folder != WORKERS_DIR and folder.startswith(f"{WORKERS_DIR}/"):
                            where = f"{relative.rsplit('/', 1)[-1]}:{node.lineno}"
                            found.setdefault(folder, (folder, " ".join(ast.unparse(node.test).split()), where))
    return tuple(found.values())


def selected_by(selection: tuple[tuple[str, str, str], ...], module_path: str) -> str | None:
    """The link a finding in `module_path` cannot prove (the setting that selects its runner), or None."""
    relative = module_path.replace("\\", "/")
    for folder, setting, where in selection:
        if f"/{folder}/" in f"/{relative}" or relative.startswith(f"{folder}/"):
            return f"that the worker runs this code for it is unproven: it is selected by `{setting}` ({where})"
    return None
