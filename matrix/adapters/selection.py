"""The installed release's adapter: chosen by version from ``matrix.releases``, imported, and
its requirements probed before any case runs."""

from __future__ import annotations

import gc
import importlib
from typing import TYPE_CHECKING

from matrix.adapters.protocol import Refused, UnsupportedRelease, VersionAdapter
from matrix.installed import installed_vllm_version
from matrix.releases import RELEASES, env_name, nearest_release, newest_release, release_label

if TYPE_CHECKING:  # imports vLLM
    from matrix.adapters.v0_30 import Vllm030


def _version(version: str | None) -> str:
    version = installed_vllm_version() if version is None else version
    if version is None:
        env = env_name(newest_release())
        raise UnsupportedRelease(f"vLLM is not installed (run through tox, e.g. tox -e {env})")
    return version


def _lacks_import(error: ImportError) -> UnsupportedRelease:
    return UnsupportedRelease(f"vLLM lacks an import the adapters need: {error}")


def adapter_class(version: str | None = None) -> type[Vllm030]:
    """The adapter class for the installed vLLM (or ``version``), its requirements probed,
    with none of :func:`select_adapter`'s start-up settings: for a process that has vLLM
    imported and set up already. Raises :class:`UnsupportedRelease` naming what is missing."""
    version = _version(version)
    release = nearest_release(version)
    module_name, class_name = RELEASES[release].adapter.split(":")
    try:
        adapter_type: type[Vllm030] = getattr(importlib.import_module(module_name), class_name)
        from matrix.adapters.patched import carries_patch, patched_adapter

        if carries_patch():  # the findings' fix in vLLM's source: the release's patched adapter
            adapter_type = patched_adapter(adapter_type)
    except ImportError as error:
        raise _lacks_import(error) from error
    missing = [r.description for r in adapter_type.requirements if not r.met()]
    if missing:
        raise UnsupportedRelease(
            f"vLLM {version} lacks what the {release} adapter drives: {'; '.join(missing)}"
        )
    return adapter_type


def select_adapter(version: str | None = None) -> VersionAdapter:
    """The adapter for the installed vLLM (or ``version``), its requirements probed, vLLM's
    start-up settings made first (``runtime.prepare_vllm``); raises
    :class:`UnsupportedRelease` naming what is missing."""
    version = _version(version)
    # vLLM's import makes about a million objects that live as long as the process, and the
    # collections they set off meanwhile traverse them again and again (0.7 s of its 4.5 s of
    # CPU on 0.33); the cycles it drops are a few MB, kept. Then moved out of the collector's
    # generations, they are not traversed by every full collection the runs' records set off.
    collecting = gc.isenabled()
    gc.disable()
    try:
        from matrix.adapters.runtime import prepare_vllm

        prepare_vllm()
        adapter: VersionAdapter = adapter_class(version)(release_label(version))
    except ImportError as error:
        raise _lacks_import(error) from error
    finally:
        if collecting:
            gc.enable()
    gc.freeze()
    return adapter


def adapter_or_refusal() -> VersionAdapter:
    """The installed release's adapter, or one that refuses every case with the reason."""
    try:
        return select_adapter()
    except UnsupportedRelease as error:
        return Refused(str(error))
