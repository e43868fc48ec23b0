#!/usr/bin/env bash
# The README's quick start, on a fresh Debian 12 machine:
#   ./dev.sh demo   install what the core needs, build it, run `memplan fit` on a bundled example
#   ./dev.sh test   install everything (LibTorch included), build, run every test suite through ctest,
#                   the LibTorch 2.6 suites included (a Debian 13 root, scripts/trixie-root) and the
#                   companion compiled against the CUDA LibTorch 2.6 (a second root, --cuda; no GPU
#                   needed), then the sanitizer build's suites, the hostile corpus and a short run of
#                   each fuzzer
# Also: ./dev.sh build (install everything + build only). MEMPLAN_SKIP_TORCH26=1 leaves out both
# Debian 13 roots (their ctest entries then report "skipped"). ./dev.sh sanitize [all] (only the sanitizer
# build and its suites: the CI set, or all of them); ./dev.sh fuzz [SECONDS] [TARGET...] (the fuzz
# targets, 600 s each by default: the long runs, outside CI).
set -euo pipefail
cd "$(dirname "$0")"

# Debian packages. The core (build/memplan) needs only CORE; everything else builds the measurement
# companion (LibTorch), the tests and the benchmarks. libopenblas0-pthread matters: without
# it Debian's LibTorch runs matrix products on the reference BLAS (about 10x slower CPU steps).
# The Python module (python/) needs python3-dev and pybind11-dev; its monitor suites train real
# models with python3-torch (whose C++ headers come with libtorch-dev); pip install . uses
# python3-setuptools and python3-wheel. chromium (headless) opens memplan report's HTML in the
# browser test (tests/browser/run.sh); bash and zsh run the completion scripts' tests. debootstrap
# makes the Debian 13 roots (scripts/trixie-root), installed here before the two are made side by side.
CORE=(g++ cmake ninja-build libfmt-dev libcli11-dev libyaml-cpp-dev nlohmann-json3-dev libtomlplusplus-dev
      libcurl4-openssl-dev)  # curl.h only: memplan dlopens libcurl.so.4 for Hub fetches
# The hardening build (ASan + UBSan, libFuzzer): clang, its sanitizer and fuzzer runtimes, and
# llvm-symbolizer for readable reports.
HARDEN=(clang libclang-rt-14-dev llvm)
FULL=("${CORE[@]}" build-essential git pkg-config doctest-dev
      libtorch-dev libopenblas0-pthread libbenchmark-dev hyperfine time debootstrap
      python3-dev pybind11-dev python3-torch python3-setuptools python3-wheel chromium zsh "${HARDEN[@]}")

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
# The Python module is built for Debian's python3, the interpreter python3-torch is for (another
# python3 first in PATH, such as pyenv's, would not import it).
build() {
  local python=()
  [ -x /usr/bin/python3 ] && python=(-DPython3_EXECUTABLE=/usr/bin/python3)
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "${python[@]}" "$@" >/dev/null
  cmake --build build -j "$(nproc)"
}

# The sanitizer build (build-san): the core, its doctest suites, the hostile corpus and the fuzz
# targets under AddressSanitizer + UndefinedBehaviorSanitizer with every report fatal (an abort,
# never an exit code memplan uses). LibTorch stays out: Debian's libtorch is not built with ASan,
# so calibrate/ and its suites run only in the normal build.
# The suites CI runs under the sanitizers: the readers, the estimator and the planner (where
# hostile input lands), the hostile corpus through the memplan binary, and every fuzzer for 30 s
# (a fixed seed), and the mutation sweep over the tool-format fixtures (tests/hostile/sweep.py, its
# quick value set). cli_tests, watch_tests and the benchmarks stay in the normal build: building
# them under ASan would double the step's time for code that only formats what these compute.
SAN_TARGETS=(memplan estimator_tests profiles_tests planner_tests fuzz_yaml_config fuzz_deepspeed_json
             fuzz_hf_config fuzz_calibration fuzz_load_config fuzz_estimator fuzz_planner fuzz_keep)
SAN_TESTS='^(estimator_tests|profiles_tests|planner_tests|hostile_corpus|hostile_sweep|fuzz_.*)$'

sanitize_build() {  # sanitize_build [all]: the CI targets, or every target
  cmake -S . -B build-san -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_COMPILER=clang++ -DMEMPLAN_WITH_TORCH=OFF \
        -DMEMPLAN_PYTHON=OFF -DMEMPLAN_TESTS=ON -DMEMPLAN_BENCH=OFF -DMEMPLAN_SANITIZE=ON -DMEMPLAN_FUZZ=ON \
        -DMEMPLAN_FUZZ_SECONDS="${MEMPLAN_FUZZ_SECONDS:-30}" >/dev/null
  if [ "${1:-}" = all ]; then
    cmake --build build-san -j "$(nproc)"
  else
    cmake --build build-san -j "$(nproc)" --target "${SAN_TARGETS[@]}"
  fi
}

sanitize_test() {  # sanitize_test [all]
  sanitize_build "$@"
  if [ "${1:-}" = all ]; then
    ctest --test-dir build-san -V -j 2
  else
    # The fuzzers run MEMPLAN_FUZZ_SECONDS (default 30) each here; ./dev.sh fuzz runs them 10 minutes.
    ctest --test-dir build-san -V -j 2 -R "$SAN_TESTS"
  fi
}

# The Debian 13 root with LibTorch 2.6 and the calibrate suites built in it (build-trixie/), and
# the --cuda root with the CUDA LibTorch 2.6 and the companion built in it (build-trixie-cuda/):
# made once and cached, reused after (scripts/trixie-root). The main build's ctest runs them as
# torch26_calibrate_suites and cuda_companion_build, which must then not be skipped.
trixie_root() {  # chroot and mounts need root; sudo resets the environment, so pass the root's place on
  if [ "$(id -u)" -eq 0 ]; then
    scripts/trixie-root "$@"
  else
    sudo env ${MEMPLAN_TRIXIE_ROOT:+MEMPLAN_TRIXIE_ROOT="$MEMPLAN_TRIXIE_ROOT"} scripts/trixie-root "$@"
  fi
}

# Making the roots is mostly download and unpacking: both run beside the main build, each in
# its own job (their locks are separate), so the 2.6 suites' build need not wait for the CUDA
# root's larger download.
ROOT_LOGS=()
ROOT_PIDS=()
torch26_root_start() {
  [ "${MEMPLAN_SKIP_TORCH26:-0}" = 1 ] && return 0
  [ "$(id -u)" -eq 0 ] || sudo -v  # ask for the password now, not in the background
  local flag
  for flag in "" --cuda; do
    ROOT_LOGS+=("$(mktemp)")
    trixie_root $flag root > "${ROOT_LOGS[-1]}" 2>&1 &
    ROOT_PIDS+=($!)
  done
}

root_wait() {  # root_wait N: wait for the Nth root job, show its log, stop on its failure
  [ ${#ROOT_PIDS[@]} -gt "$1" ] || return 0
  local status=0
  wait "${ROOT_PIDS[$1]}" || status=$?
  cat "${ROOT_LOGS[$1]}" >&2
  rm -f "${ROOT_LOGS[$1]}"
  [ "$status" -eq 0 ] || exit "$status"
}

torch26() {
  if [ "${MEMPLAN_SKIP_TORCH26:-0}" = 1 ]; then
    echo "dev.sh: MEMPLAN_SKIP_TORCH26=1: the LibTorch 2.6 suites and the CUDA companion build will be skipped" >&2
    return 0
  fi
  root_wait 0
  trixie_root build
  root_wait 1
  trixie_root --cuda build
  export MEMPLAN_REQUIRE_TORCH26=1
}

case "${1:-demo}" in
  demo)
    install_missing "${CORE[@]}"
    # Only the core: no LibTorch, tests or benchmarks (./dev.sh test builds those).
    build -DMEMPLAN_WITH_TORCH=OFF -DMEMPLAN_PYTHON=OFF -DMEMPLAN_TESTS=OFF -DMEMPLAN_BENCH=OFF
    # exit 1 means "does not fit": the answer, not a failure of the demo.
    build/memplan fit --config examples/quickstart.yaml || [ $? -eq 1 ]
    ;;
  test)
    install_missing "${FULL[@]}"
    torch26_root_start
    build -DMEMPLAN_WITH_TORCH=AUTO -DMEMPLAN_PYTHON=AUTO -DMEMPLAN_TESTS=ON -DMEMPLAN_BENCH=ON
    torch26
    # -V: every suite's output reaches the log, so the CPU matrix and published tables are
    # printed in every CI run, passing or not. chromium is installed above: the browser test must run.
    MEMPLAN_REQUIRE_BROWSER=1 ctest --test-dir build -V
    sanitize_test
    ;;
  sanitize)  # ./dev.sh sanitize [all]: the CI set, or every suite under the sanitizers
    install_missing "${CORE[@]}" doctest-dev "${HARDEN[@]}"
    shift
    sanitize_test "$@"
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
    build -DMEMPLAN_WITH_TORCH=AUTO -DMEMPLAN_PYTHON=AUTO -DMEMPLAN_TESTS=ON -DMEMPLAN_BENCH=ON
    ;;
  *)
    echo "usage: ./dev.sh demo|test|build|sanitize|fuzz [SECONDS] [TARGET...]" >&2
    exit 2
    ;;
esac
