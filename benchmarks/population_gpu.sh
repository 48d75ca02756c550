#!/usr/bin/env bash
# The population's mended models on a GPU (tests/targets/population_gpu.py), and the cost gate's
# repeatability: lanes run side by side (at most three arms in flight), each lane its jobs one
# after another. Results, one JSON per job, go to $OUT/population-gpu.tgz with versions.txt and
# summary.md (benchmarks/bench_table.py over every bench JSON).
#
#   benchmarks/population_gpu.sh LANE...        LANE: JOB[,JOB...]
#   JOB: bench@TARGET@MODE[@train|@unsafe|@train+unsafe]   mend bench TARGET --arms original,mended
#        gate@TARGET@MODE@N    N separate `mend fix TARGET --bench` runs, each with a cache of
#                              its own (no verdict carried from one to the next)
#   e.g. benchmarks/population_gpu.sh bench@tests/targets/population_gpu.py::mend_target_ta_conformer@default
#
# Env: DEVICE (cuda; cpu gives the same sample's CPU figures), OUT (default ./population-gpu-out),
# DEADLINE (seconds from the start after which no job starts, and by which every job is stopped;
# default 540), DTYPE (float32), RUNS (20), WARMUP (3), TIMEOUT (seconds per arm, 150).
# MEND_EXTRA_SITE and .whl as in benchmarks/gpu_bench.sh.
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/population-gpu-out}"
DEADLINE="${DEADLINE:-540}"
RES="$(mktemp -d)"
START=$(date +%s)
mkdir -p "$OUT"
EXTRA="${MEND_EXTRA_SITE:-$PWD/build/gpu-site}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
[ -d "$EXTRA" ] && export PYTHONPATH="$PYTHONPATH:$EXTRA"
export PYTHONUNBUFFERED=1

python3 - > "$RES/versions.txt" 2>&1 <<'PY'
import importlib, importlib.metadata, platform
print("python:", platform.python_version())
for name in ("torch", "triton", "transformers", "torchaudio", "libcst"):
    try:
        importlib.import_module(name); print(f"{name}: {importlib.metadata.version(name)}")
    except Exception as exc:
        print(f"{name}: MISSING ({type(exc).__name__}: {exc})")
import torch
print("device:", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none")
PY
cat "$RES/versions.txt"

left() { echo $(( DEADLINE - ($(date +%s) - START) )); }

run_job() {  # one job; its JSON and stderr land in $RES
  local kind target mode extra stem i rc flags=""
  IFS=@ read -r kind target mode extra <<< "$1"
  stem="$RES/${kind}-${target##*::mend_target_}-${mode}${extra:+-$extra}"
  if [ "$(left)" -le 30 ]; then echo "skipped (deadline): $1" | tee "$stem.skipped"; return; fi
  case "$kind" in
    bench)
      case "$extra" in *train*) flags="$flags --train" ;; esac
      case "$extra" in *unsafe*) flags="$flags --unsafe-fixes" ;; esac
      echo "== $(date -u +%T) $1"
      timeout "$(left)" python3 -m graphmend bench "$target" --device "${DEVICE:-cuda}" --dtype "${DTYPE:-float32}" \
        --mode "$mode" --runs "${RUNS:-20}" --warmup "${WARMUP:-3}" --arms original,mended \
        --timeout "${TIMEOUT:-150}" $flags --quiet -f json -o "$stem.json" 2> "$stem.stderr.txt"
      rc=$?; echo "   $(date -u +%T) exit $rc $1" ;;
    gate)
      for i in $(seq 1 "$extra"); do
        [ "$(left)" -le 30 ] && { echo "skipped (deadline): $1 run $i"; break; }
        echo "== $(date -u +%T) $1 run $i"
        MEND_CACHE_DIR="$(mktemp -d)" timeout "$(left)" python3 -m graphmend fix "$target" --bench \
          --bench-device "${DEVICE:-cuda}" --bench-modes "$mode" --timeout "${TIMEOUT:-150}" -q -f json \
          -o "$stem-run$i.json" 2> "$stem-run$i.stderr.txt"
        rc=$?; echo "   $(date -u +%T) exit $rc $1 run $i"
      done ;;
    *) echo "population_gpu.sh: unknown job kind '$kind' in '$1' (bench@... or gate@...)" >&2 ;;
  esac
}

lane() { local job; IFS=, read -r -a jobs <<< "$1"; for job in "${jobs[@]}"; do run_job "$job"; done; }

for spec in "$@"; do lane "$spec" & done
wait
for f in "$RES"/bench-*.json; do
  [ -s "$f" ] && { echo "### $(basename "$f" .json)"; python3 benchmarks/bench_table.py "$f"; echo; }
done > "$RES/summary.md" 2>&1
cat "$RES/summary.md"
tar czf "$OUT/population-gpu.tgz" -C "$RES" .
