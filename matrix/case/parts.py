"""The parts a case is made of: its KV cache groups, speculative decoding, pool sweep, requests
and matrix axes, and the rules spanning its requests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from matrix.case.connector import Stored
from matrix.case.engine import Accept, Prefix
from matrix.case.model import PromptInBlocks
from matrix.case.strict import PlacedError, Strict
from matrix.case.when import label_of

GroupKind = Literal["full", "sliding_window", "chunked_local", "mla", "mamba"]
MambaMode = Literal["none", "align", "all"]


class Group(Strict):
    """One KV cache group: the layers that share a block table."""

    kind: GroupKind
    block_size: Annotated[int, Field(gt=0)] | Literal["max_model_len"]
    window: Annotated[int, Field(gt=0)] | None = None  # a sliding window or an attention chunk
    # "all" (cache every block's state) exists in 0.30 and 0.31 only; later releases skip it.
    mamba_mode: MambaMode | None = None
    # DeepSeek-V4.1's sliding window (vLLM's SlidingWindowMLASpec with bounded_replay): never
    # prefix-cached; after a hit the scheduler recomputes the hit's last window to rebuild it.
    bounded_replay: bool = False
    # A Mamba layer that exports a state from inside a prefill chunk (vLLM 0.32+: MambaMixer2's
    # spec, one prefill checkpoint block on a 1-token grid; read in align mode).
    prefill_checkpoint: bool = False

    @model_validator(mode="after")
    def _kind_fields(self) -> Group:
        windowed = self.kind in ("sliding_window", "chunked_local")
        if windowed and self.window is None:
            raise ValueError(f"a {self.kind} group needs 'window'")
        if not windowed and self.window is not None:
            raise ValueError("'window' is only for sliding_window and chunked_local groups")
        if self.kind == "mamba" and self.mamba_mode is None:
            raise ValueError("a mamba group needs 'mamba_mode' (none, align or all)")
        if self.kind != "mamba" and self.mamba_mode is not None:
            raise ValueError(f"'mamba_mode' is only for mamba groups, not {self.kind}")
        if self.bounded_replay and self.kind != "sliding_window":
            raise ValueError(f"'bounded_replay' is only for sliding_window groups, not {self.kind}")
        if self.kind != "mamba" and self.prefill_checkpoint:
            raise ValueError(f"'prefill_checkpoint' is only for mamba groups, not {self.kind}")
        if self.block_size == "max_model_len" and self.kind != "mamba":
            raise ValueError("block_size 'max_model_len' is only for mamba groups")
        return self

    def tokens_per_block(self, max_model_len: int) -> int:
        """The block size in tokens (``max_model_len`` is a Mamba group's one-block size)."""
        return max_model_len if self.block_size == "max_model_len" else self.block_size


def cache_block_size(groups: Sequence[Group], max_model_len: int) -> int:
    """The engine's cache block size: the smallest attention group's block; without attention
    (a pure Mamba model), its Mamba block (in mode ``align`` vLLM aligns the Mamba block to the
    cache block: they are one). What a prompt given in blocks counts."""
    sizes = [g.block_size for g in groups if g.kind != "mamba" and isinstance(g.block_size, int)]
    if not sizes:
        sizes = [g.block_size for g in groups if isinstance(g.block_size, int)]
    return min(sizes) if sizes else max_model_len


class Speculative(Strict):
    """Speculative decoding as the engine would configure it.

    vLLM derives the lookahead from the method (0 for ngram, ``num_tokens`` for eagle and
    draft models); writing ``lookahead`` states that expectation and is checked.
    """

    method: Literal["ngram", "eagle", "draft_model"]
    num_tokens: Annotated[int, Field(ge=1, le=16)]
    lookahead: Annotated[int, Field(ge=0)] | None = None
    accept: Accept = "all"  # accepted drafts per decode step (see engine_schema.Accept)


class PoolSweep(Strict):
    """Every KV pool size from ``start`` to ``stop`` inclusive, in blocks."""

    start: Annotated[int, Field(ge=2)]
    stop: Annotated[int, Field(ge=2)]

    @model_validator(mode="after")
    def _ordered(self) -> PoolSweep:
        if self.stop < self.start:
            raise ValueError(f"stop ({self.stop}) is below start ({self.start})")
        return self


class RequestSpec(Strict):
    """One request of a case: its prompt, whether its KV loads asynchronously, its new tokens."""

    id: Annotated[str, Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")]
    prompt: Annotated[int, Field(gt=0)] | PromptInBlocks
    async_load: bool = True
    max_tokens: Annotated[int, Field(gt=0)] = 4
    prefix: Prefix | None = None
    # During ``run``, the remote side completes this request's load so many steps after
    # its admission.
    complete_load_after: Annotated[int, Field(ge=1, le=1000)] = 1
    # The engine steps that pass before this request reaches the scheduler (0: before the
    # first), as a stream of requests arrives.
    arrive_after: Annotated[int, Field(ge=0, le=1000)] = 0
    # What the connector's tier holds of the prompt (store and offload connectors), and how
    # many steps after the scheduler issues a store of this request the worker reports it.
    stored: Stored | None = None
    complete_store_after: Annotated[int, Field(ge=1, le=1000)] = 1
    # The request's priority (lower first), which orders the queues under engine.policy
    # "priority"; vLLM takes it under either policy.
    priority: Annotated[int, Field(ge=-1000, le=1000)] = 0
    # vLLM's SamplingParams.skip_reading_prefix_cache (what prompt logprobs turn on): the
    # request reads no prefix cache, local or the connector's.
    skip_reading_prefix_cache: bool = False

    def prompt_tokens(self) -> int:
        """The prompt's length (one given in blocks is counted out by the adapters first)."""
        if not isinstance(self.prompt, int):
            raise ValueError(f"request {self.id}: its prompt in blocks was never counted out")
        return self.prompt


class Axis(Strict):
    """One matrix axis and the values it takes.

    With ``path`` (a dotted path into this case), ``values`` is a list (labels are the values
    themselves) or a mapping label -> value. Without ``path``, ``values`` maps each label to
    an overlay ``{dotted.path: value, ...}``, for axes that change several places at once
    (for example a layout and the expectations that follow from it); ``null`` or ``{}``: the
    case as written (a baseline point, with no dummy setting to invent).
    """

    path: Annotated[str, Field(min_length=1)] | None = None
    values: list[Any] | dict[str, Any]

    @model_validator(mode="after")
    def _shape(self) -> Axis:
        if not self.values:
            raise ValueError("an axis needs at least one value")
        if self.path is None:
            if not isinstance(self.values, dict):
                raise ValueError("an axis without 'path' maps labels to overlays")
            for label, overlay in self.values.items():
                if overlay is not None and not isinstance(overlay, dict):
                    raise ValueError(
                        f"value '{label}': an overlay is a mapping {{dotted.path: value, ...}}, "
                        "or null for the case as written"
                    )
        return self

    def labels(self) -> list[str]:
        """The labels of this axis's values, as case ids write them."""
        if isinstance(self.values, dict):
            return [str(label) for label in self.values]
        return [label_of(value) for value in self.values]

    def overlays(self, value: Any) -> dict[str, Any]:
        """The places this axis sets for one of its values."""
        if self.path is None:
            return {str(path): item for path, item in (value or {}).items()}
        return {self.path: value}


def check_prefixes_and_accept(
    requests: Sequence[RequestSpec], speculative: Speculative | None
) -> None:
    """Prefixes name earlier requests and fit both prompts; ``accept`` fits the drafts and the
    requests' decode steps. Raises :class:`PlacedError` at the offending place."""
    # A prompt given in blocks has its length once the layout is derived: not checked here.
    prompts: dict[str, int | None] = {}
    for index, request in enumerate(requests):
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
    if speculative is not None and isinstance(speculative.accept, list):
        longest_run = max(r.max_tokens for r in requests)
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
