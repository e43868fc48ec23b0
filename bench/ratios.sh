#!/usr/bin/env bash
# The CI speed check (ctest speed_ratios): ratios of whole-process times measured in one run on
# whatever machine runs it, never an absolute time. Each command runs RUNS times (hyperfine, after
# warm-ups); its fastest run stands for it, the figure least moved by a busy machine.
#   bench/ratios.sh [BUILD_DIR] [RUNS]      (defaults: build, 15)
# Prints a table: each ratio, its target (issue 49: --version within 1.5x of an empty C++ program,
# estimate within 2x of --version, plan within 3x of estimate, all on examples/quickstart.yaml) and
# its guard. A ratio over its guard fails the check (exit 1): a regression. The guards are the
# targets where memplan meets them, else the figure this machine measured when the guard was set
# with about a third of room; a target missed prints MISSES and how far.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
runs=${2:-15}
memplan="$build/memplan"
empty="$build/bench/memplan_empty"
for f in "$memplan" "$empty"; do
  [ -x "$f" ] || { echo "bench/ratios.sh: no $f (build first: ./dev.sh build)" >&2; exit 2; }
done
command -v hyperfine >/dev/null || { echo "bench/ratios.sh: needs hyperfine (apt-get install hyperfine; ./dev.sh test installs it)" >&2; exit 2; }
work=$(mktemp -d /tmp/memplan-ratios.XXXXXX)
trap 'rm -rf "$work"' EXIT

config=examples/quickstart.yaml
# name | command
cases=(
  "empty|$empty"
  "version|$memplan --version"
  "estimate|$memplan estimate --config $config"
  "fit|$memplan fit --config $config"
  "plan|$memplan plan --config $config --global-batch 32"
)
declare -A ms
for c in "${cases[@]}"; do
  IFS='|' read -r name cmd <<<"$c"
  # memplan exits 1 for "does not fit": a verdict, not a failure of the run (-i).
  hyperfine -N -i --warmup 3 --runs "$runs" --export-csv "$work/$name.csv" "$cmd" >/dev/null 2>&1
  IFS=',' read -r _ _ _ _ _ _ min _ < <(tail -n 1 "$work/$name.csv")
  ms[$name]=$(awk -v s="$min" 'BEGIN {printf "%.3f", s * 1000}')
done

# ratio | numerator | denominator | target | guard
checks=(
  "version / empty|version|empty|1.5|2"
  "estimate / version|estimate|version|2|8"
  "fit / estimate|fit|estimate|2|4"
  "plan / estimate|plan|estimate|3|16"
)
printf '%-20s %10s %10s %8s %8s %8s  %s\n' "ratio" "num ms" "den ms" "ratio" "target" "guard" "verdict"
fail=0
for c in "${checks[@]}"; do
  IFS='|' read -r name num den target guard <<<"$c"
  r=$(awk -v a="${ms[$num]}" -v b="${ms[$den]}" 'BEGIN {printf "%.2f", a / b}')
  verdict=$(awk -v r="$r" -v t="$target" -v g="$guard" 'BEGIN {
    if (r > g) printf "REGRESSION: over the guard";
    else if (r <= t) printf "meets the target";
    else printf "MISSES the target by %.1fx (within the guard)", r / t }')
  printf '%-20s %10s %10s %8s %8s %8s  %s\n' "$name" "${ms[$num]}" "${ms[$den]}" "$r" "$target" "$guard" "$verdict"
  case "$verdict" in REGRESSION*) fail=1 ;; esac
done
exit $fail
