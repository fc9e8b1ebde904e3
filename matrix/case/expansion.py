"""Turns a case file into concrete cells: matrix axes x variants, with stable readable ids.

Pure: no vLLM, no pytest. ``single_group.yaml`` with an axis ``k`` over ``[1, 3]`` gives the
cases ``single_group[k=1]`` and ``single_group[k=3]``, and each of those one cell per variant,
``single_group[k=1]-original`` and so on. Ids depend only on the file's text.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matrix.case.connector import DEFAULT_CONNECTOR, stored_unread
from matrix.case.format import CASE_NAME, CaseFile, Expectation
from matrix.case.loading import CaseFileError, LoadedDocument, Location, read_document, validate
from matrix.case.model_paths import MODELS_FOLDER, is_model_file
from matrix.case.parts import Axis
from matrix.case.shipped import shipped_cases as shipped_cases
from matrix.case.when import RELEASE_AXIS, When, label_of
from matrix.installed import installed_release
from matrix.releases import NEWEST_SHIPPED, RELEASES
from matrix.variant_names import VARIANT_ID, VARIANT_NAMES, BuiltInVariant

# The ids expansion gives: a case's, its name and, with axes, ``[axis=label,...]`` (labels are
# a file's values, so any printable text); a cell's, the case's and its variant's name.
CASE_ID = re.compile(rf"{CASE_NAME}(\[[^\x00-\x1f\x7f]+\])?")
TEST_ID = re.compile(rf"(?P<case>{CASE_ID.pattern})-(?P<variant>{VARIANT_ID.strip('^$')})")


@dataclass(frozen=True)
class Case:
    """One point of a case file's matrix, validated."""

    case_id: str
    source: Path
    line: int  # of the case's name
    definition: CaseFile  # the case file at this point of its matrix
    # Where each variant's expectation is written (the expect: entry, an axis overlay that sets
    # it, or expect.default); a failing cell is reported there.
    expectation_lines: tuple[tuple[str, int], ...] = ()
    expect_line: int | None = None  # the case's own `expect:`, where an entry would be added

    def expectation_line(self, variant: str) -> int:
        """The line where ``variant``'s expectation is written; for one that is the default
        (pass, written nowhere), the case's ``expect:``, where its entry would go, else the
        line of the case's name."""
        return dict(self.expectation_lines).get(variant, self.expect_line or self.line)

    def states_expectation(self, variant: str) -> bool:
        """Whether the case writes ``variant``'s expectation (else it is pass by default)."""
        return variant in dict(self.expectation_lines)

    def redundant_stock(self) -> str | None:
        """Why this case's ``expect.stock`` should go, when it repeats what a release ships:
        stock is held to its release's shipped variant's expectation unless ``expect.stock``
        says otherwise, which then holds on every release alike."""
        stated = self.definition.expect.get("stock")
        if stated is None:
            return None
        shipped = {release: info.ships for release, info in RELEASES.items()}
        expected = self.definition.expectation_for
        same = [r for r, ships in shipped.items() if expected(ships) == stated]
        if not same:
            return None
        other = {r: f"{ships} ({expected(ships)})" for r, ships in shipped.items() if r not in same}
        if not other:
            return f"expect.stock: {stated} repeats what every release ships: drop it"
        elsewhere = ", ".join(f"{r} ships {what}" for r, what in other.items())
        return (
            f"expect.stock: {stated} repeats what {', '.join(same)} ship, and holds stock to it "
            f"where {elsewhere} too: drop it, so stock follows its release"
        )

    @property
    def column(self) -> str | None:
        """The upstream table's column this case counts in, if any."""
        return self.definition.column

    @property
    def digest(self) -> str:
        """Identifies what the case says, so reports of different versions of it are never
        compared."""
        return hashlib.sha256(self.definition.identity_json().encode()).hexdigest()[:12]


@dataclass(frozen=True)
class Cell:
    """A case run under one reservation variant: one test, one cell of the results table."""

    case: Case
    variant: str  # a built-in variant or one the run loaded (matrix/run/user_variants.py)
    ships: BuiltInVariant  # the variant the installed release's stock reservation is

    @property
    def judged_as(self) -> str:
        """The variant whose expectation this cell is held to. Stock, unless the case states
        its own, must behave exactly like the variant its release ships: on 0.31 a case's
        ``original`` expectation applies to stock too."""
        if self.variant == "stock" and "stock" not in self.case.definition.expect:
            return self.ships
        return self.variant

    @property
    def expected(self) -> Expectation:
        """The expectation this cell is held to: its ``judged_as`` variant's."""
        return self.case.definition.expectation_for(self.judged_as)

    @property
    def line(self) -> int:
        """The line of this cell's expectation, where a failure is reported."""
        return self.case.expectation_line(self.judged_as)

    @property
    def test_id(self) -> str:
        """The test's id: the case's id and the variant, ``single_group[k=1]-original``."""
        return f"{self.case.case_id}-{self.variant}"


AxisPoint = tuple[str, Any, Location]  # label, value, where the value is written


def _axis_points(name: str, axis: Axis, document: LoadedDocument) -> list[AxisPoint]:
    where: Location = ("matrix", name, "values")
    if isinstance(axis.values, dict):
        return [(str(label), value, (*where, label)) for label, value in axis.values.items()]
    points = []
    for index, value in enumerate(axis.values):
        if isinstance(value, dict | list):
            raise CaseFileError(
                document.path,
                document.line_of((*where, index)),
                f"matrix.{name}: structured values need labels (values: {{label: value, ...}})",
            )
        points.append((label_of(value), value, (*where, index)))
    return points


def _path_parts(dotted: str) -> Location:
    return tuple(int(part) if part.isdigit() else part for part in dotted.split("."))


def _place(data: dict[str, Any], dotted: str) -> tuple[Any, str | int]:
    """The container and key that ``dotted`` names in ``data`` (missing mappings are made)."""
    parts = _path_parts(dotted)
    node: Any = data
    for part in parts[:-1]:
        if isinstance(node, dict):
            node = node.setdefault(part, {})
        elif isinstance(node, list) and isinstance(part, int) and part < len(node):
            node = node[part]
        else:
            raise KeyError(dotted)
    if isinstance(node, list) and not (isinstance(parts[-1], int) and parts[-1] < len(node)):
        raise KeyError(dotted)
    if not isinstance(node, dict | list):
        raise KeyError(dotted)
    return node, parts[-1]


def _expectation_lines(
    document: LoadedDocument, axis_lines: dict[Location, int], spec: CaseFile
) -> tuple[tuple[str, int], ...]:
    def line(key: str) -> int | None:
        return axis_lines.get(("expect", key), document.lines.get(("expect", key)))

    default = line("default")
    found: list[tuple[str, int | None]] = [(v, line(v) or default) for v in VARIANT_NAMES]
    # A user's variant is held to its own expect entry only (see CaseFile.expectation_for).
    found += [(key, line(key)) for key in spec.expect if key not in (*VARIANT_NAMES, "default")]
    return tuple((variant, at) for variant, at in found if at is not None)


def expand_document(
    document: LoadedDocument, variants: tuple[str, ...] = VARIANT_NAMES
) -> list[Case]:
    """A case file's cases: one per combination of its matrix axes (or itself without axes),
    each validated against the run's ``variants``; raises :class:`CaseFileError` at the line
    of what is wrong (a request's ``stored`` that none of them reads, too)."""
    base = validate(document, variants=variants)
    if not base.matrix and not base.when:
        labels = connector_label(base, [])
        case_id = f"{base.name}[{labels}]" if labels else base.name
        lines = _expectation_lines(document, {}, base)
        expect_line = document.lines.get(("expect",))
        cases = [
            Case(case_id, document.path, document.line_of(("name",)), base, lines, expect_line)
        ]
    else:
        axes = list(base.matrix.items())
        points = itertools.product(*(_axis_points(name, axis, document) for name, axis in axes))
        cases = [_case_at(document, base.name, axes, point, variants) for point in points]
    unread = stored_unread([case.definition for case in cases])
    if unread is not None:
        raise document.error(unread.location, str(unread))
    return cases


def _case_at(
    document: LoadedDocument,
    name: str,
    axes: list[tuple[str, Axis]],
    combination: tuple[AxisPoint, ...],
    variants: tuple[str, ...],
) -> Case:
    """The case at one combination of axis values: the file's data with each axis's places
    set, validated, its errors placed at the axis value that set the offending place."""
    data = copy.deepcopy(document.data)
    data.pop("matrix", None)
    when = data.pop("when", [])
    axis_lines: dict[Location, int] = {}  # a place an axis set -> the line of that axis value
    for (axis_name, axis), (_, value, where) in zip(axes, combination, strict=True):
        for path, item in axis.overlays(value).items():
            try:
                container, key = _place(data, path)
            except KeyError:
                raise CaseFileError(
                    document.path,
                    document.line_of(where),
                    f"matrix.{axis_name}: no such place in the case: {path}",
                ) from None
            container[key] = copy.deepcopy(item)
            overlay_line = (*where, path) if axis.path is None else where
            axis_lines[_path_parts(path)] = document.line_of(overlay_line)
    _apply_when(document, when, axes, combination, data, axis_lines)
    labels = ",".join(
        f"{axis_name}={label}"
        for (axis_name, _), (label, _, _) in zip(axes, combination, strict=True)
    )
    try:
        spec = validate(document, data, axis_lines, variants)
    except CaseFileError as error:
        raise CaseFileError(error.path, error.line, f"[{labels}] {error.message}") from None
    lines = _expectation_lines(document, axis_lines, spec)
    labels = ",".join(filter(None, (connector_label(spec, axes), labels)))
    case_id = f"{name}[{labels}]" if labels else name
    expect_line = document.lines.get(("expect",))
    name_line = document.line_of(("name",))
    return Case(case_id, document.path, name_line, spec, lines, expect_line)


def connector_label(spec: CaseFile, axes: list[tuple[str, Axis]]) -> str:
    """``connector=NAME`` for a case whose loads go through another connector than the
    default, unless an axis that sets the connector already names it in the id."""
    if spec.connector == DEFAULT_CONNECTOR:
        return ""
    for _, axis in axes:
        places = axis.values.values() if axis.path is None and isinstance(axis.values, dict) else ()
        if axis.path == "connector" or any("connector" in overlay for overlay in places):
            return ""
    return f"connector={spec.connector}"


def _apply_when(
    document: LoadedDocument,
    when: list[Any],
    axes: list[tuple[str, Axis]],
    combination: tuple[AxisPoint, ...],
    data: dict[str, Any],
    axis_lines: dict[Location, int],
) -> None:
    """The ``when:`` entries that hold at this point set their expectations, in order (the
    base validated them: each a mapping with an ``expect`` mapping)."""
    labels = {name: label for (name, _), (label, _, _) in zip(axes, combination, strict=True)}
    entries = [When.model_validate(raw) for raw in when]
    if any(RELEASE_AXIS in entry.conditions() for entry in entries):
        labels[RELEASE_AXIS] = installed_release()
    for index, entry in enumerate(entries):
        if not entry.holds(labels):
            continue
        expect = data.setdefault("expect", {})
        for variant, expectation in entry.expect.items():
            expect[variant] = expectation
            axis_lines[("expect", variant)] = document.line_of(("when", index, "expect", variant))


def cells_for_case(
    case: Case, ships: BuiltInVariant = NEWEST_SHIPPED, variants: tuple[str, ...] = VARIANT_NAMES
) -> list[Cell]:
    """The case's cells: one per variant of the run's ``variants`` that the case runs."""
    return [Cell(case, variant, ships) for variant in case.definition.runs_variants(variants)]


CASE_SUFFIXES = (".yaml", ".yml")


def case_files(path: Path) -> list[Path]:
    """The files a path names: itself, or the YAML files in a directory; model descriptions
    only when the directory is a ``models/`` folder itself."""
    if not path.is_dir():
        return [path]
    found = (f for suffix in CASE_SUFFIXES for f in path.glob(f"*{suffix}"))
    return sorted(f for f in found if not is_model_file(f) or path.name == MODELS_FOLDER)


def cells_from_file(
    path: Path, ships: BuiltInVariant = NEWEST_SHIPPED, variants: tuple[str, ...] = VARIANT_NAMES
) -> list[Cell]:
    """All cells of one case file under the run's ``variants`` (the built-ins and any the run
    loaded), in a stable order. Raises :class:`CaseFileError`."""
    document = read_document(path)
    return [
        cell
        for case in expand_document(document, variants)
        for cell in cells_for_case(case, ships, variants)
    ]
