"""One place for every difference between vLLM releases.

The harness asks an adapter questions ("build me a scheduler for this case", "what state is
each request in?", "install this reservation") and never checks versions itself. Importing
this package, ``protocol`` or ``selection`` imports no vLLM.

Modules: ``protocol`` (what the harness sees), ``selection`` (the installed release's adapter,
its requirements probed), ``runtime`` (vLLM's start-up switches), ``config`` (a case ->
``VllmConfig``), ``kv_cache`` (a case -> ``KVCacheConfig``; a described model's groups from
``layout``, each layer's spec from ``layer_specs``), ``blueprint`` (what a case's schedulers
share), ``handle`` (one real scheduler, stepped through ``engine_loop`` and counted by
``accounting``; its async-load ``reservation``), ``admission`` (what an
admitting async load needs beyond its load, counted group by group),
``requirements`` (what an adapter needs of vLLM), and one module per release difference:
``v0_30`` (the oldest), ``v0_31``, ``v0_32`` (also 0.33).
"""
