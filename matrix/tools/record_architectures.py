"""``python -m matrix.tools.record_architectures``: writes the installed vLLM's model
architectures to ``matrix/registry/vllm-<version>.txt``, one a line with the module that
defines it, sorted. Run it in each
release's env (``tox -e vllm030 ... vllm033``, or ``.tox/<env>/bin/python -m ...``) when a
release is added; ``matrix.architectures`` reads the files without importing vLLM.
"""

from __future__ import annotations

import sys

from matrix.architectures import record_path
from matrix.installed import installed_vllm_version


def main() -> int:
    """Records the installed release's architectures; returns the exit code."""
    version = installed_vllm_version()
    if version is None:
        print("record_architectures: vLLM is not installed", file=sys.stderr)
        return 2
    from matrix.adapters.registry import known_architectures, module_of

    path = record_path(version)
    names = sorted(known_architectures())
    path.write_text("".join(f"{name} {module_of(name)}\n" for name in names), encoding="utf-8")
    print(f"{path}: {len(names)} architectures of vLLM {version}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
