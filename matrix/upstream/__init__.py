"""vLLM's own tests on a release's lean env (``python -m matrix upstream``, ``tox -e
upstream033``; docs/upstream.md).

Reading order: ``source`` (a release's source archive from the package index, its digest
checked, its ``tests/`` cached; the offline Hub cache), ``expected`` (``upstream/vllm-<version>
.yaml`` and the comparison of outcomes with it; pure), ``plugin`` (the pytest plugin loaded in
vLLM's own session: every outcome recorded, a variant installed on every scheduler the tests
build), ``report`` (the Markdown reports), ``driver`` (the command: a tier run, compared, then
again under a variant).
"""
