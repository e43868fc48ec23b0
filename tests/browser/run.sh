#!/usr/bin/env bash
# tests/browser/run.sh MEMPLAN REPO OUT: memplan's reports opened in a real browser (Debian's
# chromium, headless; ./dev.sh test installs it). For every bundled example (examples/*.yaml, and
# ds_config.json with a model) and for the H200 run watched in tests/data/gpu/h200-knobs, the
# report is made with build/memplan, loaded, and the DOM the browser built is checked: every chart
# there with its labels, and nothing on the console (the check is first shown to catch a page that
# does log an error). Screenshots of the quickstart's report and of the watched run go to OUT
# (docs/report/*.png in the README are these). Exit 77 (skipped) without chromium, unless
# MEMPLAN_REQUIRE_BROWSER=1 (./dev.sh test sets it: CI must not skip it).
set -euo pipefail
memplan=$1
repo=$2
out=$3
browser=${MEMPLAN_BROWSER:-}
if [ -z "$browser" ]; then
  for b in chromium chromium-browser google-chrome; do
    if command -v "$b" >/dev/null 2>&1; then browser=$(command -v "$b"); break; fi
  done
fi
if [ -z "$browser" ]; then
  if [ "${MEMPLAN_REQUIRE_BROWSER:-0}" = 1 ]; then
    echo "browser test: no chromium, and MEMPLAN_REQUIRE_BROWSER=1 (./dev.sh test) needs it"
    exit 1
  fi
  echo "browser test: no chromium (./dev.sh test installs Debian's); skipped"
  exit 77
fi
rm -rf "$out"
mkdir -p "$out"
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# chromium headless, as root too (CI), with a throwaway profile; the console goes to stderr.
run_browser() {
  timeout 60 "$browser" --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir="$profile" \
    --enable-logging=stderr --v=0 "$@"
}

# DOM of a page into $2, its console lines into $3.
load() {
  run_browser --dump-dom "file://$1" >"$2" 2>"$3.all" || true
  grep -a ':CONSOLE' "$3.all" >"$3" || true
}

# 0. The console check catches a page that logs an error (else "no console errors" proves nothing).
probe="$out/probe.html"
printf '<!DOCTYPE html><html><body><p>probe</p><script>console.error("memplan-probe"); notDefined();</script></body></html>\n' >"$probe"
load "$probe" "$out/probe.dom" "$out/probe.console"
grep -q 'memplan-probe' "$out/probe.console" || fail "the browser's console is not captured (no memplan-probe line): the console check would be blind"
grep -q 'Uncaught ReferenceError' "$out/probe.console" || fail "an uncaught error does not reach the captured console"
grep -q '<p>probe</p>' "$out/probe.dom" || fail "--dump-dom gave no DOM for the probe page"

# check_report NAME FILE N_SVG LABEL...: the page loads, has N_SVG charts and every label, and logs nothing.
check_report() {
  local name=$1 file=$2 svgs=$3
  shift 3
  local dom="$out/$name.dom" console="$out/$name.console"
  load "$file" "$dom" "$console"
  local n
  n=$({ grep -o '<svg xmlns="http://www.w3.org/2000/svg"' "$dom" || true; } | wc -l)
  [ "$n" -eq "$svgs" ] || fail "$name: $n charts in the DOM, expected $svgs"
  local label
  for label in "$@"; do
    grep -qF -- "$label" "$dom" || fail "$name: no '$label' in the DOM"
  done
  if [ -s "$console" ]; then
    fail "$name: the console is not empty:"
    sed 's/^/    /' "$console"
  fi
  echo "ok: $name ($n charts, $(wc -c <"$file") bytes)"
}

# 1. Every bundled example's report.
examples=("$repo"/examples/*.yaml)
for ex in "${examples[@]}"; do
  name=$(basename "$ex" .yaml)
  if ! "$memplan" report --config "$ex" --out "$out/$name.html" >"$out/$name.out" 2>"$out/$name.err"; then
    fail "$name: memplan report failed: $(cat "$out/$name.err")"
    continue
  fi
  check_report "$name" "$out/$name.html" 5 'id="breakdown"' 'id="phases"' 'id="micro-batch"' 'id="seq-len"' 'id="layers"' \
    '>forward<' '>backward<' '>optimizer_step<' '>terms<' 'allocated ' 'reserved ' 'device ' 'saved for backward'
done
"$memplan" report --config "$repo/examples/ds_config.json" --model llama-3-8b --gpu a100-40gb --gpus 4 --out "$out/ds_config.html" >/dev/null
check_report ds_config "$out/ds_config.html" 5 'capacity 39.59 GiB (a100-40gb)' '90% target' 'largest that fits'
# The quickstart's labels in full: the card, every band, the sweeps.
check_report quickstart-labels "$out/quickstart.html" 5 'capacity 11.72 GiB (rtx-3060-12gb)' '90% target' '92% warning' \
  '95% critical' '97% emergency' 'largest that fits: ' '>micro-batch<' '>sequence length<'

# The quickstart with its plan: six charts, the pick marked.
"$memplan" report --config "$repo/examples/quickstart.yaml" --plan --out "$out/quickstart-plan.html" >/dev/null
check_report quickstart-plan "$out/quickstart-plan.html" 6 'id="plan"' '(the pick)' 'modelled tokens/s'
# With the H200 calibration run's probes: measured against estimated and held out.
"$memplan" report --config "$repo/examples/quickstart.yaml" --probes "$repo/tests/data/calibrate/h200-1a12cc5.json" \
  --out "$out/quickstart-probes.html" >/dev/null
check_report quickstart-probes "$out/quickstart-probes.html" 6 'id="probes"' '7 probes on NVIDIA H200' 'held out '

# 2. The watched H200 run against its estimate.
log="$repo/tests/data/gpu/h200-knobs/watch-qwen05.jsonl"
"$memplan" report --monitor-log "$log" --model qwen2.5-0.5b --micro-batch 8 --seq-len 1024 --grad-accum 2 --precision bf16 \
  --checkpointing full --framework hf-trainer --gpu h200 --transformers-version 5.17 --torch-version 2.11 --out "$out/watched-run.html" >/dev/null
check_report watched-run "$out/watched-run.html" 1 'GPU0 NVIDIA H200: peak 23.33 GiB' 'capacity 139.80 GiB' \
  'estimate: backward (peak): 23.25 GiB' '>exit 0<' '>seconds<'

# 3. Screenshots, as the README shows them.
shoot() {
  run_browser --screenshot="$2" --window-size="$3" --hide-scrollbars "file://$1" >/dev/null 2>&1 || true
  if [ ! -s "$2" ] || [ "$(head -c 8 "$2" | od -An -tx1 | tr -d ' \n')" != "89504e470d0a1a0a" ]; then
    fail "no PNG screenshot of $1"
    return
  fi
  [ "$(wc -c <"$2")" -gt 20000 ] || fail "$2: a screenshot of $(wc -c <"$2") bytes is too small to show the charts"
  echo "ok: screenshot $2 ($(wc -c <"$2") bytes)"
}
shoot "$out/quickstart.html" "$out/quickstart-report.png" 980,1500
shoot "$out/watched-run.html" "$out/watched-run-report.png" 980,760

if [ "$failures" -gt 0 ]; then
  echo "browser test: $failures failure(s)"
  exit 1
fi
echo "browser test: every report loaded with its charts and labels, nothing on the console"
