"""kvlint's rules: one module a rule, named after its code. Shipped as the package `kvlint.rules`."""
