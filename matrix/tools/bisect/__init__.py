"""``python -m matrix bisect`` (docs/bisect.md): the first commit of a vLLM checkout where a
case's verdict changes. ``verdict`` (what is compared; the per-commit run), ``step`` (one
commit: installed, run, marked for ``git bisect run``), ``driver`` (the command: a scratch
worktree, the two refs judged, ``git bisect``, the summary)."""
