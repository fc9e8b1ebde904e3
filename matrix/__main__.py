"""Command line: ``python -m matrix run|validate|schema|bench``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

DEFAULT_CASES = Path("cases")


def _validate(paths: list[Path]) -> int:
    from matrix.expand import case_files, cells_from_file
    from matrix.loader import CaseFileError

    files = [f for p in paths for f in case_files(p)]
    problems = 0
    for path in files:
        try:
            count = len(cells_from_file(path))
        except CaseFileError as error:
            print(error)
            problems += 1
        else:
            print(f"{path}: ok, {count} cells")
    return 1 if problems else 0


def _run(pytest_args: list[str]) -> int:
    """Every case on the installed vLLM, tables printed, reports under reports/."""
    import pytest

    from matrix.adapters import UnsupportedRelease, installed_vllm_version, select_adapter

    try:
        select_adapter()
    except UnsupportedRelease as error:
        # pytest would skip every cell and exit 0 with no table; the main job must not.
        print(f"matrix: cannot run: {error}", file=sys.stderr)
        return 2
    stem = Path("reports") / f"vllm-{installed_vllm_version()}"
    args = [
        str(DEFAULT_CASES),
        "-q",
        f"--matrix-report={stem}.json",
        f"--matrix-report={stem}.md",
        *pytest_args,
    ]
    return int(pytest.main(args))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m matrix", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser(
        "run", help="run every case and print the tables (pytest args after --)"
    )
    run.add_argument("pytest_args", nargs=argparse.REMAINDER)
    validate = commands.add_parser("validate", help="check case files without running them")
    validate.add_argument("paths", nargs="*", type=Path, default=[DEFAULT_CASES])
    commands.add_parser("schema", help="print the case files' JSON Schema")
    bench = commands.add_parser("bench", help="print speed figures")
    bench.add_argument("--cases", type=Path, default=DEFAULT_CASES)
    options = parser.parse_args(argv)
    if options.command == "run":
        return _run([a for a in options.pytest_args if a != "--"])
    if options.command == "validate":
        return _validate(options.paths)
    if options.command == "schema":
        from matrix.schema import CaseFile

        print(json.dumps(CaseFile.model_json_schema(), indent=2))
        return 0
    from matrix import bench as bench_module

    return bench_module.main(options.cases)


if __name__ == "__main__":
    sys.exit(main())
