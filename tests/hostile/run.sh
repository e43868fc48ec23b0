#!/usr/bin/env bash
# The hostile corpus: runs every case of tests/data/hostile/MANIFEST through the memplan binary
# under a time limit and a memory limit, and checks its exit code, the start of its message and
# that an error carries a hint.
#
#   tests/hostile/run.sh MEMPLAN [CORPUS_DIR]
#
# HOSTILE_TIME   seconds a case may run (default 1); a case over it is run once more before it
#                fails, so a busy machine's hiccup is not a failure but a hang is
# HOSTILE_MEM_KB virtual-memory limit in KiB (default 4194304 = 4 GiB; "unlimited" for sanitizer
#                builds, whose shadow memory needs terabytes of address space)
#
# MANIFEST lines: ID | EXIT | EXPECTED | ARGS
#   EXPECTED  the start of the first line of stderr; "stdout:TEXT" for the first line of stdout,
#             "stdout@N:TEXT" for its line N
#   ARGS      memplan's arguments as shell words; {dir} is the corpus folder, {tmp} a fresh folder
#             holding the inputs made here (a FIFO, a folder, files too large to keep in git); a
#             leading VAR=value sets an environment variable for that case
set -uo pipefail

memplan=${1:?usage: run.sh MEMPLAN [CORPUS_DIR]}
dir=$(cd "${2:-$(dirname "$0")/../data/hostile}" && pwd)
time_limit=${HOSTILE_TIME:-1}
mem_kb=${HOSTILE_MEM_KB:-4194304}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/memplan-hostile-XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# ---- inputs made at test time ----------------------------------------------------------------------
mkfifo "$tmp/fifo.yaml"
mkdir "$tmp/folder.yaml"
ln -s loop.yaml "$tmp/loop.yaml"
# 10 MB: a DeepSpeed config with a 10 MB comment (read: JSON goes to 16 MiB), and the same size as
# YAML (refused: YAML stops at 1 MiB); 20 MB JSON (refused).
{ printf '{"train_micro_batch_size_per_gpu": 2, "_comment": "'; head -c 10000000 /dev/zero | tr '\0' x; printf '"}'; } >"$tmp/big10mb.json"
{ printf 'model: gpt2\nnote: '; head -c 10000000 /dev/zero | tr '\0' x; printf '\n'; } >"$tmp/big10mb.yaml"
{ printf '{"_comment": "'; head -c 20000000 /dev/zero | tr '\0' x; printf '"}'; } >"$tmp/huge20mb.json"
# 200,000 levels of nesting in each syntax.
{ head -c 200000 /dev/zero | tr '\0' '['; head -c 200000 /dev/zero | tr '\0' ']'; } >"$tmp/deep200k.json"
{ printf 'model: gpt2\nx: '; head -c 200000 /dev/zero | tr '\0' '{'; } >"$tmp/deep200k.yaml"
# 99,000 unknown keys (the value limit is 100,000): read in one pass, 1,000 looked at for typos.
{ printf '{"train_micro_batch_size_per_gpu": 1'; seq -f ', "key%.0f": 1' 1 99000; printf '}'; } >"$tmp/many_keys.json"
# One key per line, 1,000 characters each, as near the YAML limits as a real file gets.
{ printf 'model: gpt2\n'; for i in $(seq 1 900); do printf '%s%d: 1\n' "$(head -c 1000 /dev/zero | tr '\0' k)" "$i"; done; } >"$tmp/long_keys.yaml"
# A model name of 900 KB (no suggestion is computed for it).
{ printf 'model: '; head -c 900000 /dev/zero | tr '\0' a; printf '\n'; } >"$tmp/long_name.yaml"
cp "$dir/merge_keys.yaml" "$tmp/small.yaml"
# A model folder whose name holds a newline (emitters' header comments), and a config whose file
# name is not UTF-8 (--json prints it as U+FFFD, not exit 3).
mkdir "$tmp/model"$'\n'"x" && cp "$dir/evil_name_or_path.json" "$tmp/model"$'\n'"x/config.json"
printf 'model: gpt2\n' >"$tmp/bad"$'\xff'".yaml"
mkdir "$tmp/model"$'\xfe' && cp "$dir/evil_name_or_path.json" "$tmp/model"$'\xfe'"/config.json"
# trainer.devices listing 15,000 GPU indices: each checked for repeats once (a cubic check hung).
{ printf 'trainer:\n  devices: ['; seq -s, 0 14999 | tr -d '\n'; printf ']\nmodel:\n  class_path: mycode.Model\n'; } >"$tmp/lightning_devices_15k.yaml"

# ---- the cases ----------------------------------------------------------------------------------
trim() { local s=$1; s=${s#"${s%%[![:space:]]*}"}; printf '%s' "${s%"${s##*[![:space:]]}"}"; }
subst() { local s=${1//\{dir\}/$dir}; printf '%s' "${s//\{tmp\}/$tmp}"; }

run_case() {  # run_case ARGS...: sets rc, secs; output in $tmp/out, $tmp/err
  local env_args=()
  while [[ $# -gt 0 && $1 =~ ^[A-Z_]+= ]]; do env_args+=("$1"); shift; done
  local start end
  start=$(date +%s%N)
  (
    ulimit -v "$mem_kb" 2>/dev/null || ulimit -v "$mem_kb"
    exec env "${env_args[@]}" timeout -s KILL "$time_limit" "$memplan" "$@"
  ) >"$tmp/out" 2>"$tmp/err" <"$tmp/small.yaml"
  rc=$?
  end=$(date +%s%N)
  secs=$(( (end - start) / 1000000 ))
}

total=0 failed=0 retried=0 slowest=0 slowest_id=""
while IFS= read -r line || [[ -n $line ]]; do
  [[ -z $(trim "$line") || $line == \#* ]] && continue
  IFS='|' read -r id code expected args <<<"$line"
  id=$(trim "$id") code=$(trim "$code") expected=$(subst "$(trim "$expected")") args=$(subst "$(trim "$args")")
  eval "set -- $args"
  total=$((total + 1))
  run_case "$@"
  if [[ $rc -eq 137 || $rc -eq 124 ]]; then
    retried=$((retried + 1))
    echo "note: $id took over ${time_limit}s once; running it again"
    run_case "$@"
  fi
  [[ $secs -gt $slowest ]] && slowest=$secs slowest_id=$id
  stream=$tmp/err at=1
  if [[ $expected =~ ^stdout(@([0-9]+))?: ]]; then
    stream=$tmp/out at=${BASH_REMATCH[2]:-1} expected=${expected#"${BASH_REMATCH[0]}"}
  fi
  first=$(sed -n "${at}p" "$stream")
  problem=""
  if [[ $rc -eq 137 || $rc -eq 124 ]]; then problem="over ${time_limit}s (killed), twice"
  elif [[ $rc -ne $code ]]; then problem="exit $rc, expected $code"
  elif [[ $first != "$expected"* ]]; then problem="first line differs"
  elif [[ $code -eq 2 ]] && ! grep -q '^ *hint: ' "$stream"; then problem="no hint"
  elif [[ $code -eq 2 && $stream == "$tmp/err" ]] && [[ -s $tmp/out ]]; then problem="an error, but something on stdout"
  fi
  if [[ -n $problem ]]; then
    failed=$((failed + 1))
    echo "FAIL $id: $problem (${secs} ms)"
    echo "  expected: $expected"
    echo "  got:      $(head -c 300 <<<"$first")"
    sed -n '2,4p' "$tmp/err" | head -c 600 | sed 's/^/  stderr:   /'
  else
    echo "ok   $id (exit $rc, ${secs} ms)"
  fi
done <"$dir/MANIFEST"

echo "hostile corpus: $total cases, $failed failed, $retried run twice for time; slowest $slowest_id ${slowest} ms" \
     "(limits ${time_limit}s, ${mem_kb} KiB)"
[[ $failed -eq 0 && $total -gt 0 ]]
