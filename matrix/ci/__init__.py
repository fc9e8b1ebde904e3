"""The CI templates (docs/ci/) played on this machine (``python -m matrix.ci.play``,
docs/ci.md): ``workflow`` (a GitHub Actions workflow read as GitHub reads it: jobs, matrix,
expressions; pure), ``tox_commands`` (what a tox env runs, from tox.ini; pure), ``steps`` (a
job's workspace, its ``run:`` scripts, the emulated actions), ``fork`` (a job's ``python -m
matrix run`` forked from the player, which imported vLLM once; ``fork_job`` the job in its
fork), ``substitutions`` (what the command line asks to change: the runs kept, the tox commands,
a step's environment) and ``play`` (the player: every job in order, with those substitutions).
"""
