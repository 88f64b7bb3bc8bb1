#!/usr/bin/env bash
# The two entry points of the README. Both do all set-up first (scripts/setup.sh).
#   ./run.sh demo   profile a small CNN on the host, then on an emulated Cortex-M4 board (QEMU)
#   ./run.sh test   the whole test suite: pytest (unit + integration), ruff and mypy
set -euo pipefail
cd "$(dirname "$0")"
./scripts/setup.sh
# shellcheck disable=SC1091
. .venv/bin/activate

case "${1:-}" in
  demo)
    python examples/make_tiny_cnn.py examples/tiny_cnn.onnx
    aidge-deploy profile examples/tiny_cnn.onnx --target host --iterations 20 --report out/host --overwrite
    aidge-deploy profile examples/tiny_cnn.onnx --target mps2-an386 --iterations 10 --report out/mps2-an386 --overwrite
    ;;
  test)
    ruff check src tests benchmarks
    ruff format --check src tests benchmarks
    mypy
    set +e
    python -m pytest -q -n 2 --dist loadfile --durations=15 "${@:2}"
    rc=$?
    set -e
    # exit code 5 = no tests collected (a -k selection can be empty): not a failure
    if [ "$rc" -eq 5 ]; then rc=0; fi
    exit "$rc"
    ;;
  *)
    echo "usage: ./run.sh demo | test [pytest args]" >&2
    exit 2
    ;;
esac
