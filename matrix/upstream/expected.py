"""What vLLM's own tests are expected to do on a lean CPU env, per release, and the comparison
of a run's outcomes with it. Pure: no vLLM, no pytest.

``upstream/vllm-<version>.yaml`` names each tier's test paths (``quick``, then what ``core``
and ``all`` add) and lists every test known not to pass there, with the outcome it has and
why (a GPU, a model config, a package...). A run passes when every test that does not pass
is listed with the outcome it had, and every listed test in the run's files had that outcome:
a listed test that starts passing (or is no longer there) fails the run too, so the list
cannot rot.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError

from matrix.case.loading import LoadedDocument, describe_validation_error
from matrix.case.reading import read_yaml
from matrix.case.shipped import PACKAGE
from matrix.case.strict import Strict

EXPECTED_DIR = PACKAGE.parent / "upstream"
TIERS = ("quick", "core", "all")
Tier = Literal["quick", "core", "all"]
Outcome = Literal["passed", "failed", "error", "skipped", "xfailed", "xpassed"]
# What vLLM itself counts as success: a test it marks xfail may fail or pass.
FINE: frozenset[str] = frozenset({"passed", "xfailed", "xpassed"})
Need = Literal["gpu", "model", "package", "platform", "vendor", "network"]


class Known(Strict):
    """A test (a node id, or a prefix of node ids: a file, a class, a parametrized test) known
    to end with ``outcome`` on the lean CPU env, because it ``needs`` something it lacks."""

    test: str
    outcome: Literal["failed", "error", "skipped"]
    needs: Need
    reason: str

    def matches(self, nodeid: str) -> bool:
        """The node id is this entry's, or one under it (``::`` a test, ``[`` a parameter)."""
        test = self.test
        return nodeid == test or nodeid.startswith((f"{test}::", f"{test}["))


class Tiers(Strict):
    """Test paths (files or folders, relative to the source's root) per tier; each tier runs
    its own and every smaller tier's."""

    quick: list[str]
    core: list[str] = Field(default_factory=list)
    all: list[str] = Field(default_factory=list)

    def paths(self, tier: Tier) -> list[str]:
        """The paths a tier runs, none inside another (pytest would collect it twice)."""
        upto = TIERS[: TIERS.index(tier) + 1]
        paths = [path for name in upto for path in getattr(self, name)]
        return [p for p in dict.fromkeys(paths) if not _in_paths(p, [q for q in paths if q != p])]


class KnownGroup(Strict):
    """Tests (node ids or prefixes, as :class:`Known`'s) that end alike for one reason."""

    outcome: Literal["failed", "error", "skipped"]
    needs: Need
    reason: str
    tests: list[str] = Field(min_length=1)


class Expected(Strict):
    """One release's file: its tiers and its known outcomes."""

    release: str
    tiers: Tiers
    known: list[KnownGroup] = Field(default_factory=list)

    def entries(self) -> list[Known]:
        """Every listed test with its outcome and reason."""
        return [
            Known(test=test, outcome=group.outcome, needs=group.needs, reason=group.reason)
            for group in self.known
            for test in group.tests
        ]


def expected_path(release: str) -> Path:
    """The shipped file of ``release``."""
    return EXPECTED_DIR / f"vllm-{release}.yaml"


def load_expected(path: Path) -> Expected:
    """Reads and checks an expected-outcomes file; raises ``matrix.case.reading.CaseFileError``
    (``file:line: message``)."""
    data, lines = read_yaml(path)
    try:
        return Expected.model_validate(data)
    except ValidationError as error:
        raise describe_validation_error(error, LoadedDocument(path, data, lines), data) from None


@dataclass(frozen=True)
class Result:
    """One test's outcome in a run: the assertion or reason when it did not pass, and how many
    schedulers the run's variant was applied to while it ran."""

    nodeid: str
    outcome: Outcome
    message: str = ""
    schedulers: int = 0


@dataclass(frozen=True)
class Stale:
    """A listed entry whose tests did not end as listed (or were not there at all)."""

    known: Known
    results: tuple[Result, ...]  # the matched tests that did not end as listed; none: not run


@dataclass(frozen=True)
class Comparison:
    """A run against its release's expected outcomes."""

    results: tuple[Result, ...]
    listed: tuple[tuple[Known, tuple[Result, ...]], ...]  # entries whose tests ended as listed
    unexpected: tuple[Result, ...]  # did not pass, and no entry lists it
    stale: tuple[Stale, ...] = field(default=())

    @property
    def ok(self) -> bool:
        """Nothing unexpected, nothing stale."""
        return not self.unexpected and not self.stale

    def counts(self) -> Counter[str]:
        """Tests per outcome."""
        return Counter(result.outcome for result in self.results)

    def by_need(self) -> Counter[tuple[str, str]]:
        """Listed tests that ended as listed, per (need, outcome)."""
        return Counter(
            (known.needs, known.outcome) for known, results in self.listed for _ in results
        )


def _in_paths(test: str, paths: list[str]) -> bool:
    file = test.split("::")[0].split("[")[0]
    return any(file == p or file.startswith(p.rstrip("/") + "/") for p in paths)


def compare(
    results: Mapping[str, Result], known: list[Known], paths: list[str], complete: bool = True
) -> Comparison:
    """``results`` (by node id) against ``known``. ``paths`` are what the run covered: an entry
    within them whose tests were not reported is stale when the run was ``complete`` (no
    selection such as ``-k``)."""
    listed: list[tuple[Known, tuple[Result, ...]]] = []
    stale: list[Stale] = []
    claimed: set[str] = set()
    for entry in known:
        matched = [r for nodeid, r in results.items() if entry.matches(nodeid)]
        claimed.update(r.nodeid for r in matched)
        differing = tuple(r for r in matched if r.outcome != entry.outcome)
        if differing:
            stale.append(Stale(entry, differing))
        elif matched:
            listed.append((entry, tuple(matched)))
        elif complete and _in_paths(entry.test, paths):
            stale.append(Stale(entry, ()))
    unexpected = tuple(
        r for nodeid, r in results.items() if r.outcome not in FINE and nodeid not in claimed
    )
    return Comparison(tuple(results.values()), tuple(listed), unexpected, tuple(stale))


@dataclass(frozen=True)
class Change:
    """A test whose outcome under a variant differs from stock's."""

    nodeid: str
    stock: str  # an outcome, or "absent"
    variant: str
    message: str  # the assertion (or error) of whichever run did not pass


def changes(stock: Mapping[str, Result], variant: Mapping[str, Result]) -> list[Change]:
    """Every test whose outcome differs between the two runs, by node id."""
    found = []
    for nodeid in sorted(set(stock) | set(variant)):
        before, after = stock.get(nodeid), variant.get(nodeid)
        was = before.outcome if before else "absent"
        now = after.outcome if after else "absent"
        if was != now:
            failing = after if after and after.outcome not in FINE else before
            found.append(Change(nodeid, was, now, failing.message if failing else ""))
    return found


def broken(found: list[Change]) -> list[Change]:
    """The changes a variant makes that fail a test stock passes (one it does not run too)."""
    return [c for c in found if c.stock in FINE and c.variant not in FINE]
