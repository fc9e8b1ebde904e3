"""What the installed vLLM's model registry has: the architectures a model file may name, and a
line for one it lacks (a misspelling's did-you-mean, or the release that last had a dropped
one, from ``matrix.architectures``' records).
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache

from matrix.architectures import dropped, known_to, recorded
from matrix.installed import installed_vllm_version


@contextmanager
def quiet_imports() -> Iterator[None]:
    """Importing vLLM and a model module logs what this install lacks (Triton, vLLM's compiled
    kernels), which says nothing of a model file: silenced while they import. Where logging
    is off already (a sweep worker, which turns it off once: each switch clears every logger's
    cache, a second in all over a sweep), nothing changes."""
    if logging.root.manager.disable >= logging.ERROR:
        yield
        return
    logging.disable(logging.ERROR)
    try:
        yield
    finally:
        logging.disable(logging.NOTSET)


@cache
def known_architectures() -> frozenset[str]:
    """The architectures the installed vLLM's model registry knows."""
    from matrix.adapters.runtime import prepare_vllm

    with quiet_imports():
        prepare_vllm()
        from vllm.model_executor.models import ModelRegistry

        return frozenset(ModelRegistry.get_supported_archs())


def module_of(architecture: str) -> str:
    """The module of vLLM's that defines ``architecture`` (``-`` where the registry says none)."""
    from vllm.model_executor.models import ModelRegistry

    entry = ModelRegistry.models.get(architecture)
    return str(getattr(entry, "module_name", None) or "-")


@cache
def transformers_classes() -> frozenset[str]:
    """The model class names transformers' auto mappings know (no model module imported)."""
    from transformers.models.auto import modeling_auto

    names: set[str] = set()
    for name, value in vars(modeling_auto).items():
        if name.endswith("_MAPPING_NAMES") and isinstance(value, dict):
            for classes in value.values():
                names |= {classes} if isinstance(classes, str) else set(classes)
    return frozenset(names)


def unknown_architecture(architecture: str, known: frozenset[str], version: str | None) -> str:
    """Why a release whose registry is ``known`` cannot build ``architecture``: dropped (and
    when), a real model class it lacks, else a misspelling's did-you-mean."""
    release = f"vLLM {version}" if version else "vLLM"
    gone = dropped(architecture, version)
    if gone is not None:
        return f"the installed {release} no longer has '{architecture}': {gone}"
    if architecture in transformers_classes():  # a real model: a near name is no fix
        records = list(recorded())
        span = f" (nor did any recorded release, {records[0]}-{records[-1]})" if records else ""
        return (
            f"the installed vLLM has no '{architecture}': transformers has this model class, "
            f"vLLM does not{span}"
        )
    guess = difflib.get_close_matches(architecture, list(known), n=1, cutoff=0.6)
    hint = f": did you mean '{guess[0]}'?" if guess else ""
    return f"the installed vLLM does not know '{architecture}'{hint}"


def architecture_problem(architecture: str) -> str | None:
    """Why the installed vLLM cannot build ``architecture``, or None: from the release's
    recorded architectures when there are some (no vLLM import), else from its registry."""
    version = installed_vllm_version()
    known = known_to(version) or known_architectures()
    if architecture in known:
        return None
    return unknown_architecture(architecture, known, version)
