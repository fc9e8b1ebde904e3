"""tox's inline plugin: hand pip's package sources to uv.

tox installs through uv (tox-uv), and uv reads no pip configuration. The pinned CPU torch
(``torch==X+cpu``) is on no default index, so a machine that serves it through pip's settings
(find-links, an extra index, in ``PIP_*`` variables or a pip.conf) must serve it to uv too.
Each env gets the matching ``UV_*`` variables unless the user set them, so ``UV_*`` always wins.
Without any source the install fails on the ``+cpu`` pin instead of pulling a CUDA torch.

Before an env's commands run, the bytecode its sibling envs compiled for the files they share
with it is linked in (``matrix/tools/bytecode.py``): a fresh env then compiles only what is its
own (vLLM, transformers) instead of torch and the rest again.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import subprocess
import sys
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from tox.plugin import impl

if TYPE_CHECKING:
    from tox.config.sets import EnvConfigSet
    from tox.session.state import State
    from tox.tox_env.api import ToxEnv

# pip option -> (uv variable, separator uv expects between several values)
_PIP_TO_UV = {
    "index-url": ("UV_INDEX_URL", " "),
    "extra-index-url": ("UV_EXTRA_INDEX_URL", " "),
    "find-links": ("UV_FIND_LINKS", ","),
    "no-index": ("UV_NO_INDEX", " "),
}
# Later wins: what pip itself lets override what (a variable over the install section over global).
_SCOPES = ("global", "install", ":env:")


@cache
def pip_sources() -> dict[str, str]:
    """pip's effective source settings, as uv variables (empty when pip is missing)."""
    try:
        listing = subprocess.run(
            [sys.executable, "-m", "pip", "config", "list"],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    found: dict[str, tuple[int, str]] = {}
    for line in listing.splitlines():
        name, sep, raw = line.partition("=")
        scope, _, option = name.rpartition(".")
        if not sep or scope not in _SCOPES or option not in _PIP_TO_UV:
            continue
        rank = _SCOPES.index(scope)
        if option not in found or found[option][0] <= rank:
            found[option] = (rank, str(ast.literal_eval(raw)))
    result: dict[str, str] = {}
    for option, (_, value) in found.items():
        variable, separator = _PIP_TO_UV[option]
        result[variable] = separator.join(value.split())
    return result


@impl
def tox_add_env_config(env_conf: EnvConfigSet, state: State) -> None:
    mapped = {k: v for k, v in pip_sources().items() if k not in os.environ}
    if mapped:
        env_conf["set_env"].update(mapped, override=False)


@cache
def _bytecode() -> ModuleType:
    """matrix/tools/bytecode.py, loaded by its path: tox's env has no matrix installed, and the
    file needs nothing beyond the standard library."""
    path = Path(__file__).parent / "matrix" / "tools" / "bytecode.py"
    spec = importlib.util.spec_from_file_location("matrix_bytecode", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# In an env that has shared once: its first run compiled the rest, and walking every sibling
# again would add seconds to each warm run. tox removes it with the env.
_SHARED_MARK = ".bytecode-shared"


@impl
def tox_before_run_commands(tox_env: ToxEnv) -> None:
    """Links in, once per env, the bytecode the envs beside it compiled for the files it
    shares with them."""
    try:
        site = Path(tox_env.conf["env_site_packages_dir"])
    except KeyError:  # not a Python env
        return
    env_dir = Path(tox_env.conf["env_dir"])
    mark = env_dir / _SHARED_MARK
    if mark.exists() or not site.is_dir() or not site.is_relative_to(env_dir):
        return
    inside = site.relative_to(env_dir)
    siblings = sorted(p / inside for p in env_dir.parent.iterdir() if not p.name.startswith("."))
    _bytecode().share_bytecode(site, siblings)
    mark.touch()
