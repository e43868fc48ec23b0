#!/usr/bin/env bash
# Runs the libFuzzer targets of a MEMPLAN_FUZZ build for a given time each.
#
#   tests/fuzz/run.sh BUILD_DIR SECONDS [TARGET...]     (all targets when none is named)
#
# Each target starts from its seed corpus (tests/fuzz/corpus/TARGET) plus, for the readers, the
# repository's example and test configs, and grows a working corpus under $FUZZ_WORK (default
# BUILD_DIR/fuzz-work/TARGET/corpus), kept between runs. A crash, a sanitizer report, a broken
# invariant, an input over 2 s (-timeout) or over 4 GiB (-rss_limit_mb) is a finding: its input
# is saved under $FUZZ_WORK/TARGET/findings/ and the script exits 1. FUZZ_JOBS=2 runs two targets
# at a time; FUZZ_SEED=N fixes libFuzzer's seed (ctest sets 1, so a CI run can be repeated). A
# summary line per target gives the executions, coverage and corpus size.
set -uo pipefail

build=$(cd "${1:?usage: run.sh BUILD_DIR SECONDS [TARGET...]}" && pwd)
seconds=${2:?usage: run.sh BUILD_DIR SECONDS [TARGET...]}
shift 2
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work=${FUZZ_WORK:-$build/fuzz-work}
jobs=${FUZZ_JOBS:-1}
targets=("$@")
[[ ${#targets[@]} -eq 0 ]] && targets=(fuzz_yaml_config fuzz_deepspeed_json fuzz_hf_config fuzz_calibration fuzz_load_config
                                      fuzz_estimator fuzz_planner fuzz_keep)

# Extra seed folders (read, never written) per target.
seeds_of() {
  case $1 in
    fuzz_yaml_config) echo "$root/examples $root/tests/data/profiles $root/tests/data/check $root/tests/data/hostile" ;;
    fuzz_deepspeed_json|fuzz_load_config) echo "$root/examples $root/tests/data/profiles $root/tests/data/hostile" ;;
    fuzz_hf_config) echo "$root/profiles/models $root/tests/data/profiles/models" ;;
    fuzz_calibration) echo "$root/tests/data/profiles/bad" ;;
    fuzz_keep) echo "$root/tests/data/formats $root/examples" ;;
    *) echo "" ;;
  esac
}
max_len_of() { case $1 in fuzz_estimator|fuzz_planner) echo 512 ;; *) echo 16384 ;; esac; }

run_one() {
  local t=$1 bin=$build/fuzz/$1 dir=$work/$1
  if [[ ! -x $bin ]]; then echo "$t: not built ($bin); configure with -DMEMPLAN_FUZZ=ON" >&2; return 1; fi
  mkdir -p "$dir/corpus" "$dir/findings"
  local extra=()
  for s in $(seeds_of "$t"); do [[ -d $s ]] && extra+=("$s"); done
  local seed=()
  [[ -n ${FUZZ_SEED:-} ]] && seed=(-seed="$FUZZ_SEED")
  "$bin" "${seed[@]}" -max_total_time="$seconds" -timeout=2 -rss_limit_mb=4096 -max_len="$(max_len_of "$t")" \
         -dict="$here/config.dict" -print_final_stats=1 -artifact_prefix="$dir/findings/" \
         "$dir/corpus" "$here/corpus/$t" "${extra[@]}" >"$dir/log" 2>&1
  local rc=$?
  local runs cov corpus
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log" | tail -1)
  cov=$(grep -o 'cov: [0-9]* ft: [0-9]*' "$dir/log" | tail -1)
  corpus=$(find "$dir/corpus" -type f | wc -l)
  if [[ $rc -eq 0 ]]; then
    echo "$t: ${runs:-?} executions in ${seconds} s, ${cov:-cov ?}, working corpus $corpus files; no finding"
  else
    echo "$t: FINDING after ${runs:-?} executions (exit $rc); inputs in $dir/findings/, log $dir/log"
    grep -E 'ERROR|runtime error|invariant broken|SUMMARY|Test unit written' "$dir/log" | head -8 | sed 's/^/  /'
  fi
  return $rc
}

failed=0
pids=()
for t in "${targets[@]}"; do
  if [[ $jobs -gt 1 ]]; then
    run_one "$t" &
    pids+=($!)
    if [[ ${#pids[@]} -ge $jobs ]]; then wait "${pids[0]}" || failed=1; pids=("${pids[@]:1}"); fi
  else
    run_one "$t" || failed=1
  fi
done
for p in "${pids[@]}"; do wait "$p" || failed=1; done
exit $failed
