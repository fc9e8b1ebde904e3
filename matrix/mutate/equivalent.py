"""The reviewed equivalence file of a release (``matrix/mutate/equivalent/vllm-<version>.yaml``):
mutants that no test can kill because they behave as the original under every configuration
vLLM accepts, each with the reason, argued from vLLM's code. They count apart from the score.

A mutant that differs only under some configuration (a watermark, lookahead tokens) is not
equivalent: it needs a case with that configuration. Each entry names the mutant's id and its
one-line diff, so an entry that no longer matches its release's code is an error, not a
silent claim.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, ValidationError

from matrix.case.loading import LoadedDocument, describe_validation_error
from matrix.case.reading import CaseFileError, read_yaml
from matrix.case.strict import Strict
from matrix.mutate.generate import Mutant

FOLDER = Path(__file__).resolve().parent / "equivalent"


class Claim(Strict):
    """One mutant claimed equivalent: its id, its diff (as the mutants list shows it) and why."""

    mutant: str
    diff: str
    reason: str = Field(min_length=20)


class EquivalenceFile(Strict):
    """A release's claims."""

    release: str
    equivalent: list[Claim] = Field(default_factory=list)


def equivalence_path(version: str) -> Path:
    """The shipped file of ``version``."""
    return FOLDER / f"vllm-{version}.yaml"


def load_claims(path: Path, mutants: list[Mutant]) -> dict[str, str]:
    """Mutant id -> reason; an absent file claims nothing. Raises ``CaseFileError`` (one line,
    ``file:line: message``) for a bad file, or a claim whose mutant or diff is not this
    release's."""
    if not path.is_file():
        return {}
    data, lines = read_yaml(path)
    document = LoadedDocument(path, data, lines)
    try:
        parsed = EquivalenceFile.model_validate(data)
    except ValidationError as error:
        raise describe_validation_error(error, document, data) from None
    by_id = {m.id: m for m in mutants}
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


__all__ = ["CaseFileError", "equivalence_path", "load_claims"]
