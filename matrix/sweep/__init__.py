"""``python -m matrix sweep`` (docs/sweep.md): every architecture of the installed vLLM's
registry that generates text with a KV cache, a default config per model type written offline,
the layout vLLM derives for it (in forked workers after one import), each architecture's outcome
against the release's committed baseline, and the layout classes the class cells are made from.

Reading order: ``scope`` (the registry's architectures in scope), ``mapping`` (architecture ->
model type), ``defaults`` (a model type's default config.json), ``outcome`` (an architecture's
layout class or named reason; pure), ``derive`` (one architecture in this process), ``workers``
(the forked workers), ``baseline`` (the committed outcomes and the difference; pure),
``classes`` (the class cells' case files; pure), ``command`` (the command line).
"""
