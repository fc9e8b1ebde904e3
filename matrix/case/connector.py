"""The connector a case's loads go through (``connector:``), its own settings
(``connector_options:``) and what a request finds in the connector's tier (``stored:``).

Pure: names and shapes only. Which vLLM class each name is, what it needs and what it cannot
do are the adapters' (``matrix/adapters/connectors/``); docs/connectors.md says both.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal, get_args

from pydantic import Field, model_validator

from matrix.case.strict import PlacedError, Strict

# The connectors a case may name; ``nixl`` (NIXL's pull side, the P/D decode instance) is
# every case's unless it says otherwise.
ConnectorName = Literal[
    "nixl",
    "nixl_push",
    "offloading",
    "simple_cpu_offload",
    "mooncake_store",
    "multi",
    "mooncake",
    "moriio",
]
CONNECTOR_NAMES: tuple[str, ...] = get_args(ConnectorName)
DEFAULT_CONNECTOR: ConnectorName = "nixl"
# The connectors that load what a prefill instance computed (the request's whole prompt);
# the others load what their tier holds (``stored``).
PREFILL_CONNECTORS = frozenset({"nixl", "nixl_push", "mooncake", "moriio"})


class ConnectorOptions(Strict):
    """The connector's own settings, each for the connectors named beside it (any other is
    an error at its line): how a tier cuts what it stores, and how it loads."""

    # offloading: the offload chunk, in tokens (a multiple of every group's block size, all
    # groups alike) or in blocks; at most one of the two.
    block_size: Annotated[int, Field(gt=0, le=1_048_576)] | None = None
    blocks_per_chunk: Annotated[int, Field(gt=0, le=64)] | None = None
    # offloading: bytes a step may load synchronously (a hit within it is no async load).
    sync_load_budget_bytes: Annotated[int, Field(ge=0, le=1 << 40)] | None = None
    # simple_cpu_offload: store only what the GPU pool is about to evict.
    lazy_offload: bool | None = None
    # mooncake_store: load asynchronously (vLLM's default) or within the step.
    load_async: bool | None = None
    # multi: MultiConnector's children, in order (the first with a hit loads).
    children: Annotated[list[ConnectorName], Field(min_length=2, max_length=4)] | None = None

    @model_validator(mode="after")
    def _one_chunk_size(self) -> ConnectorOptions:
        if self.block_size is not None and self.blocks_per_chunk is not None:
            raise ValueError("give 'block_size' or 'blocks_per_chunk', not both")
        if self.children is not None and "multi" in self.children:
            raise ValueError("a MultiConnector's children are not MultiConnectors")
        return self


# Which option each connector reads; ``multi`` also reads its children's.
OPTIONS_OF: dict[str, frozenset[str]] = {
    "offloading": frozenset({"block_size", "blocks_per_chunk", "sync_load_budget_bytes"}),
    "simple_cpu_offload": frozenset({"lazy_offload"}),
    "mooncake_store": frozenset({"load_async"}),
    "multi": frozenset({"children"}),
}
DEFAULT_CHILDREN: tuple[ConnectorName, ...] = ("nixl", "offloading")


def children_of(connector: str, options: ConnectorOptions) -> tuple[str, ...]:
    """The connectors a case's loads go through: itself, or a MultiConnector's children."""
    if connector != "multi":
        return (connector,)
    return tuple(options.children or DEFAULT_CHILDREN)


class Stored(Strict):
    """What the connector's tier holds of this request's prompt when the case starts: its
    first ``tokens`` tokens, stored by an earlier request of those tokens that ran on this
    engine (its stores reported done, unless ``in_flight``: then they are reported
    ``complete_store_after`` steps into the case), its GPU copy since dropped."""

    tokens: Annotated[int, Field(ge=1)]
    in_flight: bool = False


def check_connector_case(
    connector: str,
    options: ConnectorOptions,
    requests: list[Any],
    set_options: set[str],
    group_blocks: Sequence[int] = (),
    cache_block: int | None = None,
) -> None:
    """Options only for the connectors that read them, Offloading's chunk a multiple of the
    groups' one block size, and ``stored`` within its prompt (one given in blocks counts
    ``cache_block``); ``group_blocks``: the written groups' block sizes (none for a described
    model's, derived by vLLM). Raises :class:`PlacedError` at the offending place."""
    readers = (*children_of(connector, options), connector)
    allowed = frozenset().union(*(OPTIONS_OF.get(name, frozenset()) for name in readers))
    for name in sorted(set_options - allowed):
        users = sorted(c for c, keys in OPTIONS_OF.items() if name in keys)
        raise PlacedError(
            ("connector_options", name),
            f"'{name}' is a setting of {', '.join(users)}, not of {connector}",
        )
    chunk = options.block_size
    if chunk is not None and group_blocks:
        problem = _chunk_problem(chunk, sorted(set(group_blocks)))
        if problem:
            raise PlacedError(("connector_options", "block_size"), problem)
    for index, request in enumerate(requests):
        stored, prompt = request.stored, request.prompt
        if stored is None:
            continue
        if not isinstance(prompt, int) and cache_block is not None:
            prompt = prompt.blocks * cache_block + prompt.offset
        if isinstance(prompt, int) and stored.tokens > prompt:
            raise PlacedError(
                ("requests", index, "stored", "tokens"),
                f"the tier holds {stored.tokens} tokens of a {prompt}-token prompt",
            )


def _chunk_problem(chunk: int, sizes: list[int]) -> str | None:
    """Why vLLM's OffloadingConnector refuses a chunk of ``chunk`` tokens over groups of these
    block sizes (its config: every group alike, the chunk a whole number of blocks)."""
    if len(sizes) > 1:
        return (
            f"block_size {chunk} needs every group to have one block size (here "
            f"{', '.join(map(str, sizes))}): give blocks_per_chunk instead"
        )
    if chunk % sizes[0]:
        whole = -(-chunk // sizes[0]) * sizes[0]
        return (
            f"block_size {chunk} is not a whole number of the groups' {sizes[0]}-token "
            f"blocks: use {whole}, or blocks_per_chunk"
        )
    return None


def stored_unread(cases: Sequence[Any]) -> PlacedError | None:
    """A request's ``stored`` that no point of a case file reads: every connector it names
    loads what a prefill instance computed (NIXL and its kin have no tier), so the tier it
    describes is ignored. A file whose connector axis has a tier connector is fine: its NIXL
    points ignore ``stored`` by design (``cases``: each point's ``CaseFile``)."""
    if any(
        child not in PREFILL_CONNECTORS
        for case in cases
        for child in children_of(case.connector, case.connector_options)
    ):
        return None
    for case in cases:
        for index, request in enumerate(case.requests):
            if request.stored is not None:
                names = ", ".join(sorted({case.connector for case in cases}))
                tiers = [c for c in CONNECTOR_NAMES if c not in PREFILL_CONNECTORS | {"multi"}]
                return PlacedError(
                    ("requests", index, "stored"),
                    f"{names} loads what a prefill instance computed, from no tier: stored is "
                    f"for {', '.join(tiers)} (or multi over one of them)",
                )
    return None


def digest_exclusions(case: Any) -> dict[str, Any]:
    """What is left out of what identifies a case: its expectations, and the fields added since
    the first cases (the connector's, a request's arrival and priority, the queue, retention
    and scheduled-token settings, a group's bounded replay and prefill checkpoint) that a case
    holds at their defaults, so a case that says nothing of them keeps the digest it had before
    they existed."""
    # What a case expects is not what it runs: a release's own expectations (when: {release:
    # ...}) must not keep its cells from being compared with another release's.
    excluded: dict[str, Any] = {"expect": True, "when": True}
    if case.connector == DEFAULT_CONNECTOR:
        excluded["connector"] = True
    if case.connector_options == ConnectorOptions():
        excluded["connector_options"] = True
    if case.workload is None:
        excluded["workload"] = True
    unset = {
        name
        for name in (
            "policy",
            "prefill_schedule_interval",
            "prefix_cache_retention_interval",
            "max_num_scheduled_tokens",
        )
        if getattr(case.engine, name) is None
    }
    if unset:
        excluded["engine"] = unset
    defaults = {
        index: {
            name
            for name, default in (
                ("stored", None),
                ("complete_store_after", 1),
                ("arrive_after", 0),
                ("priority", 0),
                ("skip_reading_prefix_cache", False),
            )
            if getattr(request, name) == default
        }
        for index, request in enumerate(case.requests)
    }
    if any(defaults.values()):
        excluded["requests"] = {i: fields for i, fields in defaults.items() if fields}
    plain_groups = {
        index: {name for name in ("bounded_replay", "prefill_checkpoint") if not getattr(g, name)}
        for index, g in enumerate(case.groups)
    }
    if any(plain_groups.values()):
        excluded["groups"] = {i: fields for i, fields in plain_groups.items() if fields}
    return excluded
