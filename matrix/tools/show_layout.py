"""``python -m matrix show-layout <model>``: the KV cache groups the installed vLLM derives for a
model (its config.json or a description), as a table or as JSON. A report is kept per release
for the model's files and the options (``matrix.tools.check_cache``): asked again, it is
printed without importing vLLM."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from matrix.case.format import CaseFile
from matrix.case.layout_class import class_group, class_key, class_slug
from matrix.case.limits import LIMITS
from matrix.case.loading import CaseFileError, read_model_file
from matrix.case.model_paths import model_file, no_model, present
from matrix.case.strict import problem_place
from matrix.wording import plural

# A case key -> the option that sets it, so that a refused value names the option.
OPTIONS = {
    ("layout", "tp"): "--tp",
    ("layout", "block_size"): "--block-size",
    ("layout", "mamba_mode"): "--mamba-mode",
    ("layout", "device"): "--device",
    ("max_model_len",): "--max-model-len",
    ("speculative", "num_tokens"): "--spec-tokens",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds the ``show-layout`` command's arguments to ``parser``."""
    parser.add_argument(
        "model", help="a shipped model's name, a model's config.json, or a model description file"
    )
    parser.add_argument("--tp", type=int, default=1, help="tensor-parallel size")
    parser.add_argument("--mamba-mode", choices=["none", "align"], default="none")
    parser.add_argument("--spec-tokens", type=int, default=0, help="EAGLE speculative tokens")
    parser.add_argument("--block-size", type=int, default=None, help="the user's --block-size")
    parser.add_argument("--max-model-len", type=int, default=4096)
    parser.add_argument(
        "--device",
        choices=["sm80", "sm90", "sm100", "cpu"],
        default="sm80",
        help="the device whose attention backend vLLM picks (default sm80: FlashAttention)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON")


def _path(options: argparse.Namespace) -> Path:
    path = model_file(options.model, None)
    if path is None or not present(path):  # a link to /dev/zero is read, and refused as such
        raise ValueError(no_model(options.model))
    return path


def _refused(error: ValidationError) -> str:
    """pydantic's refusal of an option's value, naming the option and the reason (a rule
    spanning the case, as a limit, says where it is broken)."""
    problem = error.errors(include_url=False)[0]
    location = tuple(part for part in problem_place(problem) if isinstance(part, str))
    key = next((OPTIONS[location[:n]] for n in (2, 1) if location[:n] in OPTIONS), None)
    where = key or ".".join(location)
    return f"{where}: {problem['msg'].removeprefix('Value error, ')}"


def _case(options: argparse.Namespace) -> CaseFile:
    path = _path(options)
    layout: dict[str, Any] = {
        "tp": options.tp,
        "mamba_mode": options.mamba_mode,
        "device": getattr(options, "device", None) or "sm80",
    }
    if options.block_size is not None:
        layout["block_size"] = options.block_size
    k = options.spec_tokens
    return CaseFile.model_validate(
        {
            "name": "show-layout",
            "model": path.parent.name if path.suffix == ".json" else path.stem,
            "described": read_model_file(path),
            "layout": layout,
            "max_model_len": options.max_model_len,
            "speculative": {"method": "eagle", "num_tokens": k} if k else None,
            # Nothing runs: the sizes a layout is derived for may be the most a case's may.
            "limits": {name: LIMITS[name][1] for name in ("max_model_len", "block_size", "pool")},
            "pool": 2,
            "requests": [{"id": "a", "prompt": 1}],
        }
    )


def derived(options: argparse.Namespace) -> dict[str, Any]:
    """The layout report; raises ValueError, CaseFileError or a LayoutError with the reason."""
    case = _case(options)
    from matrix.adapters.selection import select_adapter
    from matrix.installed import installed_vllm_version

    select_adapter()  # vLLM's start-up switches, and a release the adapters drive
    from matrix.adapters.kv_cache import layout_for, scheduler_block_sizes

    layout = layout_for(case)
    scheduler_block, hash_block = scheduler_block_sizes(case)
    groups = []
    for group, spec in zip(layout.groups, layout.specs, strict=True):
        # A Mamba state's prefill checkpoint blocks (FlashInfer's GDN prefill in align mode;
        # MambaMixer2's from 0.32), which the scheduler and the sizing read in align mode only.
        checkpoints = getattr(spec.kv_cache_spec, "num_prefill_checkpoint_blocks", 0)
        checkpoints = checkpoints if group.mamba_mode == "align" else 0
        groups.append({**asdict(group), "prefill_checkpoint_blocks": checkpoints})
    return {
        "model": case.model,
        "vllm_version": installed_vllm_version(),
        "device": case.layout.device,
        "groups": groups,
        "scheduler_block_size": scheduler_block,
        "hash_block_size": hash_block,
    }


def _known_or_derived(
    options: argparse.Namespace, case: CaseFile, path: Path
) -> dict[str, Any] | list[CaseFileError]:
    """The report an earlier call kept for this model file and these options, else the model
    file's problems or the report vLLM derives now (then kept); raises as :func:`derived`."""
    from matrix.tools.check_cache import (
        checked_model_file,
        import_vllm_saying,
        keep_report,
        known_model_check,
        known_report,
    )

    report = known_report(case, path)
    if report is not None:
        return report
    known = known_model_check(path)
    if known is not None and known.errors:
        return known.errors
    import_vllm_saying("show-layout", f"to derive {case.model}'s layout")
    problems = (known or checked_model_file(path)).errors
    if problems:
        return problems
    report = derived(options)
    keep_report(case, path, report)
    return report


def keep_default_report(path: Path) -> None:
    """The report for ``path`` with the default options, derived (vLLM imported) and kept
    unless one is: ``validate``, which imported vLLM to read the file, leaves ``show-layout``
    nothing to import for."""
    from matrix.tools.check_cache import keep_report, known_report

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    options = parser.parse_args([str(path)])
    try:
        case = _case(options)
        if known_report(case, path) is None:
            keep_report(case, path, derived(options))
    except Exception:  # validate says what is wrong with the file; only nothing is kept
        return


def layout_class(report: dict[str, Any], max_model_len: int) -> str:
    """The report's layout as the sweep classes layouts (``matrix.case.layout_class``)."""
    return class_key(
        class_group(g["kind"], g["block_size"], g["window"], g["mamba_mode"], max_model_len)
        for g in report["groups"]
    )


def main(options: argparse.Namespace) -> int:
    """Prints the layout vLLM derives, as a table or JSON; returns the exit code."""
    try:
        case = _case(options)  # the options and the model file, before vLLM imports
        report = _known_or_derived(options, case, _path(options))
        if isinstance(report, list):
            for problem in report:
                print(problem)
            return 2
    except ValidationError as error:
        print(f"matrix show-layout: {_refused(error)}")
        return 2
    except (ValueError, CaseFileError) as error:
        print(f"matrix show-layout: {error}".splitlines()[0])
        return 2
    except Exception as error:  # a LayoutError or UnsupportedRelease: one line, not a traceback
        print(f"matrix show-layout: {type(error).__name__}: {error}".splitlines()[0])
        return 2
    key = layout_class(report, options.max_model_len)
    if options.json:
        print(json.dumps({**report, "layout_class": key}, indent=2))
        return 0
    print(
        f"{report['model']} on vLLM {report['vllm_version']}, {report['device']}: "
        f"{plural(len(report['groups']), 'group')}"
    )
    for index, group in enumerate(report["groups"]):
        extra = f", window {group['window']}" if group["window"] else ""
        mode = f", mamba_mode {group['mamba_mode']}" if group["mamba_mode"] else ""
        if group["prefill_checkpoint_blocks"]:
            mode += f", {group['prefill_checkpoint_blocks']} prefill checkpoint block"
        print(
            f"  {index}: {group['kind']}, {group['layers']} layers, "
            f"block {group['block_size']} tokens{extra}{mode}"
        )
    print(
        f"scheduler block {report['scheduler_block_size']}, hash block {report['hash_block_size']}"
    )
    print(f"layout class {key} ({class_slug(key)})")
    return 0
