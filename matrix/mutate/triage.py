"""The reviewed triage of a release's survivors (``matrix/mutate/triage/vllm-<version>.yaml``):

- ``equivalent``: mutants no test can kill, because they behave as the original under every
  configuration vLLM accepts, each with the reason, argued from vLLM's code. They count apart
  from the score. A mutant that differs only under some configuration (a watermark, lookahead
  tokens) is not equivalent: it needs a case with that configuration.
- ``gaps``: survivors grouped by the behaviour no case checks yet, with what would check it
  (a case with a watermark, an oracle on a request's state at a step): the work list.

Each equivalence names the mutant's id and its one-line diff, so a claim that no longer matches
its release's code is an error, not a silent claim; a gap naming a mutant the release lacks is
an error too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pydantic import Field, ValidationError

from matrix.case.loading import LoadedDocument, describe_validation_error
from matrix.case.reading import CaseFileError, read_yaml
from matrix.case.strict import Strict
from matrix.mutate.generate import Mutant

FOLDER = Path(__file__).resolve().parent / "triage"


class Claim(Strict):
    """One mutant claimed equivalent: its id, its diff (as the mutants list shows it) and why."""

    mutant: str
    diff: str
    reason: str = Field(min_length=20)


class Gap(Strict):
    """Survivors of one behaviour no case checks, and what would check it."""

    behaviour: str = Field(min_length=10)
    needs: str = Field(min_length=10)
    mutants: list[str] = Field(min_length=1)


class TriageFile(Strict):
    """A release's claims and gaps."""

    release: str
    equivalent: list[Claim] = Field(default_factory=list)
    gaps: list[Gap] = Field(default_factory=list)


@dataclass(frozen=True)
class Triage:
    """Mutant id -> its equivalence reason; mutant id -> the gap it is in ("behaviour: needs")."""

    equivalent: dict[str, str] = field(default_factory=dict)
    gaps: dict[str, str] = field(default_factory=dict)


def triage_path(version: str) -> Path:
    """The shipped file of ``version``."""
    return FOLDER / f"vllm-{version}.yaml"


def load_triage(path: Path, mutants: list[Mutant]) -> Triage:
    """The file's claims and gaps; an absent file claims nothing. Raises ``CaseFileError`` (one
    line, ``file:line: message``) for a bad file, a claim whose mutant or diff is not this
    release's, or a gap naming a mutant the release lacks."""
    if not path.is_file():
        return Triage()
    data, lines = read_yaml(path)
    document = LoadedDocument(path, data, lines)
    try:
        parsed = TriageFile.model_validate(data)
    except ValidationError as error:
        raise describe_validation_error(error, document, data) from None
    by_id = {m.id: m for m in mutants}
    claims = _claims(parsed, by_id, document)
    gaps: dict[str, str] = {}
    for index, gap in enumerate(parsed.gaps):
        for place, mutant in enumerate(gap.mutants):
            if mutant not in by_id:
                raise document.error(("gaps", index, "mutants", place), "no such mutant here")
            if mutant in claims or mutant in gaps:
                raise document.error(("gaps", index, "mutants", place), "triaged twice")
            gaps[mutant] = f"{gap.behaviour}: {gap.needs}"
    return Triage(claims, gaps)


def _claims(
    parsed: TriageFile, by_id: dict[str, Mutant], document: LoadedDocument
) -> dict[str, str]:
    claims: dict[str, str] = {}
    for index, claim in enumerate(parsed.equivalent):
        mutant = by_id.get(claim.mutant)
        if mutant is None:
            raise document.error(("equivalent", index, "mutant"), "no such mutant here")
        if " ".join(claim.diff.split()) != " ".join(mutant.diff.split()):
            raise document.error(
                ("equivalent", index, "diff"), f"the mutant's diff is now {mutant.diff!r}"
            )
        if claim.mutant in claims:
            raise document.error(("equivalent", index, "mutant"), "claimed twice")
        claims[claim.mutant] = claim.reason
    return claims


__all__ = ["CaseFileError", "Triage", "load_triage", "triage_path"]
