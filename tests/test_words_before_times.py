"""KV102's text sieve reads the words a `*` follows in linear time (kvlint.analysis.words_before_times), and finds
the same words as the pattern it replaced, which stalled on comment lines with no `*` after them (80 KB: 31 s)."""

from __future__ import annotations

import random
import re
import time
from pathlib import Path

import pytest

from kvlint.analysis.words_before_times import words_before_times

# The pattern it replaced, kept as the reference: its words are the answer, its time the defect.
REFERENCE = re.compile(r"\b(?=(\w+))\1[\s)\\]*(?:#[^\r\n]*[\r\n][\s)\\]*)*\*(?!\*)")
RELEASES = Path.home() / ".cache" / "kvlint" / "releases"


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("spec.block_size * dcp", ["block_size"]),
        ("(dcp if gate else 1) * bs", ["1"]),
        ("a ** b", []),  # a power, not a product
        ("x = bs \\\n    * dcp", ["bs"]),  # a continuation
        ("x = (bs  # the block size\n     # and more\n  ) * dcp", ["bs"]),  # comments between
        ("x = (bs  # the block size\r\n  ) * dcp", ["bs"]),
        ("x = (bs  # no line break after it", []),
        ("bs # a comment\n y * 2", ["y"]),  # a word after the comment's line break stops the first
        ("a  # c\n*", ["a"]),  # the comment a match crossed holds no word of its own (`c` alone would match)
        ("a  # c d\n  * b  # e\n*", ["a", "b"]),
        ("a *= 2", ["a"]),
        ("a * * b", ["a"]),
        ("é * 2", ["é"]),
        ("*", []),
        ("", []),
    ],
)
def test_words_before_times(text, words):
    assert list(words_before_times(text)) == words == REFERENCE.findall(text)


def test_random_texts_read_as_the_pattern_read_them():
    alphabet = ["a", "bs", "1", " ", "\t", ")", "(", "\\", "#", "*", "**", "\n", "\r", "\r\n", "=", "\x0c", "é"]
    rng = random.Random(30)
    for _ in range(20_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 30)))
        assert list(words_before_times(text)) == REFERENCE.findall(text), repr(text)


def test_comment_lines_without_a_star_after_them_cost_linear_time():
    for crafted in ("# c\n" * 50_000, "# " + "c # " * 50_000 + "\n", "x\n" + "  ) \\\n" * 50_000):
        started = time.monotonic()
        assert list(words_before_times(crafted)) == []
        assert time.monotonic() - started < 2  # the pattern took 31 s on a fifth of the first


@pytest.mark.slow
def test_every_module_of_the_cached_releases_reads_as_before():
    modules = sorted(RELEASES.glob("vllm-*/vllm/**/*.py"))
    if not modules:
        pytest.skip(f"no release under {RELEASES}: the slow suite fetches them")
    for path in modules:
        text = path.read_text(encoding="utf-8", errors="replace")
        assert list(words_before_times(text)) == REFERENCE.findall(text), path
