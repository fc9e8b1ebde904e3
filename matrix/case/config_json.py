"""A model named by its ``config.json``: the file read as JSON, with the line of every key, and
the reference a case holds to it (:class:`ConfigModel`).

What a file must say before vLLM reads it is checked here, each problem one line at its key:
JSON that parses (a truncated file says so; read as every JSON input is, bounded), an object,
``architectures`` and ``model_type`` (and ``text_config.model_type`` for a multimodal model),
and the numbers vLLM allocates or divides by (``matrix.case.config_numbers``). What vLLM
makes of the file (its ``ModelConfig`` and the layout) is ``matrix.adapters.config_json``'s.
Pure: no vLLM here.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from matrix.case.config_numbers import number_problem
from matrix.case.json_input import parse_json
from matrix.case.reading import (
    CaseFileError,
    LoadedDocument,
    Location,
    dotted,
    read_text,
)
from matrix.case.strict import Strict

CONFIG_JSON = "config.json"


class ConfigModel(Strict):
    """A model named by its config.json: vLLM's ``ModelConfig`` reads the folder holding it."""

    path: Annotated[str, Field(min_length=1)]  # the config.json, absolute
    digest: Annotated[str, Field(min_length=64, max_length=64)]  # sha256 of its bytes
    architecture: str  # architectures[0] (text_config's model for a multimodal model: vLLM's)

    @property
    def folder(self) -> Path:
        """The folder vLLM's ModelConfig is pointed at."""
        return Path(self.path).parent


@dataclass(frozen=True)
class ConfigDocument(LoadedDocument):
    """A config.json's data and the line of every key in it."""

    data: dict[str, Any]

    def text_config(self) -> dict[str, Any]:
        """The text model's keys: ``text_config`` for a multimodal model, else the file's."""
        text = self.data.get("text_config")
        return text if isinstance(text, dict) else self.data


def key_lines(path: Path, text: str) -> dict[Location, int]:
    """The line of every object key and array item in ``text`` (JSON that parses); raises
    :class:`CaseFileError` at a key its object holds already (JSON itself keeps the last)."""
    lines: dict[Location, int] = {(): 1}
    # Per open container: [kind, its current key or index, whether a key (an item) is next].
    stack: list[list[Any]] = []
    line, index = 1, 0
    while index < len(text):
        char = text[index]
        frame = stack[-1] if stack else None
        if char == "\n":
            line += 1
        elif char in " \t\r:":
            pass
        elif char in "}]":
            stack.pop()
        elif char == "," and frame is not None:
            frame[2] = True
            if frame[0] == "[":
                frame[1] += 1
        else:
            if frame is not None and frame[0] == "[" and frame[2]:
                frame[2] = False
                lines[tuple(f[1] for f in stack)] = line
            if char == '"':
                end = index + 1
                while text[end] != '"':
                    end += 2 if text[end] == "\\" else 1
                if frame is not None and frame[0] == "{" and frame[2]:
                    frame[1], frame[2] = json.loads(text[index : end + 1]), False
                    where = tuple(f[1] for f in stack)
                    if where in lines:
                        raise CaseFileError(path, line, f"duplicate key '{dotted(where)}'")
                    lines[where] = line
                index = end
            elif char in "{[":
                stack.append([char, 0, True])
        index += 1
    return lines


def read_config_json(path: Path, text: str | None = None) -> ConfigDocument:
    """A config.json's data and lines (``text``: the file's, when the caller has read it);
    raises :class:`CaseFileError` where it is not JSON, or not an object."""
    text = read_text(path) if text is None else text
    data = parse_json(path, text)
    lines = key_lines(path, text)  # a duplicate key is refused here, at its second line
    if not isinstance(data, dict):
        raise CaseFileError(
            path, 1, 'a config.json is a JSON object: {"architectures": [...], ...}'
        )
    return ConfigDocument(path, data, lines)


def _check_keys(document: ConfigDocument) -> str:
    """The file's text architecture; raises :class:`CaseFileError` at the first missing key."""
    data = document.data
    architectures = data.get("architectures")
    if isinstance(architectures, str):
        raise document.error(
            ("architectures",), f'a list of class names: ["{architectures}"], not a string'
        )
    if not (isinstance(architectures, list) and architectures):
        raise document.error(("architectures",), "needed: the model's class, as vLLM knows it")
    if not all(isinstance(name, str) for name in architectures):
        raise document.error(("architectures",), "a list of class names")
    for where in [(), ("text_config",)] if "text_config" in data else [()]:
        block = data if not where else data["text_config"]
        if not isinstance(block, dict):
            raise document.error(where, "an object of the text model's keys")
        if not isinstance(block.get("model_type"), str):
            raise document.error((*where, "model_type"), "needed: it picks the config class")
    text_model: Location = ("text_config",) if "text_config" in data else ()
    problem = number_problem(document.text_config())
    if problem is not None:
        raise document.error((*text_model, problem[0]), problem[1])
    return str(architectures[0])


def config_model(path: Path) -> ConfigModel:
    """The reference to a config.json, after the checks a file must pass before vLLM reads
    it; raises :class:`CaseFileError` at the line to fix."""
    if path.name != CONFIG_JSON:
        raise CaseFileError(path, 1, f"vLLM reads a folder's {CONFIG_JSON}: name the file so")
    text = read_text(path)
    document = read_config_json(path, text)
    architecture = _check_keys(document)
    # The file's bytes: read_text decodes strict UTF-8 and translates no newline, so encoding
    # the text again gives them back exactly.
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return ConfigModel(path=str(path.resolve()), digest=digest, architecture=architecture)
