"""The cheap text test a rule declares, kept free of libcst so a cached scan can apply it without the rules.

A rule's TRIGGERS are clauses of substrings: a file can produce one of its findings only if, for every
clause, it holds at least one of the clause's substrings (`(("block_size",), ("dcp", "decode_context_parallel"))`
reads "block_size, and dcp or decode_context_parallel").
"""

from __future__ import annotations

Triggers = tuple[tuple[str, ...], ...]


def triggers_match(triggers: Triggers, text: str) -> bool:
    """False when the text cannot hold a finding of a rule with these triggers; no triggers, no finding."""
    return bool(triggers) and all(any(word in text for word in clause) for clause in triggers)
