"""`kvlint fix --diff` places the findings left in a fixed text at the lines on disk (fixing/line_map.py): as
difflib's alignment of the whole texts placed them, at a cost that grows with the texts, not their square."""

from __future__ import annotations

import difflib
import random
from pathlib import Path

import pytest

from kvlint.fixing import line_map
from kvlint.fixing.line_map import LineMap, aligned

SOURCES = sorted((Path(__file__).resolve().parents[1] / "kvlint").rglob("*.py"))


def difflib_line(original: bytes, fixed: bytes):
    """The placement before the pieces: one difflib alignment of the whole texts."""
    blocks = difflib.SequenceMatcher(None, original.split(b"\n"), fixed.split(b"\n"), autojunk=False).get_opcodes()

    def place(line: int) -> int:
        index = line - 1
        for tag, old_start, _old_end, new_start, new_end in blocks:
            if new_start <= index < new_end:
                return old_start + (index - new_start) + 1 if tag == "equal" else old_start + 1
        return line

    return place


def fix_shaped(rng: random.Random, lines: list[bytes]) -> list[tuple[bytes, int | None]]:
    """What a fix does to a file: lines rewritten in place, one split in three, lines dropped, an import added;
    each line of the result with the index on disk it came from (None: a line the fix wrote)."""
    new: list[tuple[bytes, int | None]] = [(line, index) for index, line in enumerate(lines)]
    for _ in range(rng.randint(1, 6)):
        at = rng.randrange(len(new))
        shape = rng.random()
        if shape < 0.4:
            new[at] = (new[at][0] + b"  # fixed", None)
        elif shape < 0.6:
            new[at : at + 1] = [
                (b"    x = resolve_dcp_kv_block_size(", None),
                (b"        spec, dcp", None),
                (b"    )", None),
            ]
        elif shape < 0.8 and len(new) > 4:
            del new[at : at + rng.randint(1, 3)]
        else:
            new.insert(at, (b"", None))
    if rng.random() < 0.5:
        new.insert(min(3, len(new)), (b"from vllm.v1.core.kv_cache_utils import resolve_dcp_kv_block_size", None))
    return new


def assert_valid(original: list[bytes], fixed: list[bytes], placed: list[int]) -> None:
    """Whatever the alignment: every line on disk, in order, and a line placed by an equal block is that line."""
    assert all(1 <= line <= len(original) + 1 for line in placed)
    assert placed == sorted(placed)
    blocks = aligned(original, fixed)
    assert [b[3] for b in blocks if b[3] < b[4]] == sorted(b[3] for b in blocks if b[3] < b[4])
    covered = [index for b in blocks for index in range(b[3], b[4])]
    assert covered == list(range(len(fixed)))  # every fixed line in exactly one block, in order
    for tag, old_start, old_end, new_start, new_end in blocks:
        if tag == "equal":
            assert original[old_start:old_end] == fixed[new_start:new_end]


@pytest.mark.parametrize("seed", range(8))
def test_each_line_of_code_on_disk_is_placed_at_its_line(seed):
    rng = random.Random(seed)
    kept = ours_right = theirs_right = 0
    for path in rng.sample(SOURCES, 40):
        original = path.read_bytes()
        if original.count(b"\n") < 5:
            continue
        lines = original.split(b"\n")
        shaped = fix_shaped(rng, lines)
        new = [line for line, _ in shaped]
        fixed = b"\n".join(new)
        ours, theirs = LineMap(original, fixed), difflib_line(original, fixed)
        placed = [ours.original_line(line) for line in range(1, len(new) + 1)]
        assert_valid(lines, new, placed)
        for line, (text, origin) in enumerate(shaped, start=1):
            if origin is None or not text.strip():
                continue  # a written line, or a blank one (no finding is on one)
            kept += 1
            ours_right += placed[line - 1] == origin + 1
            theirs_right += theirs(line) == origin + 1
    # A line that repeats (`)`, `return x`), or one the fix wrote as a line it dropped, may be matched to
    # another copy by either alignment, a line or two away: each places nearly every line of code right.
    assert ours_right >= 0.999 * kept and theirs_right >= 0.999 * kept


def functions(count: int, body: bytes) -> list[bytes]:
    lines = [b"import torch", b""]
    for number in range(count):
        lines += [b"", f"def size_{number}(spec, dcp):".encode(), body, b"    return x", b""]
    return lines


def recorded_pieces(monkeypatch) -> list[int]:
    """The size (old lines × new lines) of each range difflib is asked to align."""
    sizes: list[int] = []
    real = difflib.SequenceMatcher

    def recording(junk, a, b, autojunk=True):
        sizes.append(len(a) * len(b))
        return real(junk, a, b, autojunk=autojunk)

    monkeypatch.setattr(line_map.difflib, "SequenceMatcher", recording)
    return sizes


def test_functions_alike_but_for_their_names_are_aligned_a_function_at_a_time(monkeypatch):
    # 2,000 fixed functions (a crafted pull request): the whole texts' alignment took minutes
    sizes = recorded_pieces(monkeypatch)
    original = functions(2000, b"    x = spec.block_size * dcp")
    fixed = functions(2000, b"    x = resolve_dcp_kv_block_size(spec, dcp)")
    fixed.insert(1, b"from vllm.v1.core.kv_cache_utils import resolve_dcp_kv_block_size")
    placed = LineMap(b"\n".join(original), b"\n".join(fixed))
    assert sum(sizes) <= 10 * len(fixed)  # pieces of a line or so, never the texts' square
    for number in (0, 999, 1999):
        fixed_line = fixed.index(f"def size_{number}(spec, dcp):".encode()) + 1
        assert placed.original_line(fixed_line) == original.index(fixed[fixed_line - 1]) + 1
        assert placed.original_line(fixed_line + 1) == fixed_line  # the rewritten line: its place on disk
    assert placed.original_line(2) == 2  # the import: where its insertion starts on disk


def test_a_text_without_a_line_of_its_own_is_one_changed_block_past_the_bound(monkeypatch):
    sizes = recorded_pieces(monkeypatch)
    original = [b"x = 1"] * 3000
    fixed = list(original)
    fixed[10] = fixed[2900] = b"y = 2"
    line_map = LineMap(b"\n".join(original), b"\n".join(fixed))
    placed = [line_map.original_line(n) for n in range(1, len(fixed) + 1)]
    assert not sizes  # 2,890 lines by 2,890 is past MAX_PIECE_PRODUCT: not handed to difflib
    assert_valid(original, fixed, placed)
    assert placed[:10] == list(range(1, 11)) and placed[2901:] == list(range(2902, 3001))  # alike ends: exact
    assert set(placed[10:2901]) == {11}  # the block between: at its start on disk


def test_a_small_piece_is_aligned_by_difflib_as_before(monkeypatch):
    sizes = recorded_pieces(monkeypatch)
    original = [b"a", b"x", b"y", b"x", b"y", b"b"]
    fixed = [b"a", b"y", b"x", b"z", b"y", b"x", b"b"]
    line_map = LineMap(b"\n".join(original), b"\n".join(fixed))
    placed = [line_map.original_line(n) for n in range(1, 8)]
    assert sizes == [4 * 5]  # no line of its own between `a` and `b`: that piece goes to difflib
    monkeypatch.undo()
    assert placed == [difflib_line(b"\n".join(original), b"\n".join(fixed))(n) for n in range(1, 8)]
    assert_valid(original, fixed, placed)


def test_identical_and_empty_texts():
    assert aligned([b"a", b"b"], [b"a", b"b"]) == [("equal", 0, 2, 0, 2)]
    assert aligned([b""], [b"x", b""]) == [("insert", 0, 0, 0, 1), ("equal", 0, 1, 1, 2)]
    assert LineMap(b"", b"").original_line(1) == 1
    assert LineMap(b"a\nb", b"a\nb").original_line(5) == 5  # past the text: as given
