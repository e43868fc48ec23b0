#!/usr/bin/env bash
# How long memplan report takes to write, and a browser to open, the report of models of 12 to 48
# layers (issue 27's bar: a 48-layer model's report opens in under a second). Prints a table.
#   bench/report.sh [BUILD_DIR] [RUNS]      (defaults: build, 5)
# write: memplan report's wall time. load: headless chromium, a page that puts the report in an
# iframe and notes performance.now() at the iframe's load event (fetch, parse, the SVG's DOM; the
# page's own start excluded). shown: chromium's wall time to a full-page screenshot of the report
# (load, layout, paint) minus the same for a blank page. Medians over RUNS runs each.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
runs=${2:-5}
memplan="$build/memplan"
[ -x "$memplan" ] || { echo "bench/report.sh: no $memplan (build first: ./dev.sh build)" >&2; exit 2; }
browser=$(command -v chromium || command -v chromium-browser || true)
[ -n "$browser" ] || { echo "bench/report.sh: needs chromium (./dev.sh test installs it)" >&2; exit 2; }
work=$(mktemp -d /tmp/memplan-report-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT

median() { sort -n | awk '{a[NR]=$1} END {if (NR % 2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }
chrome() { "$browser" --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir="$work/profile" "$@" 2>/dev/null; }

echo '<!DOCTYPE html><html><body><p>blank</p></body></html>' >"$work/blank.html"
shot_ms() {  # wall ms of a full-page screenshot of $1
  local s e
  s=$(now_ms)
  chrome --hide-scrollbars --window-size=980,3000 --screenshot="$work/shot.png" "file://$1" >/dev/null || true
  e=$(now_ms)
  echo $((e - s))
}
blank=$(for _ in $(seq "$runs"); do shot_ms "$work/blank.html"; done | median)

# model | layers
cases=("gpt2|12" "gpt2-medium|24" "gpt2-xl|48" "qwen3-30b-a3b|48 (MoE, 128 experts)")
printf '%-16s %-22s %10s %10s %10s %10s\n' "model" "layers" "bytes" "write ms" "load ms" "shown ms"
for c in "${cases[@]}"; do
  IFS='|' read -r model layers <<<"$c"
  report="$work/$model.html"
  write=$(for _ in $(seq "$runs"); do
    s=$(now_ms)
    "$memplan" report --model "$model" --gpu h100-80gb --seq-len 1024 --micro-batch 4 --out "$report" --force >/dev/null
    e=$(now_ms)
    echo $((e - s))
  done | median)
  cat >"$work/wrap.html" <<EOF
<!DOCTYPE html><html><head><title>pending</title></head><body><script>
const t0 = performance.now();
const f = document.createElement('iframe');
f.style.width = '1000px'; f.style.height = '4000px';
f.onload = () => { document.title = 'loaded ' + (performance.now() - t0).toFixed(1); };
f.src = '$model.html';
document.body.appendChild(f);
</script></body></html>
EOF
  load=$(for _ in $(seq "$runs"); do chrome --dump-dom "file://$work/wrap.html" | sed -n 's/.*<title>loaded \([0-9.]*\)<\/title>.*/\1/p'; done | median)
  shown=$(for _ in $(seq "$runs"); do echo $(($(shot_ms "$report") - blank)); done | median)
  printf '%-16s %-22s %10s %10s %10s %10s\n' "$model" "$layers" "$(wc -c <"$report")" "$write" "${load:-?}" "$shown"
done
echo "(blank page screenshot: $blank ms, subtracted from shown)"
