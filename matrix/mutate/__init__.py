"""``python -m matrix mutate`` (docs/mutate.md): how strong a test of vLLM's reservation code a
suite is, measured by mutation analysis and branch coverage.

Reading order: ``surface`` (the functions mutated, per release; pure), ``regions`` (the part of
a huge function that is mutated, found by landmarks; pure), ``operators`` and ``generate`` (the
mutants, keyed by node path, ids deterministic; pure), ``install`` (a mutant compiled into the
running vLLM), ``child`` (one forked process: a mutant against the items covering it),
``coverage_map`` (which items reach which lines and branches; cached), ``loop`` (the pytest
plugin that runs a suite's items once under coverage, then every mutant in forks after one
import), ``equivalent`` (the reviewed equivalence file), ``results`` (the kill matrix as
records; pure), ``command`` (the subcommand: each suite in its own pytest process, the report).
"""
