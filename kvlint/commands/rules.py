"""`kvlint rules` lists the rules; `kvlint explain CODE` prints one rule's documentation and examples."""

from __future__ import annotations

import click

from kvlint.engine.registry import all_rules, rule_by_code


@click.command("rules")
def list_rules():
    """List every rule with its code, name and fix availability."""
    for rule in all_rules():
        fix = "fix" if rule.FIX_TITLE else "   "
        click.echo(f"{rule.CODE}  {rule.NAME:<28} {fix}  {_first_sentence(rule.doc_section('What it does'))}")


def _first_sentence(text: str) -> str:
    return text.split(". ")[0].rstrip(".") + "." if text else ""


@click.command()
@click.argument("code")
def explain(code):
    """Explain a rule: what it finds, why it is wrong, an example, the fix and its safety."""
    rule = rule_by_code(code)
    if rule is None:
        raise click.UsageError(f"unknown rule {code!r}; `kvlint rules` lists them")
    click.echo(explanation(rule), nl=False)


def explanation(rule) -> str:
    """A rule's documentation as markdown: what `kvlint explain` prints and docs/rules/ holds."""
    parts = [f"# {rule.CODE} {rule.NAME}\n", rule.documentation()]
    if rule.FIX_TITLE:
        parts.append(f"\nFix: {rule.FIX_TITLE}")
    if rule.INVALID:
        parts += ["\n## Flagged (from the rule's tests)\n```python", rule.INVALID[0].source.rstrip(), "```"]
    fixed = next((example for example in rule.INVALID if example.fixed_source is not None), None)
    if fixed is not None:
        flag = " `kvlint fix --unsafe-fixes`" if fixed.unsafe else " `kvlint fix`"
        parts += [f"\n## Fixed by{flag} (from the rule's tests)\n```python", fixed.source.rstrip(), "```", "becomes"]
        parts += ["```python", fixed.fixed_source.rstrip(), "```"]
    if rule.VALID:
        parts += ["\n## Not flagged (from the rule's tests)\n```python", rule.VALID[0].source.rstrip(), "```"]
    return "\n".join(parts) + "\n"
