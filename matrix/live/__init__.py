"""The live engine (``python -m matrix live``, ``tox -e live031``; docs/live.md): a case's cells
on a real vLLM engine (``EngineCore``'s step loop and model runner, on vLLM's CPU backend or a
GPU), each pool's outcome beside the harness's for the same cell and pool.

Reading order: ``layout`` (which cases an engine can run, the tiny model and prompts made from
a case; pure), ``outcome`` (a run's live verdict, the agreement with the harness, the pools to
run; pure), ``report`` (the agreement table and JSON; pure), ``port`` (NIXL's side-channel
port, one per session), ``engine_tests`` (the engine's own tests, once per env install),
``platform`` (the device vLLM detects, and the two CPU-platform settings the live mode
undoes), ``connector`` (the test KV connector), ``engine`` (one engine per layout, a fresh
scheduler per pool), ``handle`` (the harness's handle over that scheduler), ``runs`` (one live
run per pool, with the hang rule), ``session`` (cells, the harness and the live runs), ``cli``.
"""
