"""``python -m matrix upstream``: vLLM's own tests on the installed release's lean env (what
``tox -e upstream033`` runs; docs/upstream.md).

It takes the release's ``tests/`` from its source archive (``source``), runs a tier
of them with pytest in a subprocess (offline, on the CPU platform, the shipped Hub configs as
the Hugging Face cache), and compares every outcome with ``upstream/vllm-<version>.yaml``
(``expected``): the run fails on a test that does not pass and is not listed, and on
a listed test that does not end as listed. With ``--upstream-variant NAME`` it then runs the
tier again with that variant applied to every scheduler the tests build (``plugin``)
and reports, in ``reports/upstream-<version>-<NAME>.md``, every test whose outcome changes;
the run fails when the variant fails a test that passes under stock (``--report-only``: it is
reported, not failed), so CI can gate a candidate fix on vLLM's own tests.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from matrix.adapters.runtime import OFFLINE
from matrix.case.reading import CaseFileError
from matrix.installed import vllm_cache_root
from matrix.releases import env_name, newest_release
from matrix.tools.devsource import SourceError
from matrix.upstream.expected import (
    TIERS,
    Change,
    Expected,
    Result,
    Tier,
    broken,
    changes,
    compare,
    expected_path,
    load_expected,
)
from matrix.upstream.report import RunInfo, stock_report, variant_report
from matrix.upstream.source import (
    cache_root,
    checkout_tests,
    fetch_tests,
    offline_hub,
    source_record,
)

PLUGIN = "matrix.upstream.plugin"
PER_TEST_TIMEOUT_S = 900  # pytest-timeout's limit: a test that hangs fails, the run goes on


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The subcommand's options."""
    parser.add_argument("--tier", choices=TIERS, default="quick")
    parser.add_argument(
        "--upstream-variant",
        metavar="NAME",
        help="also run with this variant (a built-in, an entry point's, or module:NAME) applied "
        "to every scheduler, and report the tests it changes against stock",
    )
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="with --upstream-variant: report the tests the variant fails that pass under stock, "
        "without failing the run on them (exit code: stock's)",
    )
    parser.add_argument(
        "--recorded",
        action="store_true",
        help="take stock's outcomes from this tier's last recorded run (reports/upstream-"
        "<version>-<tier>.json) instead of running it: judge it again after editing the "
        "expected file, or compare a variant with it",
    )
    parser.add_argument("--source", type=Path, help="a vLLM checkout whose tests/ to run")
    parser.add_argument("--expected", type=Path, help="default: upstream/vllm-<release>.yaml")
    parser.add_argument("-n", "--workers", default="2", help="pytest-xdist workers (0: none)")
    parser.add_argument("--out", type=Path, default=Path("reports"))
    parser.add_argument("--index", help="a package index's simple API (default: PyPI)")
    parser.add_argument("pytest_args", nargs=argparse.REMAINDER, help="-- then pytest's")


def _environment(hub: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        OFFLINE,
        HF_HUB_CACHE=str(hub),
        # The CPU platform: on the unspecified one vLLM's autouse cleanup fixture empties an
        # accelerator's cache after every test, and every test errors at teardown.
        VLLM_TARGET_DEVICE="cpu",
    )
    env.setdefault("VLLM_CACHE_ROOT", str(vllm_cache_root()))  # the release's, as the matrix's
    return env


def run_pytest(
    root: Path, paths: list[str], workers: str, extra: list[str], variant: str | None
) -> tuple[dict[str, Result], float]:
    """vLLM's tests at ``paths`` under ``root``: every test's result, and the wall time."""
    with tempfile.TemporaryDirectory() as scratch:
        record = Path(scratch) / "results.json"
        command = [
            sys.executable,
            *("-m", "pytest", *paths, "-q", "-n", workers),
            *("-c", str(root / "pyproject.toml"), "--rootdir", str(root)),
            *("-p", "no:cacheprovider", "-p", "no:matrix", "-p", PLUGIN),
            # A file whose imports fail (a package left out) is one error, not the run's end.
            "--continue-on-collection-errors",
            *("--upstream-results", str(record), f"--timeout={PER_TEST_TIMEOUT_S}"),
            *(("--upstream-variant", variant) if variant else ()),
            *extra,
        ]
        started = time.monotonic()
        code = subprocess.call(command, cwd=root, env=_environment(offline_hub(cache_root())))
        wall = time.monotonic() - started
        if code not in (0, 1) or not record.is_file():
            raise SourceError(f"pytest stopped with exit code {code}: no outcomes to compare")
        tests = json.loads(record.read_text())["tests"]
    return {nodeid: Result(nodeid, **fields) for nodeid, fields in tests.items()}, wall


def _checkout(options: argparse.Namespace) -> Path | None:
    """The checkout whose tests run: ``--source``, else the installed vLLM's own checkout when
    it holds ``tests/`` (a patched release tree, ``tox -e patched034``); None for a release."""
    if options.source:
        return Path(options.source)
    from matrix.installed import installed_source

    source = installed_source()
    if source is None:
        return None
    if source.kind == "checkout" and (Path(source.path) / "tests" / "conftest.py").is_file():
        return Path(source.path)
    raise SourceError("this vLLM is a local build: name its checkout with --source")


def _tests_root(checkout: Path | None, version: str, index: str | None) -> Path:
    if checkout is not None:
        return checkout_tests(checkout)
    return fetch_tests(version, endpoint=index)


def _expected_file(options: argparse.Namespace, version: str, checkout: Path | None) -> Path:
    if options.expected:
        return Path(options.expected)
    if checkout:  # a checkout is held to the release it is driven as
        from matrix.releases import nearest_release

        return expected_path(f"{nearest_release(version)}.0")
    return expected_path(version)


def tier_paths(expected: Expected, tier: Tier, root: Path, where: Path, drop: bool) -> list[str]:
    """The tier's paths; one missing under ``root`` is an error naming ``where`` (the expected
    file), or, with ``drop`` (a checkout's tests may have moved), left out with a note."""
    paths = expected.tiers.paths(tier)
    missing = [p for p in paths if not (root / p).exists()]
    if missing and not drop:
        raise SourceError(f"{where}: {', '.join(missing)}: not in the release's tests")
    for path in missing:
        print(f"matrix upstream: {path} is not in {root}: left out", file=sys.stderr)
    return [p for p in paths if p not in missing]


def _write(out: Path, stem: str, lines: list[str], payload: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{stem}.md").write_text("\n".join(lines))
    (out / f"{stem}.json").write_text(json.dumps(payload, indent=1, sort_keys=True) + "\n")
    print("\n".join(lines))
    print(f"matrix upstream: wrote {out / stem}.md and .json")


def _payload(info: RunInfo, results: dict[str, Result], extra: list[str]) -> dict[str, Any]:
    return {
        "run": asdict(info),
        "pytest_args": extra,
        "tests": {nodeid: asdict(r) for nodeid, r in results.items()},
    }


def _recorded(path: Path, extra: list[str]) -> tuple[dict[str, Result], RunInfo]:
    """A run recorded by ``_write``: its results and what it was."""
    if not path.is_file():
        raise SourceError(f"{path}: no recorded run (run once without --recorded)")
    payload = json.loads(path.read_text())
    if payload["pytest_args"] != extra:
        raise SourceError(f"{path}: recorded with pytest arguments {payload['pytest_args']}")
    print(f"matrix upstream: stock outcomes from {path}")
    results = {nodeid: Result(**fields) for nodeid, fields in payload["tests"].items()}
    return results, RunInfo(**payload["run"])


def _variant_code(variant: str, broken: list[Change], report_only: bool) -> int:
    """1 when ``variant`` fails tests that pass under stock (0 with ``--report-only``)."""
    if not broken:
        return 0
    verdict = "reported only (--report-only)" if report_only else "the run fails"
    print(
        f"matrix upstream: {len(broken)} test(s) pass under stock and fail under "
        f"`{variant}`: {verdict}",
        file=sys.stderr,
    )
    return 0 if report_only else 1


def main(options: argparse.Namespace) -> int:
    """Runs the tier (and the variant); returns 0 when stock ends as expected and the variant
    fails no test stock passes, 1 when not (a variant's failures: unless ``--report-only``),
    2 when nothing could run."""
    from matrix.installed import installed_vllm_version
    from matrix.upstream.plugin import VariantError, resolve_variant

    version = installed_vllm_version()
    if version is None:
        env = env_name(newest_release(), "upstream")
        print(f"matrix upstream: vLLM is not installed (use tox -e {env})", file=sys.stderr)
        return 2
    extra = [a for a in options.pytest_args if a != "--"]
    try:
        variant = resolve_variant(options.upstream_variant) if options.upstream_variant else None
        checkout = _checkout(options)
        root = _tests_root(checkout, version, options.index)
        source = source_record(root)
        where = _expected_file(options, version, checkout)
        expected = load_expected(where)
        paths = tier_paths(expected, options.tier, root, where, drop=bool(checkout))
        stem = f"upstream-{version}-{options.tier}"
        record = options.out / f"{stem}.json"
        if options.recorded:
            stock, info = _recorded(record, extra)
        else:
            stock, wall = run_pytest(root, paths, options.workers, extra, None)
            info = RunInfo(version, options.tier, source, wall, options.workers)
        comparison = compare(stock, expected.entries(), paths, complete=not extra)
        _write(options.out, stem, stock_report(info, comparison), _payload(info, stock, extra))
        code = 0 if comparison.ok else 1
        if variant is not None:
            results, wall = run_pytest(
                root, paths, options.workers, extra, options.upstream_variant
            )
            info = RunInfo(version, options.tier, source, wall, options.workers)
            changed = changes(stock, results)
            lines = variant_report(info, variant.name, changed, results)
            _write(
                options.out,
                f"upstream-{version}-{variant.name}",
                lines,
                _payload(info, results, extra),
            )
            code = max(code, _variant_code(variant.name, broken(changed), options.report_only))
    except (SourceError, CaseFileError, VariantError) as error:
        print(f"matrix upstream: {error}", file=sys.stderr)
        return 2
    return code
