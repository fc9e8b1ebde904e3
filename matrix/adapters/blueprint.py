"""What every scheduler built for one case shares, whatever its pool size: the engine config,
the KV cache groups, the block sizes and the block hasher, made once per case object."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from vllm.config import VllmConfig
from vllm.utils.hashing import sha256
from vllm.v1.core.kv_cache_utils import get_request_block_hasher, resolve_kv_cache_block_sizes
from vllm.v1.kv_cache_interface import KVCacheGroupSpec
from vllm.v1.request import Request

from matrix.adapters.config import vllm_config_for
from matrix.adapters.kv_cache import kv_cache_config_for
from matrix.case.format import CaseFile


@dataclass(frozen=True)
class Blueprint:
    """What every scheduler built for one case shares, whatever its pool size."""

    case: CaseFile
    config: VllmConfig
    groups: tuple[KVCacheGroupSpec, ...]
    block_size: int
    hash_block_size: int
    block_hasher: Callable[[Request], list[Any]]


# The last case's blueprint: a cell builds its schedulers, one per pool size, from one case
# object, and so does an explore trial. Kept by identity, so holding it keeps the key alive.
_last_blueprint: list[Blueprint] = []


def blueprint(case: CaseFile) -> Blueprint:
    """The configs, KV cache groups and block sizes of ``case``'s schedulers."""
    if _last_blueprint and _last_blueprint[0].case is case:
        return _last_blueprint[0]
    config = vllm_config_for(case, 2)
    kv_cache_config = kv_cache_config_for(case, 2)
    block_size, hash_block_size = resolve_kv_cache_block_sizes(kv_cache_config, config)
    made = Blueprint(
        case,
        config,
        tuple(kv_cache_config.kv_cache_groups),
        block_size,
        hash_block_size,
        get_request_block_hasher(hash_block_size, sha256),
    )
    _last_blueprint[:] = [made]
    return made
