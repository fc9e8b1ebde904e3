"""The CI templates (docs/ci/): docs/ci.md shows them as they are, they run every known
release in the same shards through its tox env, their linters pass (each shown to catch a
mistake), and the workflow played here gives the report a direct run gives."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from matrix.ci.tox_commands import read_env
from matrix.ci.workflow import expand_matrix, load_workflow
from matrix.releases import RELEASES, release_key, release_of
from tests.helpers import REPO, needs_vllm

DOC = REPO / "docs" / "ci.md"
WORKFLOW = REPO / "docs" / "ci" / "github-workflow.yml"
PIPELINE = REPO / "docs" / "ci" / "buildkite-pipeline.yml"
SCHEDULED = REPO / "docs" / "ci" / "github-releases.yml"
TOX_INI = REPO / "tox.ini"


def doc_copy(path: Path) -> str:
    """The text docs/ci.md shows for a template: the yaml block after its marker."""
    text = DOC.read_text(encoding="utf-8")
    marker = text.index(f"<!-- {path.relative_to(REPO)}, copied")
    start = text.index("```yaml\n", marker) + len("```yaml\n")
    return text[start : text.index("\n```\n", start) + 1]


@pytest.mark.parametrize("path", [WORKFLOW, PIPELINE, SCHEDULED], ids=lambda p: p.name)
def test_the_doc_shows_each_template_as_it_is(path: Path) -> None:
    assert doc_copy(path) == path.read_text(encoding="utf-8"), (
        f"docs/ci.md's copy of {path.relative_to(REPO)} differs from the file: paste its text"
    )


def test_both_templates_run_every_release_in_the_same_shards() -> None:
    workflow = load_workflow(WORKFLOW)
    combos = expand_matrix(workflow["jobs"]["shard"]["strategy"]["matrix"])
    releases = sorted({c["release"] for c in combos}, key=release_key)
    assert [release_of(r) for r in releases] == sorted(RELEASES, key=release_key)
    for combo in combos:  # each release through the tox env that pins it
        assert read_env(TOX_INI, combo["toxenv"]).release == combo["release"]
    shards = int(workflow["env"]["SHARDS"])
    assert sorted({c["shard"] for c in combos}) == list(range(1, shards + 1))
    assert len(combos) == len(releases) * shards
    pipeline = yaml.safe_load(PIPELINE.read_text(encoding="utf-8"))
    steps = [step for step in pipeline["steps"] if "parallelism" in step]
    assert [read_env(TOX_INI, s["env"]["TOX_ENV"]).release for s in steps] == releases
    assert {step["parallelism"] for step in steps} == {shards}
    # The tox tox.ini provisions from, and the README's CPU torch index, in both.
    tox = re.search(r"^\s+tox==(\S+)$", TOX_INI.read_text(encoding="utf-8"), re.MULTILINE)
    assert tox and workflow["env"]["TOX_VERSION"] == pipeline["env"]["TOX_VERSION"] == tox[1]
    index = workflow["env"]["PIP_EXTRA_INDEX_URL"]
    assert index == pipeline["env"]["PIP_EXTRA_INDEX_URL"]
    assert f"PIP_EXTRA_INDEX_URL={index}" in (REPO / "README.md").read_text(encoding="utf-8")


def test_both_templates_run_the_sweep_and_the_connectors_on_every_release() -> None:
    """Each (release, part) a job, through the labelled tox env that pins the release."""
    workflow = load_workflow(WORKFLOW)
    combos = expand_matrix(workflow["jobs"]["coverage"]["strategy"]["matrix"])
    envs = {combo["part"] + combo["suffix"]: combo["release"] for combo in combos}
    for env, release in envs.items():
        assert read_env(TOX_INI, env).release == release
    shards = expand_matrix(workflow["jobs"]["shard"]["strategy"]["matrix"])
    assert sorted(envs) == sorted(
        f"{part}{combo['toxenv'].removeprefix('vllm')}"
        for part in ("sweep", "connectors")
        for combo in shards
        if combo["shard"] == 1
    )
    pipeline = yaml.safe_load(PIPELINE.read_text(encoding="utf-8"))
    (step,) = [step for step in pipeline["steps"] if step.get("key") == "coverage"]
    setup = step["matrix"]["setup"]
    assert sorted(part + suffix for part in setup["part"] for suffix in setup["release"]) == sorted(
        envs
    )


def tool(name: str) -> str:
    """An installed linter (this environment's first), or the test skips."""
    places = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    found = shutil.which(name, path=places)
    if found is None:
        pytest.skip(f"{name} is not installed (requirements/ci-lint.txt)")
    return found


def lint(command: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def broken(tmp_path: Path, path: Path, old: str, new: str) -> Path:
    text = path.read_text(encoding="utf-8")
    assert old in text
    copy = tmp_path / path.name
    copy.write_text(text.replace(old, new, 1), encoding="utf-8")
    return copy


def test_actionlint_and_shellcheck_pass_the_workflows(tmp_path: Path) -> None:
    actionlint = tool("actionlint")
    shellcheck = shutil.which("shellcheck", path=str(Path(sys.executable).parent)) or ""
    command = [actionlint, f"-shellcheck={shellcheck}", "-pyflakes=", "-no-color"]
    done = lint([*command, str(WORKFLOW), str(SCHEDULED)])
    assert done.returncode == 0 and not done.stdout, done.stdout + done.stderr
    # It checks each action's inputs against its version, and (with shellcheck) the scripts.
    misspelt = broken(tmp_path, WORKFLOW, "merge-multiple:", "merge-multipl:")
    assert 'input "merge-multipl" is not defined' in lint([*command, str(misspelt)]).stdout
    if shellcheck:
        unquoted = broken(tmp_path, WORKFLOW, 'cat "$report"', "cat $report")
        assert "SC2086" in lint([*command, str(unquoted)]).stdout


@pytest.mark.parametrize(
    ("path", "schema", "old", "new", "beside"),
    [
        (WORKFLOW, "vendor.github-workflows", "runs-on:", "run-on:", [SCHEDULED]),
        (PIPELINE, "vendor.buildkite", "parallelism: 3", "parallelism: three", []),
    ],
    ids=["github", "buildkite"],
)
def test_each_template_matches_its_vendored_schema(
    tmp_path: Path, path: Path, schema: str, old: str, new: str, beside: list[Path]
) -> None:
    if importlib.util.find_spec("check_jsonschema") is None:
        pytest.skip("check-jsonschema is not installed (requirements/ci-lint.txt)")
    # One start (most of its cost) for the files of a schema: it names each file that fails.
    copy = broken(tmp_path, path, old, new)
    command = [sys.executable, "-m", "check_jsonschema", "--builtin-schema", schema]
    done = lint([*command, str(path), *map(str, beside), str(copy)])
    assert done.returncode == 1 and f"{copy}::$" in done.stdout, done.stdout + done.stderr
    for good in (path, *beside):
        assert f"{good}::" not in done.stdout, done.stdout


def test_the_buildkite_commands_pass_shellcheck(tmp_path: Path) -> None:
    shellcheck = tool("shellcheck")
    pipeline = yaml.safe_load(PIPELINE.read_text(encoding="utf-8"))
    commands = {step["key"]: step["command"] for step in pipeline["steps"] if "command" in step}
    assert len(commands) == len(RELEASES) + 2  # the shards', the merge, the coverage
    for key, command in commands.items():
        script = tmp_path / f"{key}.sh"
        # `$$` is Buildkite's escape: the job's shell sees `$`.
        script.write_text("#!/usr/bin/env bash\n" + command.replace("$$", "$"), encoding="utf-8")
        done = lint([shellcheck, "--shell=bash", str(script)])
        assert done.returncode == 0, f"{key}: {done.stdout}"


SCHEDULED_STUB = """\
#!/usr/bin/env bash
echo "python $*" >> "$CALLS"
echo "vLLM on the index beside the known releases"
echo "matrix releases: the verdict" >&2
exit "$RELEASES_EXIT"
"""


def test_the_scheduled_job_runs_the_releases_listing_and_fails_as_it_does(
    tmp_path: Path,
) -> None:
    """Daily, ``tox -e newrelease`` (``python -m matrix releases``, no vLLM): its output in the
    log and the run's summary, its exit code the job's (1: a newer release, 3: no index)."""
    workflow = load_workflow(SCHEDULED)
    assert "schedule" in workflow["on"] and "workflow_dispatch" in workflow["on"]
    (cron,) = (entry["cron"] for entry in workflow["on"]["schedule"])
    assert len(cron.split()) == 5
    assert read_env(TOX_INI, "newrelease").shell(None) == "python -m matrix releases"
    assert read_env(TOX_INI, "newrelease").release is None  # no vLLM in its env
    tox = re.search(r"^\s+tox==(\S+)$", TOX_INI.read_text(encoding="utf-8"), re.MULTILINE)
    assert tox and workflow["env"]["TOX_VERSION"] == tox[1]
    (step,) = [s for s in workflow["jobs"]["releases"]["steps"] if "newrelease" in s.get("run", "")]
    stubs = tmp_path / "bin"
    stubs.mkdir()
    (stubs / "python").write_text(SCHEDULED_STUB)
    (stubs / "python").chmod(0o755)
    for code in (0, 1, 3):
        summary, calls = tmp_path / f"summary{code}", tmp_path / f"calls{code}"
        variables = {**os.environ, "RELEASES_EXIT": str(code), "CALLS": str(calls)}
        variables.update(PATH=f"{stubs}{os.pathsep}{os.environ['PATH']}")
        variables["GITHUB_STEP_SUMMARY"] = str(summary)
        done = subprocess.run(
            ["bash", "-e", "-c", step["run"]],
            env=variables,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == code
        assert calls.read_text() == "python -m tox -q -e newrelease\n"
        assert "matrix releases: the verdict" in done.stdout
        assert summary.read_text().splitlines() == [
            "```",
            "vLLM on the index beside the known releases",
            "matrix releases: the verdict",
            "```",
        ]


def without_digest(path: Path) -> dict[str, Any]:
    report: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    report.pop("matrix_digest")
    return report


# The shipped cases the play keeps, a file a shard (shards take whole files), and the two
# variants it runs: stock passes, none stalls (as the cases expect).
SMALL_CASES = ("single_group.yaml", "mamba_align.yaml", "mamba_none.yaml")
VARIANTS = ("-m", "stock or none")


@dataclass(frozen=True)
class Played:
    """The workflow played on the installed release: its jobs as play.json has them, each
    step by (job name, step name), what the player printed and its exit code."""

    repo: Path
    out: Path
    version: str
    cache: Path  # where the merge job kept its pictures
    jobs: list[dict[str, Any]]
    steps: dict[tuple[str, str], dict[str, Any]]
    printed: str
    code: int


@pytest.fixture(scope="module")
def played(warm_vllm: None, tmp_path_factory: pytest.TempPathFactory) -> Played:
    """The workflow's own steps, with ``--here`` and three shards, on a copy of this
    repository that keeps three case files: each shard job's ``python -m matrix run`` a fork of
    this process (vLLM imported), run on the job's own checkout."""
    from matrix.ci import play, steps
    from matrix.installed import cache_base, installed_vllm_version
    from matrix.report.gallery import SWITCH

    version = str(installed_vllm_version())
    repo = steps.snapshot(REPO, tmp_path_factory.mktemp("small") / "repo")
    for case in (repo / "cases").glob("*.yaml"):
        if case.name not in SMALL_CASES:
            case.unlink()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    out = tmp_path_factory.mktemp("play")
    command = [str(WORKFLOW), "--repo", str(repo), "--here", "--release", version]
    command += ["--job", "shard", "--job", "merge"]  # the coverage jobs have tests of their own
    printed = io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(printed):
        patch.delenv(SWITCH, raising=False)  # pictures on, as in the direct run (pictures_on)
        code = play.main([*command, "--shards", "3", "--out", str(out), "--", "-n", "0", *VARIANTS])
    if not (out / "play.json").is_file():
        pytest.fail(f"the play stopped (exit {code}):\n{printed.getvalue()[-4000:]}")
    jobs = json.loads((out / "play.json").read_text(encoding="utf-8"))
    steps_run = {(job["name"], step["name"]): step for job in jobs for step in job["steps"]}
    return Played(repo, out, version, cache_base(), jobs, steps_run, printed.getvalue(), code)


@needs_vllm
@pytest.mark.slow
@pytest.mark.once
def test_the_played_shard_jobs_upload_their_shards_and_the_merge_job_merges_them(
    played: Played,
) -> None:
    """Three shard jobs, an artifact each, then the merge; the cross-version step, given the
    one release the play asked for (``--release``), passes saying it owes no check across
    releases (CI's own step, given none, fails: tests/test_crossversion.py)."""
    assert [job["job"] for job in played.jobs] == ["shard"] * 3 + ["merge"], played.printed
    assert all(job["status"] == "success" for job in played.jobs[:3]), played.printed[-4000:]
    shards = sorted(p.name for p in (played.out / "artifacts").glob("shard-*"))
    assert shards == [f"shard-{played.version}-{k}" for k in (1, 2, 3)]
    assert played.steps[("merge", "Merge each release's shards")]["status"] == "success"
    crossed = played.steps[("merge", "Cross-version table and fidelity checks")]
    assert crossed["status"] == "success" and played.code == 0, played.printed[-4000:]
    logs = (played.out / "jobs").glob("*merge/logs/*.log")
    said = "".join(log.read_text(encoding="utf-8") for log in logs)
    assert f"one release asked for (--release {played.version})" in said


@needs_vllm
@pytest.mark.slow
@pytest.mark.once
def test_the_played_merge_reports_what_a_direct_run_reports(
    played: Played, inline: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The merge job's report against the same cells run here in one pytest session: the
    JSON field by field (the code digest aside: the shards ran the job's checkout), the
    Markdown byte for byte, and the job summary holds that Markdown."""
    # The merge job's picture store, not the empty one under pytester's HOME: the same
    # pictures, drawn once.
    monkeypatch.setenv("MATRIX_VLLM_CACHE", str(played.cache))
    direct = inline.runpytest_inprocess(
        str(played.repo / "cases"),
        "-p",
        "no:cacheprovider",
        *VARIANTS,
        "--matrix-report=one.json",
        # Under the merged report's name: its pictures' folder is named after it.
        f"--matrix-report=one/vllm-{played.version}.md",
    )
    assert direct.ret == 0
    merged = played.out / "artifacts" / "reports" / f"vllm-{played.version}"
    assert without_digest(Path(f"{merged}.json")) == without_digest(inline.path / "one.json")
    markdown = (inline.path / "one" / f"vllm-{played.version}.md").read_text(encoding="utf-8")
    assert Path(f"{merged}.md").read_text(encoding="utf-8") == markdown
    assert len(without_digest(inline.path / "one.json")["cells"]) == 14  # 7 cases x 2 variants
    summary = Path(played.jobs[3]["summary"]).read_text(encoding="utf-8")
    assert summary.startswith(markdown)  # then the cross-version report
    assert "# KV reservation matrix across vLLM releases" in summary[len(markdown) :]


STUB_PYTHON = """\
#!/usr/bin/env bash
echo "python $*" >> "$CALLS"
case "$*" in
  "-m tox -e merge") mkdir -p reports && echo "# 0.32" > reports/vllm-0.32.0.md \\
    && echo "# 0.33" > reports/vllm-0.33.0.md && exit "$MERGE_EXIT" ;;
  "-m tox -e crossversion") echo "# across" > reports/cross-version.md ;;
esac
"""
STUB_AGENT = """\
#!/usr/bin/env bash
echo "agent $*" >> "$CALLS"
if [ "$1" = annotate ]; then cat >> "$CALLS"; fi
"""


@pytest.mark.parametrize("merge_exit", [0, 1])
def test_the_buildkite_commands_run_each_shard_and_annotate_the_merge(
    tmp_path: Path, merge_exit: int
) -> None:
    """Each command as Buildkite's agent runs it (``bash -e -c``, ``$$`` read as ``$``), with
    ``python`` and ``buildkite-agent`` stubs that record what they were asked."""
    stubs = tmp_path / "bin"
    stubs.mkdir()
    for name, text in (("python", STUB_PYTHON), ("buildkite-agent", STUB_AGENT)):
        (stubs / name).write_text(text)
        (stubs / name).chmod(0o755)
    pipeline = yaml.safe_load(PIPELINE.read_text(encoding="utf-8"))
    calls = tmp_path / "calls"

    def run(step: dict[str, Any], **env: str) -> int:
        variables = {**os.environ, **pipeline["env"], **step.get("env", {}), **env}
        variables.update(PATH=f"{stubs}{os.pathsep}{os.environ['PATH']}", CALLS=str(calls))
        command = step["command"].replace("$$", "$")
        done = subprocess.run(
            ["bash", "-e", "-c", command], env=variables, cwd=tmp_path, check=False
        )
        return done.returncode

    shard = next(step for step in pipeline["steps"] if step.get("key") == "vllm033")
    for job in range(shard["parallelism"]):
        count = str(shard["parallelism"])
        assert run(shard, BUILDKITE_PARALLEL_JOB=str(job), BUILDKITE_PARALLEL_JOB_COUNT=count) == 0
    merge = next(step for step in pipeline["steps"] if step.get("key") == "merge")
    assert run(merge, MERGE_EXIT=str(merge_exit)) == merge_exit
    style = "error" if merge_exit else "success"
    assert calls.read_text().splitlines() == [
        *[
            line
            for group in (1, 2, 3)
            for line in (
                "python -m pip install tox==4.67.15",
                f"python -m tox -e vllm033 -- --splits 3 --group {group}",
            )
        ],
        "agent artifact download reports/shards/* .",
        "python -m pip install tox==4.67.15",
        "python -m tox -e merge",
        f"agent annotate --style {style} --context vllm-0.32.0",
        "# 0.32",
        f"agent annotate --style {style} --context vllm-0.33.0",
        "# 0.33",
        "python -m tox -e crossversion",
        "agent annotate --style info --context cross-version",
        "# across",
    ]
