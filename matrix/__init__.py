"""matrix: vLLM's async-KV-load block reservations, tested case x variant on the real scheduler.

One package per role, read top-down (docs/architecture.md says what each module does and
where a change goes); no module imports one from a role after its own:

1. The shared words: ``variant_names`` (the built-in variants), ``outcomes`` (failure kinds
   and severities), ``releases`` (the release table, no vLLM), ``installed`` (the installed
   vLLM's version and source).
2. ``case/``: what a YAML case may say, read safely with line numbers, validated, expanded
   over its matrix axes into cells (a case under one variant).
3. ``adapters/``: every vLLM release difference; ``selection`` picks the installed release's,
   which builds real schedulers for a case (configs, KV cache layout, a model's derived
   groups) and steps them with a simulated worker.
4. ``run/``: the reservation variants (and a user's own), one run's playback of a case's
   events, a cell's pool sweep and its fit, as plain records.
5. ``judge/``: how each run ended, a cell's verdict against its fit, how bad each failing
   pool is, the result record.
6. ``report/``: tables and report files; across releases, the fidelity checks.
7. ``plugin`` (the pytest hooks, over ``runner.process_share``: this process's part of a run) and
   ``__main__`` (``python -m matrix``); beside them ``explore/`` (Hypothesis searches scenarios
   no one wrote), ``tools/`` (bench, show-layout, validate, envsize, devsource, bisect), ``ci/``
   (``python -m matrix.ci.play``: the CI templates' workflow played here), ``gpus`` (a GPU per
   xdist worker), ``live/`` (``python -m matrix live``: the cells a real vLLM engine can run, on
   it, beside the harness), ``upstream/`` (``python -m matrix upstream``: vLLM's own tests, a
   variant applied), ``sweep/`` (``python -m matrix sweep``: every registry architecture's
   layout class against the release's baseline, ``baselines`` below them all reading the
   committed ones) and, over ``report/``'s reports and ``upstream/``'s archives, ``findings/``
   (docs/findings.md's findings as what goes to vLLM: ``python -m matrix finding``, an issue or
   a comment; the patched trees of ``tox -e patched034`` and their comparison with
   ``proposed``).

Importing this package, ``case``, ``judge``, ``report`` or ``plugin`` imports no vLLM.

PYTEST_DONT_REWRITE: the package is imported before pytest starts (``python -m matrix run``)
and its plugin asserts nothing that pytest's assertion rewriting should explain.
"""
