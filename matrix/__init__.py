"""matrix: vLLM's async-KV-load block reservations, tested case x variant on the real scheduler.

Read top-down, each module one role:

1. ``schema``: what a YAML case may say (pydantic; its engine side in ``engine_schema``, its
   ``events``, shared rules in ``strict``, bounds in ``limits``), ``model_schema``: what a
   model description (``cases/models/<slug>.yaml``) may say; ``yaml_reader`` reads a file's
   YAML safely, ``loader`` validates it with line numbers.
2. ``expand``: a case file's matrix axes x variants -> cells with stable ids (pure).
3. ``adapters``: every vLLM release difference; ``select_adapter`` picks one, its ``config``
   builds the engine's configs, ``layout`` derives a described model's groups with vLLM's
   code, its ``handle`` steps one real scheduler (through ``engine``, the simulated worker
   and the engine loop) and reads its ``accounting``.
4. ``harness``: ``run_cell`` runs a cell at each pool size, ``playback`` plays one run's
   events; ``variants``: the six reservation rules, each installed on one scheduler
   instance; ``custom_variants``: a user's own, loaded by name; ``devsource``: a user's vLLM
   checkout or wheel.
5. ``verdict``: ``judge_cell`` turns per-step snapshots into pass/fail with a diagnosis (pure).
6. ``report``: a verdict -> a cell -> Markdown/JSON reports, ``tables`` renders them,
   ``tightness``: a cell's over-reservation; ``crossversion`` and ``fidelity``: across releases.
7. ``plugin``: the pytest hooks; ``__main__``: ``python -m matrix run|validate|...``;
   ``show_layout``: ``python -m matrix show-layout``.
8. ``scenarios`` -> ``probing`` -> ``explore``: Hypothesis searches scenarios, shrinks a
   failure and writes it as a case file.

Importing this package, ``schema``, ``expand``, ``report`` or ``plugin`` imports no vLLM.
"""
