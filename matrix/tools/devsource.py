"""``python -m matrix.tools.devsource PATH``: your own vLLM, a source checkout or a wheel,
installed as the env's vLLM (what ``tox -e vllmdev`` runs).

It makes the checkout at PATH (a directory holding the ``vllm`` package; its Python files are
all the scheduler needs, so nothing is compiled) or the wheel at PATH this interpreter's vLLM,
without dependencies: a checkout through a ``.pth`` file and a ``vllm`` dist-info (so its
version answers ``importlib.metadata``), a wheel through ``installer``. Both record PEP 610's
``direct_url.json``, which ``matrix.installed.installed_source`` reads back for the report, as
it does for a developer's own editable install. Never imports vLLM; calls only git.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import sysconfig
from importlib import metadata
from pathlib import Path
from typing import Literal

from matrix.installed import git
from matrix.releases import newest_release

INSTALLER = "matrix"  # the dist-info INSTALLER of what this module installed
PTH_NAME = "matrix-vllm-source.pth"


class SourceError(Exception):
    """A vLLM source that cannot be had or installed (a release's archive, a checkout, a wheel);
    the message is one line."""


_VERSION_FILE = re.compile(r"""^__version__\s*=\s*(?:version\s*=\s*)?['"]([^'"]+)['"]""", re.M)
# vLLM's tags: v0.31.0, v0.10.1.1, v0.6.4.post1, and release candidates, v0.32.0rc1.
_DESCRIBE = re.compile(
    r"^v?(\d+(?:\.\d+)+(?:(?:a|b|rc)\d+)?(?:\.post\d+)?(?:\.dev\d+)?)-(\d+)-g([0-9a-f]+)$"
)


def checkout_version(checkout: Path) -> str:
    """``VLLM_VERSION`` when set; else the package's own ``vllm/_version.py`` (written when it
    was built once); else the checkout's ``git describe`` (``v0.33.0-12-gabc`` ->
    ``0.33.0+12.gabc``, ``v0.34.0rc1-5-gdef`` -> ``0.34.0rc1+5.gdef``)."""
    stated = os.environ.get("VLLM_VERSION")
    if stated:
        return stated
    version_file = checkout / "vllm" / "_version.py"
    if version_file.is_file():
        found = _VERSION_FILE.search(version_file.read_text(encoding="utf-8"))
        if found:
            return found.group(1)
    described = git(checkout, "describe", "--tags", "--long", "--match", "v[0-9]*")
    match = _DESCRIBE.match(described or "")
    if match:
        tag, commits, sha = match.groups()
        return tag if commits == "0" else f"{tag}+{commits}.g{sha}"
    raise SourceError(
        f"{checkout}: no version (no vllm/_version.py, no v* git tag): set VLLM_VERSION "
        f"(such as {newest_release()}.0)"
    )


def _previous_install(site: Path) -> None:
    """Removes what an earlier ``install`` put in ``site``; refuses a vLLM installed otherwise,
    which would shadow the source."""
    for dist_info in site.glob("vllm-*.dist-info"):
        installer = dist_info / "INSTALLER"
        if not installer.is_file() or installer.read_text().strip() != INSTALLER:
            raise SourceError(f"{site}: a vLLM is already installed here ({dist_info.name})")
        record = dist_info / "RECORD"
        for line in record.read_text().splitlines() if record.is_file() else ():
            target = site / line.split(",")[0]
            if target.is_file() and dist_info not in target.parents:
                target.unlink()
        shutil.rmtree(site / "vllm", ignore_errors=True)
        shutil.rmtree(dist_info)
    (site / PTH_NAME).unlink(missing_ok=True)


def _direct_url(path: Path, kind: Literal["checkout", "wheel"]) -> str:
    info: dict[str, dict[str, str]] = {"archive_info": {}} if kind == "wheel" else {"dir_info": {}}
    return json.dumps({"url": path.as_uri(), **info})


def install_checkout(checkout: Path, site: Path) -> str:
    """Makes ``checkout``'s ``vllm`` package this site's vLLM; returns its version."""
    if not (checkout / "vllm" / "__init__.py").is_file():
        raise SourceError(f"{checkout}: not a vLLM checkout (no vllm/__init__.py)")
    version = checkout_version(checkout)
    dist_info = site / f"vllm-{version}.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n")
    (dist_info / "INSTALLER").write_text(INSTALLER + "\n")
    (dist_info / "direct_url.json").write_text(_direct_url(checkout, "checkout"))
    (dist_info / "RECORD").write_text(f"{PTH_NAME},,\n")
    (site / PTH_NAME).write_text(f"{checkout}\n")
    return version


def install_wheel(wheel: Path, site: Path) -> str:
    """Installs ``wheel`` without its dependencies; returns its version."""
    from installer import install
    from installer.destinations import SchemeDictionaryDestination
    from installer.sources import WheelFile

    paths = {**sysconfig.get_paths(), "purelib": str(site), "platlib": str(site)}
    destination = SchemeDictionaryDestination(paths, sys.executable, "posix")
    extra = {
        "INSTALLER": INSTALLER.encode(),
        "direct_url.json": _direct_url(wheel, "wheel").encode(),
    }
    with WheelFile.open(wheel) as source:
        install(source, destination, extra)
    return metadata.Distribution.at(next(site.glob("vllm-*.dist-info"))).version


def install(source: Path, site: Path) -> str:
    """Makes a checkout or wheel ``site``'s vLLM in place of an earlier one; returns its version."""
    source = source.expanduser().resolve()
    _previous_install(site)
    if source.is_file() and source.suffix == ".whl":
        return install_wheel(source, site)
    if source.is_dir():
        return install_checkout(source, site)
    raise SourceError(f"{source}: neither a vLLM checkout directory nor a .whl file")


def main(argv: list[str] | None = None) -> int:
    """The command line: installs the named source; returns the exit code."""
    import argparse

    from matrix.releases import nearest_release, release_label, release_of

    parser = argparse.ArgumentParser(prog="python -m matrix.tools.devsource", description=__doc__)
    parser.add_argument("source", nargs="?", default=os.environ.get("VLLM_SOURCE"))
    parser.add_argument("--site", type=Path, default=Path(sysconfig.get_paths()["purelib"]))
    parser.add_argument(
        "--deps-of", metavar="VERSION", help="the release whose pinned dependencies the env has"
    )
    options = parser.parse_args(argv)
    if not options.source:
        print("matrix devsource: name a checkout or wheel (or set VLLM_SOURCE)", file=sys.stderr)
        return 2
    try:
        version = install(Path(options.source), options.site)
    except SourceError as error:
        print(f"matrix devsource: {error}", file=sys.stderr)
        return 2
    driven_as = nearest_release(version)
    print(f"matrix devsource: vLLM {release_label(version)} from {options.source}")
    if options.deps_of and release_of(options.deps_of) != driven_as:
        print(
            f"matrix devsource: this env has the dependencies of {options.deps_of}, but vLLM "
            f"{version} is driven as {driven_as}: rerun with VLLM_DEV_DEPS={driven_as}.0",
            file=sys.stderr,
        )
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
