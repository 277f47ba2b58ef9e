"""Run some of vLLM's own test modules against one vLLM tree (pytest_child.py, in a fresh interpreter) and
read back every test's outcome from pytest's JUnit XML report: plain data, nothing unpickled.

A module that cannot be collected (its import fails, a fixture module is missing) is recorded with the
reason pytest gave. When pytest stops before writing any report (a conftest.py that cannot be imported
ends the whole run), each module is run on its own, so that one broken folder does not hide the others.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from xml.etree import ElementTree

from kvlint.errors import VerifyError
from kvlint.verify.run import child_environment

PYTEST_CHILD = Path(__file__).parent / "pytest_child.py"
OUTCOMES = ("passed", "failed", "error", "skipped", "xfailed")


@dataclass(frozen=True)
class Outcome:
    outcome: str  # one of OUTCOMES
    detail: str = ""  # one line: the failure's message, the skip's reason


@dataclass
class PytestRun:
    """One tree's results: test id (`tests/…/test_x.py::Class::test[param]`) → outcome."""

    tree: Path
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    uncollected: dict[str, str] = field(default_factory=dict)  # test module → why it could not be collected
    vllm_version: str = "unknown"
    device: str = ""
    seconds: float = 0.0

    def count(self, outcome: str, module: str | None = None) -> int:
        return sum(
            1
            for test, found in self.outcomes.items()
            if found.outcome == outcome and (module is None or test.split("::", 1)[0] == module)
        )


@dataclass(frozen=True)
class PytestSetup:
    python: str
    tests_root: Path  # the folder holding tests/ (pytest's rootdir)
    scratch: Path  # the working folder of every run, outside both trees
    timeout_s: float


def run_tests(setup: PytestSetup, tree: Path, modules: Sequence[str], label: str) -> PytestRun:
    """Run `modules` (paths relative to tests_root) against the vLLM package in `tree`."""
    run = PytestRun(tree)
    started = time.monotonic()
    status, report = _run_pytest(setup, tree, modules, label)
    if report is None and len(modules) > 1:  # pytest stopped before reporting: isolate the culprit
        for number, module in enumerate(modules):
            status, single = _run_pytest(setup, tree, [module], f"{label}-{number}")
            if single is None:
                run.uncollected[module] = status.get("failure", "pytest wrote no report")
            else:
                _read_report(single, run)
    elif report is None:
        run.uncollected[modules[0]] = status.get("failure", "pytest wrote no report")
    else:
        _read_report(report, run)
    run.vllm_version = status.get("vllm", {}).get("version", "unknown")
    run.device = status.get("device", "")
    run.seconds = time.monotonic() - started
    return run


def _run_pytest(setup: PytestSetup, tree: Path, modules: Sequence[str], label: str) -> tuple[dict, Path | None]:
    """(what the child found, the JUnit report or None when pytest wrote none); raises VerifyError when the
    tree cannot be imported or the interpreter has no pytest."""
    report = setup.scratch / f"{label}.xml"
    status_path = setup.scratch / f"{label}.json"
    command = [setup.python, "-I", "-B", str(PYTEST_CHILD), "--vllm", str(tree), "--status", str(status_path), "--"]
    command += ["-p", "no:cacheprovider", "-q", "--continue-on-collection-errors", "-o", "junit_family=xunit1"]
    command += ["--junitxml", str(report), "--rootdir", str(setup.tests_root)]
    command += [str(setup.tests_root / module) for module in modules]
    output = _run(command, setup)
    try:
        status = json.loads(status_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise VerifyError(f"the test child wrote no status: {_last_line(output) or 'no output'}") from None
    if "import_error" in status:
        raise VerifyError(f"cannot import vLLM from {tree}: {status['import_error']}")
    if "no_pytest" in status:
        raise VerifyError(f"{setup.python} cannot run vLLM's tests: {status['no_pytest']} (install pytest there)")
    if not report.is_file():
        status["failure"] = _pytest_failure(output)
        return status, None
    return status, report


def _run(command: list[str], setup: PytestSetup) -> str:
    """Run the child in its own process group (vLLM's tests start processes of their own); stop the whole
    group past the time limit."""
    try:
        process = subprocess.Popen(
            command,
            cwd=setup.scratch,  # a stray ./vllm or ./tests folder must not shadow the trees under test
            env=child_environment(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            start_new_session=True,
        )
    except OSError:
        raise VerifyError(f"cannot run the interpreter {setup.python!r}") from None
    try:
        output, _ = process.communicate(timeout=setup.timeout_s)
    except subprocess.TimeoutExpired:
        _stop(process)
        raise VerifyError(f"vLLM's tests ran past {setup.timeout_s:g}s and were stopped") from None
    except BaseException:
        _stop(process)
        raise
    return output


def _stop(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except OSError:
        pass
    process.communicate()


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _pytest_failure(output: str) -> str:
    """One line from pytest's output saying why it stopped: the error an `E` line names, else its last line."""
    errors = [line[1:].strip() for line in output.splitlines() if line.startswith("E ")]
    loading = [line.strip() for line in output.splitlines() if "while loading conftest" in line]
    reason = errors[-1] if errors else _last_line(output) or "pytest wrote no report"
    return f"{loading[0]} {reason}" if loading else reason


def _read_report(report: Path, run: PytestRun) -> None:
    try:
        root = ElementTree.parse(report).getroot()
    except (OSError, ElementTree.ParseError) as error:
        raise VerifyError(f"unreadable pytest report {report.name}: {error}") from None
    for case in root.iter("testcase"):
        module = case.get("file", "")
        name = case.get("name", "")
        error = case.find("error")
        if error is not None and error.get("message") == "collection failure":
            run.uncollected[module or name] = _reason(error)
            continue
        run.outcomes[_test_id(module, case.get("classname", ""), name)] = _outcome(case)


def _test_id(module: str, classname: str, name: str) -> str:
    dotted = module[: -len(".py")].replace("/", ".") if module.endswith(".py") else ""
    inner = classname[len(dotted) + 1 :] if dotted and classname.startswith(dotted + ".") else ""
    return "::".join(part for part in (module, *inner.split(".")) if part) + f"::{name}"


def _outcome(case: ElementTree.Element) -> Outcome:
    failure, error, skipped = case.find("failure"), case.find("error"), case.find("skipped")
    if failure is not None:
        return Outcome("failed", _reason(failure))
    if error is not None:
        return Outcome("error", _reason(error))
    if skipped is not None:
        kind = "xfailed" if skipped.get("type") == "pytest.xfail" else "skipped"
        return Outcome(kind, " ".join((skipped.get("message") or "").split()))
    return Outcome("passed")


def _reason(element: ElementTree.Element) -> str:
    """One line saying why: pytest's message (the exception's first lines), or for a collection failure
    the `E` lines of its traceback (where the import error is named)."""
    message = element.get("message") or ""
    if not message or message == "collection failure":
        text = element.text or ""
        errors = [line[1:].strip() for line in text.splitlines() if line.startswith("E ")]
        message = " ".join(errors) if errors else _last_line(text) or message
    reason = " ".join(message.split())
    return reason if len(reason) <= 300 else reason[:299] + "…"
