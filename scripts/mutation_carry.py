"""Carry the mutation gate's verdicts to lines that moved: an edit that adds or removes lines above a mutant
leaves its code and its verdict the same, but the verdicts (docs/mutation-verdicts.jsonl) and the equivalents
(scripts/mutation_equivalent.py) are keyed by (module, line, operator).

    python scripts/mutation_carry.py REF MODULE.py [...] [--from OLD.py]   # then: mutation.py --retry … --replay --report

For each mutant of each MODULE now, its lines are matched with the module's text at commit REF (difflib); a
mutant whose lines are all unchanged, moved by one offset, takes the verdict its old line had *in REF's verdict
file* (never the records appended since: those already speak of new lines), and one whose lines changed is
"not run" (`mutation.py --retry` runs it). `--from OLD.py`: MODULE's code came from another module at REF (moved
out of it); its mutants are matched by their lines' text there. A record is appended only where the latest
verdict differs. REF's equivalents whose lines moved, and which scripts/mutation_equivalent.py does not list at
their new lines yet, are printed, to move by hand.
"""

from __future__ import annotations

import argparse
import difflib
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mutation_equivalent import EQUIVALENT  # noqa: E402
from mutation_operators import mutants_of  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
VERDICTS = "docs/mutation-verdicts.jsonl"


def latest(text: str) -> dict[tuple[str, int, str], str]:
    """(module, line, operator) → the latest verdict a verdict file's text records."""
    found = {}
    for line in text.splitlines():
        if line.strip():
            record = json.loads(line)
            found[record["module"], record["line"], record["operator"]] = record["verdict"]
    return found


def new_to_old(old: list[str], new: list[str]) -> dict[int, int]:
    """Each unchanged line of `new` (1-based) → its line in `old`."""
    mapped = {}
    for tag, i1, i2, j1, _ in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag == "equal":
            mapped.update({j1 + k + 1: i1 + k + 1 for k in range(i2 - i1)})
    return mapped


def carried(module: str, old_module: str, old: list[str], new: list[str], before: dict, mutants) -> list[dict]:
    """The records that give each mutant of `module` its old verdict (or "not run")."""
    moved_out = module != old_module
    mapped = {} if moved_out else new_to_old(old, new)
    records = []
    for mutant in mutants:
        lines = range(mutant.line, mutant.end_line + 1)
        if moved_out:
            text = new[mutant.line - 1 : mutant.end_line]
            hits = [i + 1 for i in range(len(old)) if old[i : i + len(text)] == text]
            origin = hits[0] if len(hits) == 1 else None
        else:
            shift = mapped[mutant.line] - mutant.line if mutant.line in mapped else None
            same = shift is not None and all(mapped.get(line, 0) - line == shift for line in lines)
            origin = mutant.line + shift if same else None  # type: ignore[operator]
        verdict = before.get((old_module, origin, mutant.operator)) if origin is not None else None
        records.append(
            {"module": module, "line": mutant.line, "operator": mutant.operator, "verdict": verdict or "not run"}
        )
    return records


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ref")
    parser.add_argument("modules", nargs="+")
    parser.add_argument("--from", dest="origin", help="the module MODULE's code was moved out of, at REF")
    options = parser.parse_args()

    def show(path: str) -> str:
        command = ["git", "show", f"{options.ref}:{path}"]
        return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True).stdout

    before = latest(show(VERDICTS))
    scope: dict = {}
    exec(show("scripts/mutation_equivalent.py"), scope)  # the equivalents as REF keyed them (a dict literal)
    equivalents_at_ref = scope["EQUIVALENT"]
    now = latest((ROOT / VERDICTS).read_text())
    appended = []
    for module in options.modules:
        old_module = options.origin or module
        old, new = show(old_module).splitlines(), (ROOT / module).read_text().splitlines()
        records = carried(module, old_module, old, new, before, mutants_of(module, ROOT))
        fresh = [r for r in records if now.get((r["module"], r["line"], r["operator"])) != r["verdict"]]
        appended += fresh
        unrun = sum(r["verdict"] == "not run" for r in records)
        print(f"{module}: {len(records)} mutants, {unrun} not run, {len(fresh)} records appended")
        if old_module == module:
            old_to_new = {o: n for n, o in new_to_old(old, new).items()}
            for _, line, operator in sorted(k for k in equivalents_at_ref if k[0] == module):
                moved_to = old_to_new.get(line)
                if moved_to != line and (module, moved_to, operator) not in EQUIVALENT:
                    print(f"  equivalent {line} -> {moved_to} ({operator}): move its key")
    with (ROOT / VERDICTS).open("a") as stream:
        stream.writelines(json.dumps(record) + "\n" for record in appended)
    return 0


if __name__ == "__main__":
    sys.exit(main())
