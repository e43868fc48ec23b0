#!/usr/bin/env bash
# The installed memplan: `cmake --install` into a temporary prefix puts memplan in bin/, its
# companion in libexec/memplan/ and the data in share/memplan/; the installed binary reads that data
# (never the source tree), runs the companion, and says clearly when data or companion is missing.
set -euo pipefail
build=$(cd "$1" && pwd)
prefix=$(mktemp -d /tmp/memplan-install.XXXXXX)
trap 'rm -rf "$prefix"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$prefix" >/dev/null
[ -x "$prefix/bin/memplan" ] || fail "no bin/memplan"
[ -f "$prefix/share/memplan/gpus.yaml" ] || fail "no share/memplan/gpus.yaml"
[ -f "$prefix/share/memplan/families.yaml" ] || fail "no share/memplan/families.yaml"
ls "$prefix"/share/memplan/models/*.json >/dev/null || fail "no share/memplan/models/*.json"
# (grep reads all of ldd's output: with -q and pipefail, ldd's SIGPIPE would read as a failure)
ldd "$prefix/bin/memplan" | grep -Ec 'libtorch|libc10|opencv|avformat' >/dev/null && fail "bin/memplan links LibTorch"

cd "$prefix"  # away from the source tree
out=$(bin/memplan gpus | tail -n 1)
[[ "$out" == *"sources in $prefix/share/memplan/gpus.yaml"* ]] || fail "gpus read its data elsewhere: $out"
set +e
bin/memplan estimate --model llama-3-8b --gpu a100-80gb --micro-batch 4 --seq-len 2048 --json > est.json
code=$?
set -e
[ "$code" -le 1 ] || fail "estimate exited $code"
grep -q '"schema": "memplan.estimate/v1"' est.json || fail "estimate printed no document"

if [ -x "$build/memplan-measure" ]; then
  [ -x "$prefix/libexec/memplan/memplan-measure" ] || fail "no libexec/memplan/memplan-measure"
  bin/memplan measure --help | grep -c -- '--steps' >/dev/null || fail "measure --help did not reach the companion"
  ldd "$prefix/libexec/memplan/memplan-measure" | grep -c 'libtorch' >/dev/null || fail "the companion does not link LibTorch"
else
  set +e
  msg=$(bin/memplan measure --device cpu 2>&1)
  code=$?
  set -e
  [ "$code" -eq 2 ] || fail "measure without a companion exited $code"
  [[ "$msg" == *"companion program memplan-measure"* ]] || fail "no companion message: $msg"
fi

# A broken install: data gone -> a clear error, exit 2, no crash.
mv share/memplan share/memplan.gone
set +e
msg=$(bin/memplan estimate --model llama-3-8b --gpu a100-80gb 2>&1)
code=$?
set -e
[ "$code" -eq 2 ] || fail "missing data exited $code: $msg"
[[ "$msg" == "error: memplan cannot find its data files (gpus.yaml, families.yaml, models/); looked in $prefix/share/memplan"* ]] ||
  fail "unclear missing-data message: $msg"
[[ "$msg" == *"hint: reinstall memplan"* ]] || fail "no hint: $msg"
mv share/memplan.gone share/memplan
set +e
msg=$(MEMPLAN_DATA_DIR=/nonexistent bin/memplan gpus 2>&1)
code=$?
set -e
[ "$code" -eq 2 ] || fail "MEMPLAN_DATA_DIR=/nonexistent exited $code"
[[ "$msg" == "error: MEMPLAN_DATA_DIR='/nonexistent' holds no gpus.yaml"* ]] || fail "unclear message: $msg"
# The mirror table is installed and read from there; a broken entry is an error at its line.
[ -f "$prefix/share/memplan/models/mirrors.yaml" ] || fail "no share/memplan/models/mirrors.yaml"
HF_HUB_OFFLINE=1 HF_HUB_CACHE="$prefix/none" XDG_CACHE_HOME="$prefix/none" \
  bin/memplan estimate --model NousResearch/Meta-Llama-3-8B --gpu a100-80gb --json > mirror.json 2> mirror.err ||
  [ $? -le 1 ] || fail "a mirror did not resolve offline: $(cat mirror.err)"
grep -q "read as memplan's preset llama-3-8b" mirror.err || fail "no mirror warning: $(cat mirror.err)"
cp -r share/memplan broken
printf 'mirrors:\n  - id: someone/x\n    preset: no-such-preset\n    upstream: a/b\n    named_by: f @ c\n' > broken/models/mirrors.yaml
set +e
msg=$(MEMPLAN_DATA_DIR="$prefix/broken" HF_HUB_OFFLINE=1 HF_HUB_CACHE="$prefix/none" bin/memplan estimate --model someone/x --gpu a100-80gb 2>&1)
code=$?
set -e
[ "$code" -eq 2 ] || fail "a broken mirror table exited $code: $msg"
[[ "$msg" == "$prefix/broken/models/mirrors.yaml:2:"*"error: mirror 'someone/x' names no preset 'no-such-preset'"* ]] ||
  fail "unclear broken-table message: $msg"
echo "install test: OK ($prefix)"
