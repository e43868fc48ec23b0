#!/usr/bin/env bash
# scripts/trixie-root refuses roots it cannot trust and says why, without making anything:
# a root with no completion stamp (an interrupted run), one stamped for another package list,
# and a missing root or build for `test` (skipped, or a failure when required). Needs root
# (the script does); exits 77 (skipped) otherwise.
set -uo pipefail
script="$(cd "$(dirname "$0")/../.." && pwd)/scripts/trixie-root"
[ "$(id -u)" -eq 0 ] || { echo "skipped: needs root"; exit 77; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fails=0
expect() {  # expect NAME CODE TEXT -- command...
  local name="$1" code="$2" text="$3"; shift 4
  local out rc
  out="$("$@" 2>&1)"; rc=$?
  if [ "$rc" -ne "$code" ] || ! grep -qF -- "$text" <<<"$out"; then
    echo "FAIL $name: exit $rc (want $code), output: $out"
    fails=$((fails + 1))
  else
    echo "ok   $name"
  fi
}
export MEMPLAN_TRIXIE_ROOT="$tmp/root" MEMPLAN_TRIXIE_BUILD="build-trixie-absent-$$"
unset MEMPLAN_REQUIRE_TORCH26

expect "path" 0 "$tmp/root" -- "$script" path
expect "no root: shell" 1 "no root at $tmp/root" -- "$script" shell
expect "no root: test skips" 77 "skipped: no root at $tmp/root" -- "$script" test
expect "no root: test required" 1 "error: no root at $tmp/root" -- env MEMPLAN_REQUIRE_TORCH26=1 "$script" test

mkdir -p "$tmp/root/usr/bin"  # what an interrupted debootstrap leaves: files, no stamp
expect "half-made root" 1 "has no completion stamp (an interrupted run left it half-made)" -- "$script" shell
printf 'memplan trixie-root format 1\nsuite trixie\narch amd64\npackages 0000 other\ncreated x\n' > "$tmp/root/.memplan-root-stamp"
expect "other package list" 1 "was made for another package list or format" -- "$script" shell
expect "usage" 2 "usage: scripts/trixie-root" -- "$script" frobnicate
expect "skip asked" 77 "skipped: MEMPLAN_SKIP_TORCH26=1" -- env MEMPLAN_SKIP_TORCH26=1 "$script" test

# The --cuda root: its own place and build folder, the same refusals, and a root stamped for the
# LibTorch 2.6 (CPU) package list is not taken for it.
expect "cuda: path" 0 "$tmp/root-cuda" -- "$script" --cuda path
expect "cuda: no root: test skips" 77 "skipped: no root at $tmp/root-cuda" -- "$script" --cuda test
expect "cuda: no root: test required" 1 "error: no root at $tmp/root-cuda" -- env MEMPLAN_REQUIRE_TORCH26=1 "$script" --cuda test
expect "cuda: skip asked" 77 "skipped: MEMPLAN_SKIP_TORCH26=1" -- env MEMPLAN_SKIP_TORCH26=1 "$script" --cuda test
mkdir -p "$tmp/root-cuda/usr/bin"
expect "cuda: half-made root" 1 "has no completion stamp (an interrupted run left it half-made)" -- "$script" --cuda shell
printf 'memplan trixie-root format 1\nsuite trixie\narch amd64\npackages 0000 libtorch-dev\ncreated x\n' > "$tmp/root-cuda/.memplan-root-stamp"
expect "cuda: a CPU root's stamp" 1 "was made for another package list or format" -- "$script" --cuda shell

[ "$fails" -eq 0 ] || { echo "$fails failed"; exit 1; }
echo "all passed"
