"""The registry sweep's committed baselines (``python -m matrix sweep``, docs/sweep.md): per
release, ``matrix/sweep/baselines/vllm-<version>.tsv``, each architecture in scope on a line with
its registry table, the model type its default config was written for, its outcome, and its
layout class (an outcome ``layout``) or the named reason; and the difference between a sweep
and its baseline. Pure: no vLLM (the reports and the cross-release view read them).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal, get_args

from matrix.case.reading import CaseFileError, read_text
from matrix.releases import release_key

# Beside the sweep's code, not in matrix/registry/: the check cache's key digests that folder,
# and recording a baseline must not make the next sweep's answers stale.
BASELINES = Path(__file__).resolve().parent.parent / "sweep" / "baselines"

# An architecture's outcome: a layout, or why none (each reason named, none silent).
Status = Literal["layout", "unmapped", "missing_package", "unmodelled", "refused", "error"]
STATUSES: tuple[Status, ...] = get_args(Status)
STATUS_WORDS: dict[Status, str] = {
    "layout": "a layout",
    "unmapped": "not mapped: no offline config (remote code)",
    "missing_package": "a package the env lacks",
    "unmodelled": "a layer type the matrix does not model",
    "refused": "vLLM (or transformers) refuses the default config",
    "error": "the sweep itself failed (a bug)",
}
HEADER = "# architecture\ttable\tmodel_type\toutcome\tclass or reason\n"


class BaselineError(ValueError):
    """A baseline file that does not read; the message names the file and line."""


@dataclass(frozen=True)
class Row:
    """One architecture's outcome: its layout class (``status`` layout) or the reason."""

    architecture: str
    table: str
    model_type: str  # "-" where unmapped
    status: Status
    detail: str  # the class key, or the reason in one line

    def line(self) -> str:
        """The row as a baseline line."""
        return "\t".join((self.architecture, self.table, self.model_type, self.status, self.detail))

    def judged(self) -> str:
        """What the baseline holds the architecture to: its outcome and class or reason."""
        return f"{self.status}: {self.detail}"


def baseline_path(version: str) -> Path:
    """Where a release's baseline lives."""
    return BASELINES / f"vllm-{version}.tsv"


def parse_rows(text: str, source: Path) -> list[Row]:
    """A baseline's rows; raises :class:`BaselineError` at the first line that does not read."""
    rows: list[Row] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) != 5 or fields[3] not in STATUSES or not all(fields):
            raise BaselineError(
                f"{source}:{number}: not 'architecture, table, model_type, "
                f"outcome ({', '.join(STATUSES)}), class or reason' in tabs"
            )
        rows.append(Row(fields[0], fields[1], fields[2], fields[3], fields[4]))
    return rows


def load_rows(path: Path) -> list[Row]:
    """The rows of the baseline file ``path``, read as every input is (a regular UTF-8 file,
    bounded); :class:`BaselineError`, one line, where it does not read."""
    try:
        text = read_text(path, what="a baseline")
    except CaseFileError as error:
        raise BaselineError(str(error)) from None
    return parse_rows(text, path)


def write_baseline(path: Path, rows: list[Row]) -> None:
    """Writes ``rows`` sorted by architecture."""
    ordered = sorted(rows, key=lambda row: row.architecture)
    path.write_text(HEADER + "".join(row.line() + "\n" for row in ordered), encoding="utf-8")


@cache
def read_baseline(version: str) -> tuple[Row, ...] | None:
    """A release's committed baseline, or None where none is committed."""
    path = baseline_path(version)
    if not path.is_file():
        return None
    return tuple(load_rows(path))


def committed() -> dict[str, tuple[Row, ...]]:
    """Every committed baseline, oldest release first."""
    versions = [p.stem.removeprefix("vllm-") for p in BASELINES.glob("vllm-*.tsv")]
    ordered = sorted(versions, key=lambda v: (release_key(v), v))
    return {v: rows for v in ordered if (rows := read_baseline(v)) is not None}


@dataclass(frozen=True)
class Change:
    """An architecture whose outcome differs from its baseline (or is new, or gone)."""

    architecture: str
    was: str | None  # the baseline's judged outcome; None: new
    now: str | None  # the sweep's; None: gone from the registry

    def line(self) -> str:
        """The change in one line."""
        if self.was is None:
            return f"{self.architecture}: new: {self.now}"
        if self.now is None:
            return f"{self.architecture}: gone (was {self.was})"
        return f"{self.architecture}: was {self.was}; now {self.now}"


def changes(baseline: tuple[Row, ...] | list[Row], swept: list[Row]) -> list[Change]:
    """Every architecture whose outcome and class or reason differ, new ones and gone ones
    included, by name."""
    was = {row.architecture: row.judged() for row in baseline}
    now = {row.architecture: row.judged() for row in swept}
    return [
        Change(name, was.get(name), now.get(name))
        for name in sorted(was.keys() | now.keys())
        if was.get(name) != now.get(name)
    ]
