#!/usr/bin/env bash
# Runs the vLLM unit tests of this folder inside a scratch copy of a vLLM release's own tests/
# (its source archive, as `tox -e upstream0xx` or `tox -e patched0xx` caches it), each in the
# vLLM folder that docs/findings.md's table of the tests names, where a maintainer would paste it:
#   docs/findings/run.sh 0.33.0 .tox/up033/bin/python [test_x.py ...] [-- pytest args]
# Without test files it runs all of them. The python must have that vLLM (requirements/vllm-X*.txt,
# or a patched tree: tox -e patched0xx) and docs/findings/requirements.txt. See docs/findings.md.
set -euo pipefail
version=$1
python=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
shift 2
here=$(cd "$(dirname "$0")" && pwd)
doc=$here/../findings.md
tests=()
while [[ $# -gt 0 && $1 != -- ]]; do tests+=("$1"); shift; done
[[ $# -gt 0 ]] && shift
[[ ${#tests[@]} -gt 0 ]] || tests=($(cd "$here" && ls test_*.py))
upstream=${MATRIX_UPSTREAM_CACHE:-$HOME/.cache/vllm-kv-matrix/upstream}
source=$upstream/vllm-$version
[[ -d $source/tests ]] || source=$upstream/vllm-$version-tree
[[ -d $source/tests ]] || { echo "no $source/tests: run tox -e upstream${version//./} once" >&2; exit 2; }
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cp -r "$source/tests" "$source/pyproject.toml" "$scratch/"
paths=()
for test in "${tests[@]}"; do
  # The doc's row: | [`test_x.py`](...) | `tests/v1/...` | ...
  folder=$(sed -n "s/^| \[\`$test\`\]([^)]*) | \`\(tests\/[^\`]*\)\` |.*/\1/p" "$doc")
  [[ -n $folder ]] || { echo "$test: no row naming its vLLM folder in $doc" >&2; exit 2; }
  cp "$here/$test" "$scratch/$folder/"
  paths+=("$folder/$test")
done
# vLLM 0.34's CPU platform refuses x86 without Triton when a test builds a config: this project's
# pytest plugin lets that one check pass (docs/upstream.md), where the python has it.
plugin=()
"$python" -c "import matrix.upstream.plugin" 2>/dev/null && plugin=(-p matrix.upstream.plugin)
cd "$scratch"
HF_HUB_CACHE=$upstream/hf-hub HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 \
  DO_NOT_TRACK=1 VLLM_TARGET_DEVICE=cpu \
  VLLM_CACHE_ROOT=${VLLM_CACHE_ROOT:-$HOME/.cache/vllm-kv-matrix/findings} \
  "$python" -m pytest -p no:cacheprovider "${plugin[@]}" -q -rf "${paths[@]}" "$@"
