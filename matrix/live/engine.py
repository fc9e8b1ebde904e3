"""One live engine per layout: vLLM's ``LLMEngine`` with an in-process ``EngineCore``, its model
runner, the tiny model of ``layout`` and the test connector, started once; each pool then gets
a fresh scheduler.

**Why a fresh scheduler per pool is sound.** The engine starts with more blocks than any pool
the layout's cells run; a pool is a new ``Scheduler`` (the class ``EngineCore`` picks) built as
``EngineCore`` builds it, over the engine's ``KVCacheConfig`` with fewer blocks. Its block ids
are a subset of the worker's cache, which is all the model runner addresses; the worker holds
no request across runs (every run is drained first: what is left aborted, every load
reported, the finished ids delivered to the worker, every block free again). What a fresh
engine would do differently is its start-up check, which refuses pools too small for one
``max_model_len`` request: the harness sweeps those pools too, so the live mode runs them.
"""

from __future__ import annotations

import dataclasses
import time
import traceback
from typing import Any

import torch
from vllm import EngineArgs
from vllm.distributed.parallel_state import cleanup_dist_env_and_memory
from vllm.sampling_params import SamplingParams
from vllm.v1.core.kv_cache_utils import resolve_kv_cache_block_sizes
from vllm.v1.engine.llm_engine import LLMEngine
from vllm.v1.executor.abstract import Executor
from vllm.v1.kv_cache_interface import FullAttentionSpec, MambaSpec, SlidingWindowSpec

from matrix.adapters.accounting import block_account
from matrix.adapters.config import EngineSettings, engine_settings
from matrix.case.format import CaseFile
from matrix.live.connector import CONNECTOR_NAME, REPORTS
from matrix.live.layout import BLOCK_TOKEN, MAMBA_CHUNK, SAMPLED_TOKEN, TAIL_TOKENS, model_dir
from matrix.live.platform import Device
from matrix.live.port import side_channel_problem

# At least this many blocks per engine (a few MB): pools above it start a bigger engine.
ENGINE_BLOCKS = 256
# Engine steps a drain may take before the engine is declared unusable.
DRAIN_STEPS = 32


class LayoutMismatch(Exception):
    """The engine's KV cache groups are not the case's; the message says both."""


class FirstRequestFailed(Exception):
    """The started engine raised serving its first request; the message is vLLM's error."""


def live_sampling(max_tokens: int) -> SamplingParams:
    """A live request's sampling: greedy, of the one token the drafter proposes, to the end."""
    return SamplingParams(
        max_tokens=max_tokens, ignore_eos=True, temperature=0.0, allowed_token_ids=[SAMPLED_TOKEN]
    )


def live_settings(case: CaseFile) -> EngineSettings:
    """What the live engine of ``case`` is built from: the harness's engine settings, with the
    live model in place of the harness's config. Cells that agree on it share an engine."""
    return dataclasses.replace(engine_settings(case), model_dir=str(model_dir(case)))


def engine_args(settings: EngineSettings, device: Device, blocks: int) -> EngineArgs:
    """vLLM's engine arguments for ``settings`` with ``blocks`` KV cache blocks."""
    transfer = dict(settings.transfer)
    transfer.update(kv_connector=CONNECTOR_NAME, kv_connector_module_path="matrix.live.connector")
    speculative = None
    if settings.speculative is not None:
        method, tokens = settings.speculative
        # The harness's ngram settings (matrix.adapters.config).
        speculative = {
            "method": method,
            "num_speculative_tokens": tokens,
            "prompt_lookup_min": 1,
            "prompt_lookup_max": 4,
        }
    mamba = {"mamba_cache_mode": settings.mamba_mode} if settings.mamba_mode else {}
    return EngineArgs(
        model=settings.model_dir,
        skip_tokenizer_init=True,
        load_format="dummy",  # random weights: only config.json exists
        enforce_eager=True,
        dtype=model_dtype(settings, device),
        seed=0,
        max_model_len=settings.max_model_len,
        block_size=settings.block_size,
        enable_prefix_caching=settings.prefix_caching,
        num_gpu_blocks_override=blocks,
        # The override fixes the pool; a small reservation keeps the CPU worker's start-up
        # memory check (the default 0.92 of the node) and the profiler out of the way.
        kv_cache_memory_bytes=64 << 20,
        gpu_memory_utilization=0.1,
        speculative_config=speculative,
        kv_transfer_config=transfer,
        **mamba,
        **dict(settings.scheduler),
    )


def model_dtype(settings: EngineSettings, device: Device) -> str:
    """The model's dtype: the device's, but bfloat16 for a Mamba layout on a CPU with
    AVX512-BF16, where vLLM packs the Mamba2 convolution's weights for its bfloat16 kernel,
    which has no float32 version ("causal_conv1d_fwd_kernel_impl" not implemented for
    'Float', measured on 0.31). The condition is vLLM's own (``dispatch_cpu_unquantized_gemm``)."""
    if device.on_cpu and settings.mamba_mode is not None:
        import vllm._custom_ops as ops

        if torch.cpu._is_avx512_bf16_supported() and hasattr(ops, "causal_conv1d_weight_pack"):
            return "bfloat16"
    return device.dtype


def group_kinds(groups: Any, max_model_len: int) -> list[tuple[str, int, int | str | None]]:
    """KV cache groups as (kind, block size in tokens, window or Mamba mode), sorted: vLLM's
    specs or a case's groups."""
    kinds: list[tuple[str, int, int | str | None]] = []
    for group in groups:
        spec = getattr(group, "kv_cache_spec", None)
        if spec is None:
            detail = group.mamba_mode if group.kind == "mamba" else group.window
            kinds.append((group.kind, group.tokens_per_block(max_model_len), detail))
        elif isinstance(spec, MambaSpec):
            kinds.append(("mamba", spec.block_size, spec.mamba_cache_mode))
        elif isinstance(spec, SlidingWindowSpec):
            kinds.append(("sliding_window", spec.block_size, spec.sliding_window))
        elif isinstance(spec, FullAttentionSpec):
            kinds.append(("full", spec.block_size, None))
        else:
            kinds.append((type(spec).__name__, spec.block_size, None))
    return sorted(kinds, key=str)


class LiveEngine:
    """A started engine, one layout's; :meth:`use_pool` gives it a fresh scheduler."""

    def __init__(self, case: CaseFile, device: Device, blocks: int) -> None:
        self.settings = live_settings(case)
        self.blocks = blocks
        config = engine_args(self.settings, device, blocks).create_engine_config()
        self.llm = LLMEngine(
            vllm_config=config, executor_class=Executor.get_class(config), log_stats=False
        )
        self.core: Any = self.llm.engine_core.engine_core
        self.kv_cache_config = self.core.scheduler.kv_cache_config
        engine_groups = group_kinds(self.kv_cache_config.kv_cache_groups, case.max_model_len)
        case_groups = group_kinds(case.groups, case.max_model_len)
        if engine_groups != case_groups:
            self.shutdown()
            raise LayoutMismatch(
                f"the engine's KV cache groups are {engine_groups}, the case's {case_groups}"
            )
        try:
            self._serve_one()
        except Exception as error:
            self.shutdown()
            raise FirstRequestFailed(f"{type(error).__name__}: {error}{_where(error)}") from error

    def _serve_one(self) -> None:
        """Serves one local request to its end (a prefill, decode steps, drafts verified):
        an engine that cannot is refused before any cell runs on it."""
        self.use_pool(self.blocks)
        prompt = [BLOCK_TOKEN + i for i in range(self.settings.block_size)]
        prompt += [SAMPLED_TOKEN] * TAIL_TOKENS
        if self.settings.mamba_mode is not None:
            # One Mamba chunk: 0.32's CPU engine fails any align prefill longer than one
            # (docs/live.md, "vLLM's CPU Mamba kernel"); the cells' own prefills are the test.
            prompt = prompt[-MAMBA_CHUNK:]
        self.llm.add_request("serve-one", {"prompt_token_ids": prompt}, live_sampling(8))
        for _ in range(DRAIN_STEPS):
            if not self.core.scheduler.has_requests():
                break
            self.llm.step()
        if not self.drain([]):
            raise RuntimeError("the first request did not finish")

    @property
    def scheduler(self) -> Any:
        """The scheduler the engine steps now."""
        return self.core.scheduler

    def use_pool(self, pool: int) -> Any:
        """A fresh scheduler of ``pool`` blocks, built as ``EngineCore`` builds its own, in
        place of the drained one; returns it."""
        if pool > self.blocks:
            raise ValueError(f"pool {pool} is larger than the engine's {self.blocks} blocks")
        old = self.core.scheduler
        config = self.llm.vllm_config
        kv_cache_config = dataclasses.replace(self.kv_cache_config, num_blocks=pool)
        config.cache_config.num_gpu_blocks = pool
        block_size, hash_block_size = resolve_kv_cache_block_sizes(kv_cache_config, config)
        fresh = config.scheduler_config.get_scheduler_cls()(
            vllm_config=config,
            kv_cache_config=kv_cache_config,
            structured_output_manager=self.core.structured_output_manager,
            include_finished_set=old.finished_req_ids_dict is not None,
            log_stats=self.core.log_stats,
            block_size=block_size,
            hash_block_size=hash_block_size,
        )
        old.shutdown()
        self.core.scheduler = fresh
        # The executor hands the worker's transfer results to the scheduler's connector.
        self.core.model_executor.init_kv_output_aggregator(fresh.connector)
        REPORTS.clear()
        return fresh

    def drain(self, request_ids: list[str]) -> bool:
        """Ends a run: aborts what is left, reports every unreported load of ``request_ids``
        finished, and steps until nothing is left for the worker to hear; whether every block
        is free again."""
        scheduler = self.core.scheduler
        left = [request_id for request_id in request_ids if request_id in scheduler.requests]
        if left:
            self.llm.abort_request(left, internal=True)
        # What an abort leaves in the scheduler are loads in flight, their blocks held until
        # the worker reports them; reporting a request the scheduler no longer has is an error.
        REPORTS.due |= {r for r in request_ids if r in scheduler.requests} - REPORTS.reported
        for _ in range(DRAIN_STEPS):
            if not (scheduler.has_requests() or self.core.batch_queue):
                break
            self.llm.step()
        account = block_account(scheduler)
        settled = not (scheduler.has_requests() or self.core.batch_queue)
        return settled and account.free == account.pool - 1

    def shutdown(self) -> None:
        """Stops the engine (its executor and connectors) and tears its distributed groups
        down, so the next engine of the process starts as the first did."""
        self.llm.engine_core.shutdown()
        cleanup_dist_env_and_memory()


def _where(error: BaseException) -> str:
    """Where in vLLM ``error`` was raised (`` (at vllm/...:LINE, FUNCTION)``), or ""."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if "/vllm/" in f.filename]
    if not frames:
        return ""
    frame = frames[-1]
    return f" (at vllm/{frame.filename.rsplit('/vllm/', 1)[1]}:{frame.lineno}, {frame.name})"


class Engines:
    """One live engine at a time (each holds a worker and its KV cache), started for a layout
    when a cell needs it and kept while the next cells share that layout; a layout vLLM
    refuses to start is remembered with the reason."""

    def __init__(self, device: Device) -> None:
        self.device = device
        self.current: LiveEngine | None = None
        self.refused: dict[EngineSettings, str] = {}
        self.starts: list[float] = []  # seconds each start took

    def get(self, case: CaseFile, pool: int) -> LiveEngine | str:
        """The engine for ``case``'s layout with at least ``pool`` blocks, or why none starts."""
        settings = live_settings(case)
        if settings in self.refused:
            return self.refused[settings]
        current = self.current
        if current is not None and current.settings == settings and current.blocks >= pool:
            return current
        self.discard()
        problem = side_channel_problem()
        if problem:  # not remembered: the port may be free for the next layout
            return problem
        began = time.monotonic()
        try:
            self.current = LiveEngine(case, self.device, max(ENGINE_BLOCKS, pool))
        except LayoutMismatch as error:
            self.refused[settings] = f"the live engine's layout differs: {error}"
            return self.refused[settings]
        except FirstRequestFailed as error:
            self.refused[settings] = f"vLLM's engine fails its first request: {error}"
            return self.refused[settings]
        except Exception as error:  # vLLM refusing to start the engine is the reason
            reason = f"vLLM does not start this engine: {type(error).__name__}: {error}"
            self.refused[settings] = reason
            return reason
        self.starts.append(time.monotonic() - began)
        return self.current

    def discard(self) -> None:
        """Shuts the current engine down."""
        if self.current is not None:
            engine, self.current = self.current, None
            engine.shutdown()
