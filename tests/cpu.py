"""What each test costs in CPU time, its own process's and its finished children's together (a
test that starts interpreters pays their imports): ``--cpu-top N`` lists the N dearest at the
end, and ``--cpu-log FILE`` appends one JSON line per test (forked workers each write theirs).

CPU time, not wall time: on a shared machine a test's wall time says how busy the machine
was, its CPU time what the test itself did. Nothing here fails a test: the suite's budget is
a figure to read (DEVELOPERS.md: speed goals are benchmarks, not timed tests)."""

from __future__ import annotations

import json
import resource
from collections.abc import Generator
from pathlib import Path

import pytest

BUDGET = 10.0  # seconds of CPU one test may take in CI (the figure the summary flags)
costs_key = pytest.StashKey[dict[str, float]]()
log_key = pytest.StashKey[Path | None]()


def cpu_seconds() -> float:
    """This process's CPU time and its waited-for children's, user and system."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("cpu", "CPU time per test")
    group.addoption("--cpu-top", type=int, default=0, metavar="N", help="list the N dearest")
    group.addoption("--cpu-log", default=None, metavar="FILE", help="append a JSON line a test")


def pytest_configure(config: pytest.Config) -> None:
    config.stash[costs_key] = {}
    # Resolved once, its folder made: tests change directory, and a fresh clone has no reports/.
    option = config.getoption("cpu_log")
    log = Path(config.invocation_params.dir, option) if option else None
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
    config.stash[log_key] = log


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, object, object]:
    began = cpu_seconds()
    try:
        return (yield)
    finally:
        cost = cpu_seconds() - began
        item.config.stash[costs_key][item.nodeid] = cost
        log = item.config.stash[log_key]
        if log is not None:
            with log.open("a", encoding="utf-8") as out:
                out.write(json.dumps({"test": item.nodeid, "cpu": round(cost, 2)}) + "\n")


def dearest(costs: dict[str, float], count: int) -> list[str]:
    """The ``count`` dearest tests, one line each, those over the budget marked."""
    ranked = sorted(costs.items(), key=lambda pair: -pair[1])[:count]
    return [f"{cost:7.2f} s{' !' if cost > BUDGET else '  '} {test}" for test, cost in ranked]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    count = terminalreporter.config.getoption("cpu_top")
    costs = terminalreporter.config.stash[costs_key]
    if count and costs:
        terminalreporter.section(f"dearest {count} tests in CPU time (! over {BUDGET:.0f} s)")
        for line in dearest(costs, count):
            terminalreporter.write_line(line)


def main(argv: list[str]) -> int:
    """``python -m tests.cpu LOG [N]``: the N (10) dearest tests of a ``--cpu-log`` file, which
    it then removes (the log appends, a line a test: the next run starts a new one)."""
    path, count = Path(argv[0]), int(argv[1]) if len(argv) > 1 else 10
    costs: dict[str, float] = {}
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            entry = json.loads(line)
            costs[entry["test"]] = entry["cpu"]
    print(f"dearest {count} tests in CPU time (! over {BUDGET:.0f} s), of {len(costs)}:")
    print("\n".join(dearest(costs, count)))
    path.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
