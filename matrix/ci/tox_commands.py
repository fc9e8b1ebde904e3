"""What ``python -m tox -e ENV -- ARGS`` runs, read from ``tox.ini``: the env's ``commands``
with ``ARGS`` as its positional arguments, and the vLLM release its dependencies pin. The
workflow player's ``--here`` mode runs those commands in the current environment instead of
building the env. Pure: reads the file.
"""

from __future__ import annotations

import configparser
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

REFERENCE = re.compile(r"\{\[([^\]]+)\]([\w-]+)\}")  # {[section]key}
POSARGS = re.compile(r"\{posargs(?::([^{}]*))?\}")
RELEASE_PIN = re.compile(r"requirements/vllm-(\d+\.\d+\.\d+)\.txt")
MATRIX = "python -m matrix"
# The commands that run cells (the player's `-- ARGS` reach them), and those that import vLLM
# (with --here, forked from the player, which imported it once).
CELL_RUNS = ("run", "connectors", "sweep --cells")
IMPORT_VLLM = ("run", "connectors", "sweep")
CROSSVERSION = "crossversion"


def runs(line: str, commands: tuple[str, ...]) -> bool:
    """Whether the command ``line`` is ``python -m matrix`` with one of ``commands``."""
    return any(line == f"{MATRIX} {c}" or line.startswith(f"{MATRIX} {c} ") for c in commands)


class ToxError(Exception):
    """An env whose commands cannot be run outside tox; the message is one line."""


@dataclass(frozen=True)
class ToxEnv:
    """A tox env as the player needs it: its commands and the vLLM release it installs."""

    name: str
    commands: tuple[str, ...]
    release: str | None  # None: the env installs no vLLM release (merge, crossversion)

    @property
    def runs_cells(self) -> bool:
        """Whether the env runs cells (``python -m matrix run``, ``connectors``, ``sweep
        --cells``)."""
        return any(runs(command, CELL_RUNS) for command in self.commands)

    @property
    def crosses_releases(self) -> bool:
        """Whether the env writes the cross-version table (``python -m matrix crossversion``)."""
        return any(runs(command, (CROSSVERSION,)) for command in self.commands)

    def shell(self, args: str | None, extra: tuple[str, ...] = (), matrix: str = MATRIX) -> str:
        """The env's commands as one shell command: ``args`` (shell text, as written after
        ``--``) as the positional arguments, then ``extra``, quoted; ``matrix`` stands for
        ``python -m matrix`` in the commands that import vLLM."""
        words = " ".join([args or "", *(shlex.quote(a) for a in extra)])
        lines = [_posargs(command, words.strip() or None) for command in self.commands]
        lines = [
            matrix + line[len(MATRIX) :] if runs(line, IMPORT_VLLM) else line for line in lines
        ]
        return lines[0] if len(lines) == 1 else "( " + " && ".join(lines) + " )"


def _posargs(command: str, args: str | None) -> str:
    def replace(match: re.Match[str]) -> str:
        return args if args is not None else (match.group(1) or "")

    return POSARGS.sub(replace, command).strip()


def read_env(tox_ini: Path, name: str) -> ToxEnv:
    """The env ``name`` of ``tox_ini``; :class:`ToxError` when it is not there or its commands
    need tox's own substitutions."""
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(tox_ini.read_text(encoding="utf-8"), source=str(tox_ini))
    except (OSError, configparser.Error) as error:
        raise ToxError(f"{tox_ini}: {' '.join(str(error).split())}") from None
    section = f"testenv:{name}"
    if not parser.has_section(section):
        raise ToxError(f"{tox_ini}: no env {name}")
    commands = _resolved(parser, section, "commands").replace("\\\n", " ").replace("{/}", os.sep)
    lines = tuple(" ".join(line.split()) for line in commands.splitlines() if line.strip())
    for line in lines:
        left = POSARGS.sub("", line)
        if "{" in left:
            raise ToxError(f"{tox_ini}: env {name} runs {line!r}, which needs tox itself")
    pins = RELEASE_PIN.findall(_resolved(parser, section, "deps"))
    return ToxEnv(name, lines, pins[0] if pins else None)


def _resolved(parser: configparser.ConfigParser, section: str, key: str, depth: int = 0) -> str:
    """A setting with its ``{[section]key}`` references replaced (as tox does)."""
    if depth > 10:
        raise ToxError(f"tox.ini: [{section}] {key} refers to itself")
    value = parser.get(section, key, fallback="")
    return REFERENCE.sub(
        lambda m: (
            _resolved(parser, m.group(1), m.group(2), depth + 1)
            if parser.has_section(m.group(1))
            else m.group(0)
        ),
        value,
    )
