"""The test_*.py files here are vLLM unit tests to paste into vLLM's tests/ (run.sh runs them
inside a release's own test tree); this project's pytest collects only the case files."""

collect_ignore_glob = ["test_*.py"]
