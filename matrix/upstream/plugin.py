"""The pytest plugin ``python -m matrix upstream`` loads into vLLM's own test session
(``-p matrix.upstream.plugin``): it records every test's outcome, and with
``--upstream-variant NAME`` applies a matrix variant to every scheduler the tests build.

The variant goes through the code the harness uses: the installed release's adapter class (chosen
and probed as for a case) wraps each new scheduler in its handle, and the variant's ``apply``
installs its reservation on that instance, at the end of ``Scheduler.__init__`` (the class's
constructor is wrapped for this process only; ``AsyncScheduler`` and other subclasses call it).
Outcomes are written, by node id, to ``--upstream-results`` as JSON by the controlling process.

From 0.34 vLLM's CPU platform refuses an x86 machine without Triton when a config is checked
(``CpuPlatform.check_and_update_config``), and the package index serves no Triton for CPUs: the
plugin lets that one check pass as on an x86 CPU with Triton (:func:`pass_triton_check`), in a
session on the CPU platform (``VLLM_TARGET_DEVICE=cpu``, as the driver sets).
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

import pytest

SCHEDULERS_PROPERTY = "matrix_schedulers"  # a report's user property: variants applied
_applied = [0]  # schedulers the variant was applied to since the current test's setup
# Each test's outcome, message and schedulers, by node id (one session per process).
_record: dict[str, dict[str, Any]] = {}
_restore: list[Callable[[], None]] = []


class VariantError(Exception):
    """A variant name that names no variant; the message is one line."""


def resolve_variant(name: str) -> Any:
    """The variant ``name`` names: a built-in, an installed entry point's, or a user's
    ``module:NAME`` / ``file.py:NAME`` reference (see ``matrix.run.user_variants``)."""
    from matrix.run.user_variants import VariantLoadError, run_variants

    try:
        known = run_variants([name] if ":" in name else [])
    except VariantLoadError as error:
        raise VariantError(str(error)) from None
    if ":" in name:
        return list(known.values())[-1]
    if name not in known:
        raise VariantError(f"no variant {name!r} (known: {', '.join(known)})")
    return known[name]


def install_variant(variant: Any) -> Callable[[], None]:
    """Applies ``variant`` to every scheduler built from now on in this process; returns what
    puts the scheduler's own constructor back."""
    from vllm.v1.core.sched.scheduler import Scheduler

    from matrix.adapters.selection import adapter_class

    # The class only: vLLM's tests have set vLLM up (the harness's start-up settings, its
    # quiet loggers among them, stay out of their process).
    handle_type = adapter_class().handle_type
    construct = Scheduler.__init__

    @functools.wraps(construct)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        construct(self, *args, **kwargs)
        variant.apply(handle_type.adopt(self))
        _applied[0] += 1

    Scheduler.__init__ = __init__

    def restore() -> None:
        Scheduler.__init__ = construct

    return restore


TRITON_REFUSAL = "requires Triton"  # what 0.34's CpuPlatform raises without it


def pass_triton_check() -> Callable[[], None]:
    """Where the CPU platform's config check refuses for want of Triton, runs it again as on an
    x86 CPU with Triton (``HAS_TRITON`` true for that call only; the scheduler and connector
    tests run no kernel); returns what puts the check back. Releases whose check does not
    refuse are untouched."""
    try:
        import vllm.triton_utils as triton_utils
        from vllm.platforms.cpu import CpuPlatform
    except ImportError:  # a session without vLLM's CPU platform: nothing to pass
        return lambda: None

    check = CpuPlatform.__dict__["check_and_update_config"]

    def check_and_update_config(cls: Any, vllm_config: Any) -> None:
        try:
            check.__func__(cls, vllm_config)
        except RuntimeError as error:
            if TRITON_REFUSAL not in str(error) or triton_utils.HAS_TRITON:
                raise
            triton_utils.HAS_TRITON = True  # the check raises before it changes the config
            try:
                check.__func__(cls, vllm_config)
            finally:
                triton_utils.HAS_TRITON = False

    CpuPlatform.check_and_update_config = classmethod(check_and_update_config)

    def restore() -> None:
        CpuPlatform.check_and_update_config = check

    return restore


def pytest_addoption(parser: pytest.Parser) -> None:
    """The plugin's options."""
    group = parser.getgroup("matrix-upstream")
    group.addoption("--upstream-results", type=Path, help="write every test's outcome here")
    group.addoption("--upstream-variant", help="apply this matrix variant to every scheduler")


def _controller(config: pytest.Config) -> bool:
    """The xdist controller, which runs no test (workers have ``workerinput``)."""
    distributing = config.getoption("dist", "no") != "no"
    return distributing and not hasattr(config, "workerinput")


def pytest_configure(config: pytest.Config) -> None:
    """Lets the CPU platform's Triton check pass and installs the variant (where tests run);
    starts the record (where reports arrive)."""
    _record.clear()
    if _controller(config):
        return
    if os.environ.get("VLLM_TARGET_DEVICE") == "cpu":  # where vLLM runs the CPU platform's check
        _restore.append(pass_triton_check())
    name = config.getoption("upstream_variant")
    if name:
        _restore.append(install_variant(resolve_variant(name)))


def pytest_unconfigure(config: pytest.Config) -> None:
    """The scheduler's own constructor back."""
    while _restore:
        _restore.pop()()


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A new test: nothing applied yet."""
    _applied[0] = 0


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """The teardown report carries how many schedulers the variant was applied to."""
    report = yield
    if report.when == "teardown":
        report.user_properties.append((SCHEDULERS_PROPERTY, _applied[0]))
    return report


def crash_message(report: pytest.CollectReport | pytest.TestReport) -> str:
    """What went wrong, in its first lines (the assertion, the exception), or a skip's reason."""
    longrepr = report.longrepr
    if isinstance(longrepr, tuple):  # a skip: (file, line, reason)
        text = str(longrepr[2])
    else:
        crash = getattr(longrepr, "reprcrash", None)
        text = crash.message if crash is not None else str(longrepr or "")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    # A collection error's text is a traceback: its last "E" line is the exception.
    raised = [line.removeprefix("E").strip() for line in lines if line.startswith("E ")]
    lines = raised[-1:] or lines
    # A pydantic error's first line names the model; the reason follows it.
    return " / ".join(lines[:3])[:300]


def outcome_of(report: pytest.TestReport, so_far: str | None) -> str | None:
    """The test's outcome after this phase's report (None: not decided yet)."""
    xfail = hasattr(report, "wasxfail")
    if report.when == "call":
        if report.passed:
            return "xpassed" if xfail else "passed"
        if report.skipped:
            return "xfailed" if xfail else "skipped"
        return "failed"
    if report.failed:  # setup or teardown
        return "error" if so_far in (None, "passed") else so_far
    if report.skipped:
        return "xfailed" if xfail else "skipped"
    return so_far


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Folds each phase's report into the test's record."""
    entry = _record.setdefault(report.nodeid, {"outcome": None, "message": "", "schedulers": 0})
    outcome = outcome_of(report, entry["outcome"])
    if outcome != entry["outcome"] and outcome not in (None, "passed", "xpassed"):
        entry["message"] = crash_message(report)
    entry["outcome"] = outcome
    for key, value in report.user_properties:
        if key == SCHEDULERS_PROPERTY:
            entry["schedulers"] = value


def pytest_collectreport(report: pytest.CollectReport) -> None:
    """A file that cannot be collected (an import that fails) is one errored test."""
    if report.failed:
        _record[report.nodeid] = {
            "outcome": "error",
            "message": crash_message(report),
            "schedulers": 0,
        }


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Writes the record (in the process the reports reach)."""
    config = session.config
    path = config.getoption("upstream_results")
    if path is None or hasattr(config, "workerinput"):
        return
    tests = {k: v for k, v in _record.items() if v["outcome"] is not None}
    payload = {"variant": config.getoption("upstream_variant"), "tests": tests}
    Path(path).write_text(json.dumps(payload, indent=1, sort_keys=True) + "\n")
