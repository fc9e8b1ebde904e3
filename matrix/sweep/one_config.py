"""``python -m matrix sweep --config path/to/config.json``: one model's config.json derived as
the sweep derives an architecture's default config (the same length, device and code:
``derive.config_row``), its layout class or the named reason there is none, and where the
sweep stands on that class: the architectures the release's baseline gives it, and the class
cells that run it (``matrix/sweep/cells/<class>.yaml``).
"""

from __future__ import annotations

import sys
from pathlib import Path

from pydantic import TypeAdapter

from matrix.case.baselines import BaselineError, Row, baseline_path, parse_rows
from matrix.case.config_json import config_model, read_config_json
from matrix.case.layout_class import class_slug
from matrix.case.reading import CaseFileError
from matrix.sweep.cells import CELLS
from matrix.wording import plural

SHOWN = 6  # the baseline's architectures of the class named
ROW = TypeAdapter(Row)


def config_lines(path: Path, row: Row, baseline: list[Row] | None, version: str) -> list[str]:
    """What the sweep says of the config's row. Pure."""
    named = f"{path} ({row.architecture}, model type {row.model_type})"
    if row.status != "layout":
        return [f"sweep: {named}: {row.status}: {row.detail}"]
    slug = class_slug(row.detail)
    lines = [f"sweep: {named}: layout class {row.detail} ({slug})"]
    if baseline is None:
        lines.append(f"  no baseline for vLLM {version} to compare with")
    else:
        alike = [
            r.architecture for r in baseline if r.status == "layout" and r.detail == row.detail
        ]
        if alike:
            shown = ", ".join(alike[:SHOWN]) + (", ..." if len(alike) > SHOWN else "")
            count = plural(len(alike), "architecture")
            lines.append(f"  as the vLLM {version} baseline has it for {count}: {shown}")
        else:
            lines.append(f"  a class no architecture of the vLLM {version} baseline has")
    cells = CELLS / f"{slug}.yaml"
    if cells.is_file():
        # A test id is the case's name, then its axes in brackets or the variant after `-`:
        # either ends the slug, which no longer slug continues with.
        chosen = f"class_{slug}[ or class_{slug}-"
        lines.append(
            f"  its class cells: matrix/sweep/cells/{cells.name} "
            f"(python -m matrix sweep --cells -- -k '{chosen}')"
        )
    else:
        lines.append("  no class cells run it: write a case for the model (docs/adding-a-model.md)")
    return lines


def _row(path: Path, architecture: str, model_type: str) -> Row:
    """The config's row, as kept for this install and file (the check cache), else derived
    here after vLLM's import (then kept, unless it turned on what this install lacks)."""
    from matrix.sweep.derive import DEVICE, SWEPT_LENGTH
    from matrix.tools.check_store import question

    asked = question("sweep-config", path, {"device": DEVICE, "length": SWEPT_LENGTH})
    kept = asked.answer(ROW) if asked is not None else None
    if kept is not None:
        return kept
    from matrix.sweep.derive import config_row
    from matrix.tools.check_cache import import_vllm_saying

    import_vllm_saying("sweep", f"to derive {path.name}'s layout")
    row = config_row(path, architecture, model_type)
    if asked is not None and row.status in ("layout", "refused", "unmodelled"):
        asked.keep(ROW.dump_python(row, mode="json"))
    return row


def main(path: Path, version: str) -> int:
    """Derives the config's row and prints it; 0 with a layout class, 1 with a reason there
    is none, 2 for a file that is no config.json to read."""
    try:
        model = config_model(path)  # the file's own problems, before vLLM's import
        model_type = read_config_json(path).text_config().get("model_type")
    except CaseFileError as error:
        print(f"matrix sweep --config: {error}".splitlines()[0], file=sys.stderr)
        return 2
    kind = model_type if isinstance(model_type, str) and model_type.isprintable() else "-"
    row = _row(Path(model.path), model.architecture, kind[:80])
    try:
        held = baseline_path(version)
        baseline = parse_rows(held.read_text(encoding="utf-8"), held) if held.is_file() else None
    except (BaselineError, OSError, UnicodeDecodeError):
        baseline = None  # the comparison is an aside here; `python -m matrix sweep` says why
    for line in config_lines(path, row, baseline, version):
        print(line)
    return 0 if row.status == "layout" else 1
