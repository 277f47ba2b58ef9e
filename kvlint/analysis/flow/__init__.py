"""Can a container reach this expression, and who consumes what it computes: provenance (a group's spec or a
layer's), the bindings and reaching definitions it follows, dominance of an earlier check, which layers a check
is about (layer selection), the consumers of a worker-side answer, and the same flow read on Python's own tree
(`ast_group_flow`) for the per-file sieve. Built on the tree's facts and the census; neither imports it."""
