"""kvlint's rules, one module a rule, named after its code (`kv101_container_isinstance` holds KV101).

The modules live in the repository's top-level `rules/` folder, where a reader of the project looks for
them. An installed kvlint ships that folder as this package (pyproject maps `kvlint.rules` to `rules/`);
a checkout used without installing finds it through this package's path.
"""

import os

_CHECKOUT_RULES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "rules")
if os.path.isfile(os.path.join(_CHECKOUT_RULES, "__init__.py")):
    __path__.append(_CHECKOUT_RULES)
