"""What the store and offload connectors share: a request loads what the connector's tier
holds of its prompt (``stored``, else its whole prompt when ``async_load``), put there by an
earlier request of those tokens that ran on the same engine (``Handle`` runs it before the
case starts), and none of them fails a load."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vllm.sampling_params import SamplingParams

from matrix.adapters.protocol import ample_pool
from matrix.case.connector import PREFILL_CONNECTORS
from matrix.case.events import FailLoadEvent
from matrix.case.format import CaseFile
from matrix.case.parts import RequestSpec


class TierSide:
    """The part of a store or offload connector's side that is the same for all of them."""

    def __init__(self, case: CaseFile) -> None:
        self.case = case
        self.counter: Any = None  # a PinCounter, where the connector pins blocks

    def transfer_params(self, spec: RequestSpec) -> dict[str, Any] | None:
        """None: the connector finds a request's prefix by its block hashes."""
        return None

    def tier_tokens(self, spec: RequestSpec) -> int:
        """What the tier holds of the prompt: ``stored``, or the whole prompt of a request
        that loads (``async_load``), as if an earlier request of the same prompt stored it."""
        if spec.stored is not None:
            return spec.stored.tokens
        return spec.prompt_tokens() if spec.async_load else 0

    def write_tier(self, block_hashes: list[Any], tokens: int) -> bool:
        """False: this tier is filled by running a request."""
        return False

    def pinned(self) -> frozenset[int]:
        """The GPU blocks the connector references through the block pool."""
        return self.counter.pinned() if self.counter is not None else frozenset()


def tier_unsupported(case: CaseFile, vllm_name: str, why: str) -> str | None:
    """A failed load is not something this connector reports: a case that fails loads, or
    sets a failure policy, tests nothing of it."""
    if any(isinstance(event, FailLoadEvent) for event in case.events):
        return f"{vllm_name} has no load-failure path ({why}): fail_load does not apply"
    if case.engine.kv_load_failure_policy is not None:
        return (
            f"{vllm_name} has no load-failure path ({why}): kv_load_failure_policy does not apply"
        )
    return None


# One request's lookup: the tokens found (None: the connector answers later) and whether they
# load asynchronously; a request a prefill instance computed loads its prompt asynchronously.
Answer = tuple[int | None, bool]
PREFILL_ANSWER: Answer = (None, True)


def lookups(handle: Any, case: CaseFile) -> dict[str, Answer]:
    """How the connector of ``handle`` (built for ``case``, its tier warmed) answers for what
    its tier holds when the case starts: vLLM's own lookup, asked as the scheduler asks it (the
    request added, after its local hit), for every request whose stores are complete; a
    request that loads from a prefill instance is not asked. The handle is spent."""
    scheduler = handle.scheduler
    answers: dict[str, Answer] = {}
    for spec in case.requests:
        if handle.side.transfer_params(spec) is not None:
            answers[spec.id] = PREFILL_ANSWER
            continue
        if handle.side.tier_tokens(spec) <= 0 or (
            spec.stored is not None and spec.stored.in_flight
        ):
            continue
        params = SamplingParams(max_tokens=1, ignore_eos=True)
        request = handle.request_of(f"{spec.id}~probe", handle.prompt_of(spec), params)
        scheduler.add_request(request)  # a connector may track a request from its arrival
        local = scheduler.kv_cache_manager.get_computed_blocks(request)[1]
        matched, load_async = scheduler.connector.get_num_new_matched_tokens(request, local)
        answers[spec.id] = (matched, bool(load_async))
    return answers


def _full(build: Callable[[CaseFile, int], Any], case: CaseFile) -> dict[str, Answer] | None:
    """The case's lookups with its tier warmed in an ample pool, once per case (its JSON):
    every cell asks, and each answer builds a scheduler and warms its tier. None: the build
    raised (the cell's own run reports what)."""
    key = case.model_dump_json()
    if key not in _full_lookups:
        try:
            _full_lookups[key] = lookups(build(case, ample_pool(case)), case)
        except Exception:
            _full_lookups[key] = None
    return _full_lookups[key]


_full_lookups: dict[str, dict[str, Answer] | None] = {}
_shortfalls: dict[tuple[str, int], str] = {}


def never_loads(build: Callable[[CaseFile, int], Any], case: CaseFile) -> str | None:
    """Why no request of ``case`` would load asynchronously (on this release), or None:
    no request a prefill instance computed, a tier connector's lookup finds none of what the
    tier holds, or loads all it finds within the step. ``build`` makes a warmed scheduler of
    the case. A cell there would pass without testing an asynchronous load's reservation."""
    if case.connector in PREFILL_CONNECTORS:
        if any(spec.async_load for spec in case.requests):
            return None
        return (
            f"no request of this case loads through the {case.connector} connector "
            "(async_load: false for every one): no asynchronous load to reserve for"
        )
    answers = _full(build, case)
    if not answers or any(n is None or (n > 0 and later) for n, later in answers.values()):
        return None
    if any(n for n, _ in answers.values()):
        return (
            f"the {case.connector} connector loads what its tier holds within the step in "
            "this case (vLLM's lookup answers load_async false for every hit): no request's "
            "load is asynchronous, so no reservation for one is tested"
        )
    return (
        f"the {case.connector} connector's lookup finds none of what its tier holds "
        "in this case (0 tokens for every stored request): it would never load"
    )


def tier_shortfall(
    build: Callable[[CaseFile, int], Any], case: CaseFile, pool: int, cut: str
) -> str:
    """Why the tier holds less of what ``case`` says in ``pool`` than in an ample pool, where
    a request that warms it could not run to its end there (``cut``): its lookups find fewer
    tokens for some request; "" when they find as many (it stored all that is looked up).
    Once per case and pool: every variant's run there warms the same tier."""
    key = (case.model_dump_json(), pool)
    if key not in _shortfalls:
        full = _full(build, case) or {}
        try:
            here = lookups(build(case, pool), case)
        except Exception:  # the run's own build reports what raised
            here = full
        short = [
            f"{name}'s lookup finds {here.get(name, (0, False))[0] or 0} of its {found} tokens"
            for name, (found, _) in full.items()
            if found and (here.get(name, (0, False))[0] or 0) < found
        ]
        _shortfalls[key] = f"{cut}: {', '.join(short)}" if short else ""
    return _shortfalls[key]
