#!/usr/bin/env bash
# TRL's own GRPO trainer tests against AdaptiveGRPOTrainer, offline, outside CI (docs/trl.md).
#
#   scripts/trl_upstream_tests.sh TRL_GIT [ALLOCATOR ...] [-- PYTEST_ARGS ...]
#
# TRL_GIT: a TRL git repository (work tree or bare git directory); REF (default HEAD) picks the
# commit. Its tests/test_grpo_trainer.py and the helpers it imports (tests/__init__.py,
# testing_utils.py, testing_constants.py, conftest.py) are read with `git show` into a scratch
# folder (WORK, default a new temporary folder), never into this repository; stand-in models and
# TRL's zen dataset are built there (scripts/trl_upstream_standins.py). Each ALLOCATOR (default:
# stock uniform default vigor) runs the whole file: "stock" is TRL's GRPOTrainer, any other name
# AdaptiveGRPOTrainer(allocator=NAME) ("default": allocator=None). Summaries go to
# WORK/results/<allocator>.txt and a table of counts is printed at the end.
set -euo pipefail

if [[ $# -lt 1 ]]; then
    sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
TRL_GIT=$1
shift
ALLOCATORS=()
while [[ $# -gt 0 && $1 != "--" ]]; do
    ALLOCATORS+=("$1")
    shift
done
[[ ${1:-} == "--" ]] && shift
[[ ${#ALLOCATORS[@]} -eq 0 ]] && ALLOCATORS=(stock uniform default vigor)

REPO=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-python}
REF=${REF:-HEAD}
WORK=${WORK:-$(mktemp -d -t trl-upstream-XXXXXX)}
case "$WORK" in "$REPO"|"$REPO"/*) echo "WORK must be outside the repository: $WORK" >&2; exit 2 ;; esac
if ! git --git-dir="$TRL_GIT" rev-parse --verify -q "$REF^{commit}" >/dev/null 2>&1; then
    if git -C "$TRL_GIT" rev-parse --verify -q "$REF^{commit}" >/dev/null 2>&1; then
        TRL_GIT=$(git -C "$TRL_GIT" rev-parse --absolute-git-dir)
    else
        echo "$TRL_GIT: not a git repository with commit $REF" >&2
        exit 2
    fi
fi

mkdir -p "$WORK/trl_tests/tests" "$WORK/standins" "$WORK/results"
for file in __init__.py testing_utils.py testing_constants.py conftest.py test_grpo_trainer.py; do
    if git --git-dir="$TRL_GIT" cat-file -e "$REF:tests/$file" 2>/dev/null; then
        git --git-dir="$TRL_GIT" show "$REF:tests/$file" >"$WORK/trl_tests/tests/$file"
    elif [[ $file == test_grpo_trainer.py || $file == testing_utils.py ]]; then
        echo "$TRL_GIT@$REF has no tests/$file" >&2
        exit 2
    fi
done
git --git-dir="$TRL_GIT" show "$REF:scripts/generate_zen_dataset.py" >"$WORK/generate_zen_dataset.py"
echo "TRL tests from $TRL_GIT at $(git --git-dir="$TRL_GIT" rev-parse "$REF") in $WORK/trl_tests"

export PYTHONPATH="$REPO/src:$REPO/scripts:$WORK/trl_tests${PYTHONPATH:+:$PYTHONPATH}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRL_EXPERIMENTAL_SILENCE=1
export HF_DATASETS_CACHE="$WORK/datasets_cache"
if [[ ! -f "$WORK/standins/.built" ]]; then
    "$PYTHON" "$REPO/scripts/trl_upstream_standins.py" --zen-script "$WORK/generate_zen_dataset.py" --out "$WORK/standins"
    touch "$WORK/standins/.built"
fi

for allocator in "${ALLOCATORS[@]}"; do
    echo "== $allocator"
    (
        cd "$WORK/standins"  # the tests' "trl-internal-testing/..." names resolve to the stand-ins here
        ADAPTIVE_ALLOCATOR=$allocator "$PYTHON" -m pytest -q -p trl_upstream_plugin -p no:cacheprovider \
            --rootdir "$WORK/trl_tests" "$WORK/trl_tests/tests/test_grpo_trainer.py" -rfE "$@" \
            >"$WORK/results/$allocator.txt" 2>&1 || true
    )
    tail -n 1 "$WORK/results/$allocator.txt"
done

echo
echo "allocator | summary"
for allocator in "${ALLOCATORS[@]}"; do
    echo "$allocator | $(tail -n 1 "$WORK/results/$allocator.txt")"
done
echo "failures per allocator: grep '^FAILED' $WORK/results/<allocator>.txt"
