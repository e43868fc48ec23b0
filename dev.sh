#!/usr/bin/env bash
# The README's quick start, on a fresh Debian 12 machine:
#   ./dev.sh demo   install what the core needs, build it, run `memplan fit` on a bundled example
#   ./dev.sh test   install everything (LibTorch included), build, run every test suite through ctest,
#                   then the sanitizer build's suites, the hostile corpus and a short run of each fuzzer
# Also: ./dev.sh build (install everything + build only); ./dev.sh sanitize (only the sanitizer
# build and its ctest); ./dev.sh fuzz [SECONDS] [TARGET...] (the fuzz targets, 600 s each by default).
set -euo pipefail
cd "$(dirname "$0")"

# Debian packages. The core (build/memplan) needs only CORE; everything else builds the measurement
# companion (LibTorch, Eigen), the tests and the benchmarks. libopenblas0-pthread matters: without
# it Debian's LibTorch runs matrix products on the reference BLAS (about 10x slower CPU steps).
CORE=(g++ cmake ninja-build libfmt-dev libcli11-dev libyaml-cpp-dev nlohmann-json3-dev)
# The hardening build (ASan + UBSan, libFuzzer): clang, its sanitizer and fuzzer runtimes, and
# llvm-symbolizer for readable reports.
HARDEN=(clang libclang-rt-14-dev llvm)
FULL=("${CORE[@]}" build-essential git pkg-config doctest-dev libeigen3-dev
      libtorch-dev libopenblas0-pthread libbenchmark-dev hyperfine time "${HARDEN[@]}")

install_missing() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "dev.sh: installing ${missing[*]}" >&2
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# build [CMAKE OPTIONS...]: configure (options apply to an existing build folder too) and build.
build() {
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
  cmake --build build -j "$(nproc)"
}

# The sanitizer build (build-san): the core, its doctest suites, the hostile corpus and the fuzz
# targets under AddressSanitizer + UndefinedBehaviorSanitizer with every report fatal (an abort,
# never an exit code memplan uses). LibTorch stays out: Debian's libtorch is not built with ASan,
# so calibrate/ and its suites run only in the normal build.
sanitize_build() {
  cmake -S . -B build-san -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_COMPILER=clang++ -DMEMPLAN_WITH_TORCH=OFF \
        -DMEMPLAN_TESTS=ON -DMEMPLAN_BENCH=OFF -DMEMPLAN_SANITIZE=ON -DMEMPLAN_FUZZ=ON "$@" >/dev/null
  cmake --build build-san -j "$(nproc)"
}

sanitize_test() {
  sanitize_build
  # Two at a time: the short fuzz runs (30 s each) are most of the time.
  ctest --test-dir build-san -V -j 2
}

case "${1:-demo}" in
  demo)
    install_missing "${CORE[@]}"
    # Only the core: no LibTorch, tests or benchmarks (./dev.sh test builds those).
    build -DMEMPLAN_WITH_TORCH=OFF -DMEMPLAN_TESTS=OFF -DMEMPLAN_BENCH=OFF
    # exit 1 means "does not fit": the answer, not a failure of the demo.
    build/memplan fit --config examples/quickstart.yaml || [ $? -eq 1 ]
    ;;
  test)
    install_missing "${FULL[@]}"
    build -DMEMPLAN_WITH_TORCH=AUTO -DMEMPLAN_TESTS=ON -DMEMPLAN_BENCH=ON
    # -V: every suite's output reaches the log, so the CPU matrix and published tables are
    # printed in every CI run, passing or not.
    ctest --test-dir build -V
    sanitize_test
    ;;
  sanitize)
    install_missing "${CORE[@]}" doctest-dev "${HARDEN[@]}"
    sanitize_test
    ;;
  fuzz)
    install_missing "${CORE[@]}" doctest-dev "${HARDEN[@]}"
    sanitize_build
    shift
    seconds=${1:-600}
    [ $# -gt 0 ] && shift
    tests/fuzz/run.sh build-san "$seconds" "$@"
    ;;
  build)
    install_missing "${FULL[@]}"
    build -DMEMPLAN_WITH_TORCH=AUTO -DMEMPLAN_TESTS=ON -DMEMPLAN_BENCH=ON
    ;;
  *)
    echo "usage: ./dev.sh demo|test|build|sanitize|fuzz [SECONDS] [TARGET...]" >&2
    exit 2
    ;;
esac
