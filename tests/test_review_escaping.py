"""Quoted code with a backtick in it stays code, and no escaped text becomes a link or a reference
(issue 21, item 6): before, one backtick in quoted code turned the whole message into plain text, where
a bare URL, `#2` or `org/repo#5` became a link or a cross-reference on GitHub."""

from __future__ import annotations

import re

from kvlint.review.render import code_span, escape_message, escape_text

HOSTILE = "see http://evil.example/x, HTTPS://evil.example, www.evil.example, #2 and org/repo#5"


def plain_text_outside_code_spans(rendered: str) -> str:
    """What GitHub renders as text: the rendered markdown without its code spans (any backtick length)."""
    return re.sub(r"(`+) .*? \1|(`+)[^`]*?\2", "", rendered)


def assert_nothing_links(text: str) -> None:
    assert not re.search(r"(?i)\b(https?|ftp)://|\bwww\.|#\w", text), text


def test_a_backtick_in_quoted_code_keeps_it_a_code_span():
    assert code_span('x = "`"') == '`` x = "`" ``'
    assert code_span("a ``b`` c") == "``` a ``b`` c ```"
    assert code_span("plain") == "`plain`"


def test_an_odd_backtick_makes_text_that_still_links_nothing():
    rendered = escape_message(f"`isinstance(x, `A)` {HOSTILE}")  # three backticks: the pairing is unknowable
    assert_nothing_links(plain_text_outside_code_spans(rendered))


def test_text_around_code_spans_links_nothing():
    rendered = escape_message(f"`spec.block_size` {HOSTILE}")
    assert rendered.startswith("`spec.block_size` ")
    assert_nothing_links(plain_text_outside_code_spans(rendered))
    assert_nothing_links(escape_text(HOSTILE))
    assert escape_text("# heading") == "\\# heading"  # a heading marker is still escaped as before
