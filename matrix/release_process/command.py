"""``python -m matrix releases``: the command line (docs/releases.md).

- no option: the releases the index serves beside the known ones; exit 1 when the index has a
  release newer than the newest known one, 3 when the index cannot be read;
- ``--add X.Y.Z``: the release's pins and tox envs, installed and probed (``add``);
- ``--probe`` / ``--record`` (in a release's env): the installed vLLM's surfaces against a
  release's record, a line per difference / its record written.
"""

from __future__ import annotations

import argparse
import sys

from matrix.releases import VERSION, env_name, newest_release

EXIT_NEWER = 1
EXIT_REFUSED = 2
EXIT_UNREACHABLE = 3


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``releases`` subcommand's options."""
    parser.add_argument("--index", help="the package index (default: PIP_INDEX_URL, else PyPI)")
    parser.add_argument("--pre", action="store_true", help="list pre-releases too")
    parser.add_argument(
        "--all", action="store_true", dest="everything", help="list every release, the old too"
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--add",
        metavar="X.Y.Z",
        help="write the release's pins and tox envs from the newest known one's, install, probe",
    )
    parser.add_argument("--no-install", action="store_true", help="with --add: write only")
    mode.add_argument(
        "--probe",
        action="store_true",
        help="in a release's env: what differs from a release's record of vLLM's surfaces",
    )
    parser.add_argument(
        "--record",
        action="store_true",
        help="in a release's env: write its record (matrix/adapters/surfaces/vllm-<version>.json)",
    )
    parser.add_argument("--against", metavar="X.Y.Z", help="with --probe: the recorded release")


def _list(options: argparse.Namespace, endpoint: str) -> int:
    from matrix.release_process.add import CLONE
    from matrix.release_process.index import IndexUnreachable, served
    from matrix.release_process.listing import lines, listing
    from matrix.release_process.pins import pinned_versions

    try:
        found = listing(
            served(endpoint),
            pinned_versions(CLONE / "requirements"),
            options.pre,
            options.everything,
        )
    except IndexUnreachable as error:
        print(f"matrix releases: {error}", file=sys.stderr)
        return EXIT_UNREACHABLE
    for line in lines(found, endpoint):
        print(line)
    return EXIT_NEWER if found.newer else 0


def _against(installed: str, stated: str | None) -> str | None:
    """The release whose record the installed one is compared with: ``stated``, else the
    installed release's own, else the newest recorded one older than it."""
    from packaging.version import InvalidVersion, Version

    from matrix.adapters.surface_probe import recorded_versions

    if stated is not None:
        return stated
    recorded = recorded_versions()
    if installed in recorded:
        return installed
    try:
        older = [v for v in recorded if Version(v) < Version(installed)]
    except InvalidVersion:
        return None
    return max(older, key=Version) if older else None


def _probe(options: argparse.Namespace) -> int:
    from matrix.installed import installed_vllm_version

    name = "matrix releases --probe" if options.probe else "matrix releases --record"
    version = installed_vllm_version()
    if version is None:
        env = env_name(newest_release())
        print(
            f"{name}: vLLM is not installed (run it in a release's env: tox -e {env})",
            file=sys.stderr,
        )
        return EXIT_REFUSED
    for stated in (version, options.against):
        if stated is not None and VERSION.fullmatch(stated) is None:
            print(f"{name}: {stated[:60]!r} is not a vLLM version", file=sys.stderr)
            return EXIT_REFUSED
    from matrix.adapters import surface_changes, surface_probe

    against = _against(version, options.against) if options.probe else None
    if options.probe and (against is None or not surface_probe.snapshot_path(against).is_file()):
        print(
            f"{name}: no record of vLLM {against or 'older than ' + version} "
            f"(matrix/adapters/surfaces/)",
            file=sys.stderr,
        )
        return EXIT_REFUSED
    snapshot = surface_probe.record(version)
    if options.record:
        print(f"wrote {surface_probe.write_snapshot(snapshot)}")
    if against is not None:
        old = surface_probe.read_snapshot(surface_probe.snapshot_path(against))
        for line in surface_changes.report(old, snapshot):
            print(line)
    return 0


def main(options: argparse.Namespace) -> int:
    """Runs what the options ask; the exit code."""
    if options.probe or options.record:
        return _probe(options)
    from matrix.release_process.index import default_index

    endpoint = options.index or default_index()
    if options.add is not None:
        from matrix.release_process.add import add

        return add(options.add, endpoint, install=not options.no_install)
    return _list(options, endpoint)
