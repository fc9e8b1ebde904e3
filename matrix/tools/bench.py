"""``python -m matrix bench``: figures, and a guard. Prints the one-off import time, cells per
second over the shipped cases, and the harness overhead ratio: one cell through the framework
against the same scenario driven by a minimal hand-written loop, in the same process. The
framework's extra work is the fit measurement (once per case), a snapshot per step, and the two
idle steps it waits before calling a run stuck. ``--max-overhead R`` measures the ratio alone
and exits 1 above it (the suite holds it at :data:`GUARD`)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matrix.case.expansion import Cell, case_files, cells_from_file
from matrix.installed import installed_vllm_version
from matrix.judge.verdict import Verdict, judge_run
from matrix.releases import shipped_variant
from matrix.run.cell import run_cell
from matrix.run.fit import forget_fits
from matrix.run.pools import pool_sizes
from matrix.run.twin import twin_of

BENCH_FILE = "single_group.yaml"
BENCH_CELL = "single_group[k=3]-stock"
REPEATS = 15
# The overhead CI fails above (the fit cached): a guard, not a goal. 1.35x until the runner
# protocol's per-batch checks and the connector's and block pool's watchers (issue 46's decision
# oracles) added about 8%: 1.25x before them, 1.34-1.37x with them on 0.34 (docs/commands.md).
GUARD = 1.40


def import_seconds() -> float:
    """Seconds a fresh process takes to import vLLM's scheduler and select an adapter."""
    code = (
        "import time; t = time.perf_counter(); "
        "from matrix.adapters.selection import select_adapter; select_adapter(); "
        "print(time.perf_counter() - t)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    return float(result.stdout.strip().splitlines()[-1])


def direct_loop(cell: Cell, pools: list[int]) -> list[bool]:
    """The scenario driven the shortest way: real scheduler, async loads completed a step after
    admission, steps until done or idle. No snapshots, no variants, no verdict. Returns, per
    pool, whether every request finished."""
    from vllm.sampling_params import SamplingParams
    from vllm.utils.hashing import sha256
    from vllm.v1.core.kv_cache_utils import get_request_block_hasher, resolve_kv_cache_block_sizes
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.kv_cache_interface import KVCacheConfig
    from vllm.v1.outputs import DraftTokenIds, KVConnectorOutput, ModelRunnerOutput
    from vllm.v1.request import Request, RequestStatus
    from vllm.v1.structured_output import StructuredOutputManager

    from matrix.adapters.config import vllm_config_for
    from matrix.adapters.kv_cache import kv_cache_config_for
    from matrix.adapters.requests import distinct_prompt, remote_prefill

    case = cell.case.definition
    spec_tokens = case.speculative.num_tokens if case.speculative else 0
    finished = []
    # The same configs as the harness, built once as a hand loop would: building them is not
    # what the ratio measures.
    config = vllm_config_for(case, 2)
    groups = kv_cache_config_for(case, 2).kv_cache_groups
    block_size, hash_size = resolve_kv_cache_block_sizes(kv_cache_config_for(case, 2), config)
    hasher = get_request_block_hasher(hash_size, sha256)
    for pool in pools:
        config.cache_config.num_gpu_blocks = pool
        kv = KVCacheConfig(num_blocks=pool, kv_cache_tensors=[], kv_cache_groups=groups)
        scheduler: Any = Scheduler(
            config,
            kv,
            StructuredOutputManager(config),
            block_size=block_size,
            hash_block_size=hash_size,
        )
        for spec in case.requests:
            params = SamplingParams(max_tokens=spec.max_tokens, ignore_eos=True)
            # The harness's request, as a hand loop would write it down.
            params.extra_args = {
                "kv_transfer_params": remote_prefill(spec.id, spec.prompt_tokens())
            }
            scheduler.add_request(
                Request(
                    spec.id,
                    distinct_prompt(spec.id, spec.prompt_tokens()),
                    params,
                    None,
                    block_hasher=hasher,
                )
            )
        # Like the harness: a load admitted in one step is reported finished in the next.
        report: set[str] = set()
        reported: set[str] = set()
        # 0.30-0.33's output indexes its requests; 0.34's scheduler indexes req_ids itself.
        indexed = "req_id_to_index" in ModelRunnerOutput.__dataclass_fields__
        for _ in range(200):
            output = scheduler.schedule()
            ids = list(output.num_scheduled_tokens)
            index = {"req_id_to_index": {r: i for i, r in enumerate(ids)}} if indexed else {}
            scheduler.update_from_output(
                output,
                ModelRunnerOutput(
                    req_ids=ids,
                    **index,
                    sampled_token_ids=[
                        [7] * (1 + len(output.scheduled_spec_decode_tokens.get(r, ()))) for r in ids
                    ],
                    kv_connector_output=KVConnectorOutput(finished_recving=report),
                ),
            )
            just_reported, reported = report, reported | report
            loading = RequestStatus.WAITING_FOR_REMOTE_KVS
            report = {r for r, q in scheduler.requests.items() if q.status == loading} - reported
            if scheduler.running and spec_tokens:
                running = [r.request_id for r in scheduler.running]
                scheduler.update_draft_token_ids(
                    DraftTokenIds(running, [[9] * spec_tokens] * len(running))
                )
            if not scheduler.requests or not (ids or report or just_reported):
                break
        finished.append(not scheduler.requests)
    return finished


def framework_cell(adapter: Any, cell: Cell) -> Verdict:
    """A cell the way the plugin runs it: its runs, then its verdict."""
    return judge_run(run_cell(adapter, cell))


def framework_cells(adapter: Any, cells: tuple[Cell, ...]) -> float:
    """``cells`` one after another as a case runs them, CPU seconds a cell: a stock cell's twin
    runs are its release's variant's own cell's, handed on (run/twin.py), so the pair, not the
    stock cell alone, is what a case's cells cost."""
    return _cpu_seconds(lambda: [framework_cell(adapter, c) for c in cells]) / len(cells)


@dataclass(frozen=True)
class Overhead:
    """One cell through the framework against the hand loop, CPU seconds, the least of
    ``repeats`` of each, interleaved."""

    loop: float  # the minimal hand loop
    fitting: float  # the framework measuring the fit (a case's first cell)
    cached: float  # the framework with the fit cached (the case's other variants)
    repeats: int

    @property
    def ratio(self) -> float:
        """The overhead guarded: the framework with the fit cached (a case's every cell but the
        first) against the hand loop, which measures no fit either; the same run measuring its
        fit also does the fit's own runs, work the loop never does."""
        return self.cached / self.loop

    @property
    def fitting_ratio(self) -> float:
        """The overhead of a case's first cell, which measures the fit."""
        return self.fitting / self.loop

    def with_more(self, other: Overhead) -> Overhead:
        """The least of both measurements, figure by figure: noise only ever adds."""
        return Overhead(
            min(self.loop, other.loop),
            min(self.fitting, other.fitting),
            min(self.cached, other.cached),
            self.repeats + other.repeats,
        )


def bench_cells(case_dir: Path) -> tuple[Cell, ...]:
    """The cell the overhead is measured on (:data:`BENCH_CELL`), and the cell of its case
    its twin's runs are handed to (its release's variant's: run/twin.py)."""
    cells = cells_from_file(case_dir / BENCH_FILE, shipped_variant(installed_vllm_version()))
    cell = next(c for c in cells if c.test_id == BENCH_CELL)
    twin = twin_of(cell)
    return (cell, *(c for c in cells if c.case.case_id == cell.case.case_id and c.variant == twin))


def overhead(adapter: Any, cells: tuple[Cell, ...], repeats: int = REPEATS) -> Overhead:
    """The framework's overhead a cell over the hand loop on the first of ``cells`` (the rest:
    the cell its twin runs are handed to), after one warm-up run."""
    cell = cells[0]
    framework_cells(adapter, cells)  # the config cache and vLLM's lazy imports, warm
    # The pools the framework runs (its sweep reaches down to where a request alone is
    # admitted, measured with the fit), so the loop does the same scheduler runs.
    pools = [outcome.pool for outcome in framework_cell(adapter, cell).outcomes]
    # CPU time, interleaved, the least of many: the machines are shared, and what other
    # processes do only ever adds to a measurement of the same deterministic work.
    cold, warm, direct = [], [], []
    for _ in range(repeats):
        forget_fits()
        cold.append(framework_cells(adapter, cells))  # measures the fit
        # The fit cached, as for a case's other variants.
        warm.append(framework_cells(adapter, cells))
        direct.append(_cpu_seconds(lambda: direct_loop(cell, pools)))
    return Overhead(min(direct), min(cold), min(warm), repeats)


def guarded_overhead(
    adapter: Any, cells: tuple[Cell, ...], limit: float, rounds: int = 5
) -> Overhead:
    """:func:`overhead`, measured again (up to ``rounds`` times in all) while it is above
    ``limit``: a busy machine can inflate one round, a slower harness inflates every one."""
    measured = overhead(adapter, cells)
    for _ in range(rounds - 1):
        if measured.ratio <= limit:
            break
        measured = measured.with_more(overhead(adapter, cells))
    return measured


def guard_line(measured: Overhead, limit: float) -> str:
    """The guard's one line: the ratio, the limit, and whether it holds."""
    verdict = "ok" if measured.ratio <= limit else "above the limit"
    return (
        f"bench: harness overhead {measured.ratio:.2f}x a hand loop with the fit cached "
        f"({measured.fitting_ratio:.2f}x measuring it), CPU time, the least of "
        f"{measured.repeats}; limit {limit:.2f}x: {verdict}"
    )


def main(case_dir: Path, max_overhead: float | None = None) -> int:
    """Prints the figures; 0. With ``max_overhead``, only the overhead ratio, as a guard: 1
    when it is above, 2 for a ratio that is no ratio."""
    from matrix.adapters.selection import select_adapter

    if max_overhead is not None and not max_overhead > 0:
        print(f"matrix bench: --max-overhead {max_overhead}: a ratio above 0 (CI's is {GUARD})")
        return 2
    if max_overhead is not None:
        measured = guarded_overhead(select_adapter(), bench_cells(case_dir), max_overhead)
        print(guard_line(measured, max_overhead))
        return 0 if measured.ratio <= max_overhead else 1
    print(f"one-off import (vLLM scheduler + adapter, fresh process): {import_seconds():.2f} s")
    adapter = select_adapter()
    ships = shipped_variant(installed_vllm_version())
    cells = [c for path in case_files(case_dir) for c in cells_from_file(path, ships)]
    framework_cell(adapter, cells[0])  # warm the config cache and vLLM's lazy imports
    forget_fits()
    started = time.perf_counter()
    runs = 0
    for cell in cells:
        runs += len(framework_cell(adapter, cell).outcomes)  # one per pool size
    elapsed = time.perf_counter() - started
    print(
        f"cells: {len(cells)} ({runs} scheduler runs) in {elapsed:.2f} s = "
        f"{len(cells) / elapsed:.1f} cells/s, {runs / elapsed:.0f} runs/s"
    )
    bench = bench_cells(case_dir)
    cell = bench[0]
    measured = overhead(adapter, bench)
    print(
        f"{BENCH_CELL} over {len(pool_sizes(cell.case.definition))} pool sizes, CPU time, the "
        f"least of {measured.repeats}: minimal loop {measured.loop * 1000:.1f} ms; framework "
        f"{measured.fitting * 1000:.1f} ms measuring the fit (ratio {measured.fitting_ratio:.2f}), "
        f"{measured.cached * 1000:.1f} ms with it cached (ratio {measured.ratio:.2f})"
    )
    return 0


def _cpu_seconds(work: Callable[[], object]) -> float:
    started = time.process_time()
    work()
    return time.process_time() - started
