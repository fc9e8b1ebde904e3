"""The engine's side of a case: its settings (``engine:``), how many drafts the simulated model
accepts (``speculative.accept``), the events an engine or a worker causes (``abort:``,
``fail_load:``) and shared prompt prefixes (``prefix:``).

Pydantic models only, imported by :mod:`matrix.schema`. The values of ``engine:`` are checked
here for type only: vLLM's own config classes judge them when a scheduler is built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import BaseModel, Field

from matrix.strict import STRICT, PlacedError

if TYPE_CHECKING:
    from matrix.schema import CaseFile


class Strict(BaseModel):  # ruff knows a pydantic model by a base defined here
    model_config = STRICT


# Every case model's: YAML already gives typed values, so "16" or true where a number belongs
# is a mistake, not something to coerce.


class Engine(Strict):
    """vLLM settings the scheduler sees; unset keys keep the harness defaults (16 sequences,
    chunked prefill on, prefix caching on unless a Mamba group runs in mode none, the
    synchronous scheduler, NIXL as a consumer, vLLM's default load-failure policy)."""

    max_num_seqs: Annotated[int, Field(ge=1, le=1024)] | None = None
    max_num_batched_tokens: Annotated[int, Field(ge=1)] | None = None
    enable_chunked_prefill: bool | None = None
    enable_prefix_caching: bool | None = None
    kv_role: str | None = None
    # True: AsyncScheduler driven as EngineCore.step_with_batch_queue drives it.
    async_scheduling: bool | None = None
    kv_load_failure_policy: str | None = None


# Accepted drafts per decode step of each request, the last value repeating; "all" and "none"
# are the two extremes.
Accept = Literal["all", "none"] | Annotated[list[Annotated[int, Field(ge=0)]], Field(min_length=1)]


def accepted_drafts(accept: Accept, decode_step: int, drafts: int) -> int:
    """How many of ``drafts`` the simulated model accepts at a request's ``decode_step``
    (0-based)."""
    if accept == "all":
        return drafts
    if accept == "none":
        return 0
    return min(drafts, accept[min(decode_step, len(accept) - 1)])


class Prefix(Strict):
    """The request starts with the first ``tokens`` tokens of request ``of``'s prompt."""

    of: Annotated[str, Field(min_length=1)]
    tokens: Annotated[int, Field(ge=1)]


def check_engine_rules(case: CaseFile) -> None:
    """The rules of this module's keys that span the case; raises :class:`PlacedError`."""
    # A prompt given in blocks has its length once the layout is derived: not checked here.
    prompts: dict[str, int | None] = {}
    for index, request in enumerate(case.requests):
        if request.prefix is not None:
            where = ("requests", index, "prefix")
            if request.prefix.of not in prompts:
                raise PlacedError(
                    (*where, "of"), f"prefix of '{request.prefix.of}': not an earlier request"
                )
            lengths = (request.prompt, prompts[request.prefix.of])
            known = [n for n in lengths if isinstance(n, int)]
            longest = min(known) if len(known) == len(lengths) else request.prefix.tokens
            if request.prefix.tokens > longest:
                raise PlacedError(
                    (*where, "tokens"),
                    f"a prefix of {request.prefix.tokens} tokens is longer than the prompt "
                    f"({longest} tokens)",
                )
        prompts[request.id] = request.prompt if isinstance(request.prompt, int) else None
    speculative = case.speculative
    if speculative is not None and isinstance(speculative.accept, list):
        longest_run = max(r.max_tokens for r in case.requests)
        if len(speculative.accept) > longest_run:
            raise PlacedError(
                ("speculative", "accept"),
                f"accept lists {len(speculative.accept)} steps, but no request decodes more "
                f"than {longest_run} (its max_tokens)",
            )
        for index, accepted in enumerate(speculative.accept):
            if accepted > speculative.num_tokens:
                raise PlacedError(
                    ("speculative", "accept", index),
                    f"{accepted} accepted drafts, but only {speculative.num_tokens} are proposed",
                )
