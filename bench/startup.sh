#!/usr/bin/env bash
# Whole-process speed and memory of memplan as users run it (CI gates, pre-commit hooks, shell
# loops), beside the in-process figures of build/bench/memplan_bench. Prints a table.
#   bench/startup.sh [BUILD_DIR] [RUNS]      (defaults: build, 30)
# Wall times are hyperfine's median over RUNS runs (after 5 warm-ups); peak RSS is the median of
# /usr/bin/time's maximum resident set size over RUNS runs. Bars: the estimate's median <= 5 ms and
# <= 20 MiB, check over 1,000 configs < 2 s (issue 10); the quickstart rows' (issue 49, above).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
runs=${2:-30}
memplan="$build/memplan"
for tool in hyperfine /usr/bin/time; do
  command -v "$tool" >/dev/null || { echo "bench/startup.sh: needs $tool (apt-get install hyperfine time; ./dev.sh test installs both)" >&2; exit 2; }
done
[ -x "$memplan" ] || { echo "bench/startup.sh: no $memplan (build first: ./dev.sh build)" >&2; exit 2; }

work=$(mktemp -d /tmp/memplan-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
# 1,000 configs for check: a preset model on a preset card, micro-batch 1..8.
mkdir -p "$work/configs"
for i in $(seq 1 1000); do
  printf 'model:\n  preset: llama-3.2-1b\nhardware:\n  gpu: a100-80gb\ntraining:\n  micro_batch_size: %d\n  seq_len: 1024\n  precision: amp-bf16\n' \
    $((i % 8 + 1)) > "$work/configs/c$i.yaml"
done

# name | command | wall bar (ms, 0: none) | RSS bar (MiB, 0: none)
# The quickstart rows are issue 49's: --version within 1.5x of an empty C++ program (its bar here is
# that figure, measured first), estimate <= 5 ms, fit <= 10 ms, plan <= 3x estimate.
empty="$build/bench/memplan_empty"
cases=()
[ -x "$empty" ] && cases+=("empty C++ program|$empty|0|0")
cases+=(
  "version|$memplan --version|0|0"
  "estimate quickstart|$memplan estimate --config examples/quickstart.yaml|5|20"
  "fit quickstart|$memplan fit --config examples/quickstart.yaml|10|0"
  "plan quickstart --global-batch 32|$memplan plan --config examples/quickstart.yaml --global-batch 32|0|0"
  "estimate llama-3-8b --json|$memplan estimate --model llama-3-8b --gpu a100-80gb --micro-batch 4 --seq-len 2048 --json|5|20"
  "fit llama-3.2-1b on rtx-3060|$memplan fit --model llama-3.2-1b --gpu rtx-3060-12gb --micro-batch 4 --seq-len 1024 --precision amp-bf16|0|0"
  "plan llama-3-8b 4 x a100-40gb|$memplan plan --model llama-3-8b --gpu a100-40gb --gpus 4 --global-batch 256 --seq-len 2048|0|0"
  "check 1,000 configs|$memplan check $work/configs|2000|0"
)

median() { sort -n | awk '{a[NR]=$1} END {if (NR % 2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

printf '%-30s %12s %10s %10s %14s  %s\n' "whole process" "median ms" "min ms" "max ms" "peak RSS MiB" "bar"
for c in "${cases[@]}"; do
  IFS='|' read -r name cmd wall_bar rss_bar <<<"$c"
  # memplan exits 1 for "does not fit": a verdict, not a failure of the run.
  hyperfine -N --warmup 5 --runs "$runs" -i --export-csv "$work/h.csv" "$cmd" >/dev/null 2>&1
  IFS=',' read -r _ mean _ med _ _ min max < <(tail -n 1 "$work/h.csv")
  rss=$(for _ in $(seq 1 "$runs"); do { /usr/bin/time -f '%M' $cmd 2>&1 >/dev/null || true; } | tail -n 1; done | median)
  med_ms=$(awk -v s="$med" 'BEGIN {printf "%.2f", s * 1000}')
  bar=""
  if [ "$wall_bar" != 0 ]; then
    bar=$(awk -v m="$med_ms" -v b="$wall_bar" 'BEGIN {printf "%s <= %s ms", (m <= b ? "meets" : "MISSES"), b}')
  fi
  if [ "$rss_bar" != 0 ]; then
    bar="$bar, "$(awk -v r="$rss" -v b="$rss_bar" 'BEGIN {printf "%s <= %s MiB", (r / 1024 <= b ? "meets" : "MISSES"), b}')
  fi
  [ "$name" = "empty C++ program" ] && empty_ms=$med_ms
  if [ "$name" = version ] && [ -n "${empty_ms:-}" ]; then
    bar=$(awk -v m="$med_ms" -v e="$empty_ms" 'BEGIN {printf "%s <= 1.5 x empty (%.2fx)", (m <= 1.5 * e ? "meets" : "MISSES"), m / e}')
  fi
  [ "$name" = "estimate quickstart" ] && est_ms=$med_ms
  if [ "$name" = "plan quickstart --global-batch 32" ] && [ -n "${est_ms:-}" ]; then
    bar=$(awk -v m="$med_ms" -v e="$est_ms" 'BEGIN {printf "%s <= 3 x estimate (%.1fx)", (m <= 3 * e ? "meets" : "MISSES"), m / e}')
  fi
  printf '%-30s %12s %10.2f %10.2f %14.1f  %s\n' "$name" "$med_ms" "$(awk -v s="$min" 'BEGIN {print s * 1000}')" \
    "$(awk -v s="$max" 'BEGIN {print s * 1000}')" "$(awk -v r="$rss" 'BEGIN {print r / 1024}')" "$bar"
done

if [ -x "$build/bench/memplan_bench" ]; then
  echo
  echo "in process (build/bench/memplan_bench, Google Benchmark):"
  "$build/bench/memplan_bench" --benchmark_format=console 2>/dev/null | grep -E '^(BM_|Benchmark|-)' || true
fi
