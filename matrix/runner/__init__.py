"""``python -m matrix run``: how the main job and a CI shard run the cells.

Reading order: ``plan`` (the command line read: workers, a shard, xdist or forks; pure),
``forked`` (vLLM imported once, workers forked after it, each a pytest-split group, their
progress), ``junit`` (the workers' JUnit XML files as one), ``command`` (the modes run, the
workers' reports combined by ``report/merge.py``, the reports written and the tables printed);
in each pytest process, ``process_share`` (its part of the run's files, for the plugin: no vLLM).
"""
