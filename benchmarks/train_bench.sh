#!/usr/bin/env bash
# Training-step bench reports: `mend bench --train` on CUDA (Inductor ->
# Triton), float32, SGD, for every corpus target with a hand-fixed reference and two
# transformers models, in the compile modes given.
#
#   benchmarks/train_bench.sh [default|reduce-overhead|both] [corpus|hf|all]   (defaults: both all)
#
# One JSON report per (target, mode) in $OUT (default ./train-bench-out), plus one summary
# table per mode. Targets run 3 at a time (each bench runs its arms one after another, each
# arm in its own process and Inductor cache), so a set stays within a 10-minute call.
# Env: OUT, RUNS, WARMUP, TIMEOUT, PARALLEL, MEND_TARGETS (replaces the list).
set -u
cd "$(dirname "$0")/.."
MODES="${1:-both}"
SET="${2:-all}"
OUT="${OUT:-$PWD/train-bench-out}"
RUNS="${RUNS:-20}"
WARMUP="${WARMUP:-5}"
TIMEOUT="${TIMEOUT:-240}"
PARALLEL="${PARALLEL:-3}"
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1

CORPUS_TARGETS=(
  corpus/training.py::mend_target_gradient_checkpointing
  corpus/training.py::mend_target_logged_aux_loss
  corpus/training.py::mend_target_layerdrop
  corpus/training.py::mend_target_loss_guard
  corpus/mlp_stack.py::mend_target_mlp_stack
  corpus/attention.py::mend_target_padded_attention
  corpus/moe.py::mend_target_moe_router
  corpus/norms.py::mend_target_rmsnorm_item_stats
  corpus/rotary.py::mend_target_rotary_ntk_scaling
  corpus/losses.py::mend_target_lm_loss_guards
  corpus/losses.py::mend_target_masked_token_loss
  corpus/audio.py::mend_target_audio_frame_masking
  corpus/audio.py::mend_target_audio_utterance_norm
  corpus/decoding.py::mend_target_early_exit_decoder
)
HF_TARGETS=(
  corpus/hf_models.py::mend_target_hf_bigbird
  corpus/hf_models.py::mend_target_hf_xlm
)
case "$MODES" in both) MODE_LIST=(default reduce-overhead) ;; *) MODE_LIST=("$MODES") ;; esac
case "$SET" in all) TARGETS=("${CORPUS_TARGETS[@]}" "${HF_TARGETS[@]}") ;; corpus) TARGETS=("${CORPUS_TARGETS[@]}") ;;
  *) TARGETS=("${HF_TARGETS[@]}") ;; esac
[ -n "${MEND_TARGETS:-}" ] && read -r -a TARGETS <<< "$MEND_TARGETS"

one() {  # target mode
  local stem="$OUT/train-$(basename "${1%%::*}" .py)-${1##*::}-$2"
  python3 -m graphmend bench "$1" --train --device cuda --mode "$2" --runs "$RUNS" --warmup "$WARMUP" \
    --timeout "$TIMEOUT" --quiet --format json --output "$stem.json" 2> "$stem.stderr.txt"
  echo "$1 [$2]: exit $?"
}
for mode in "${MODE_LIST[@]}"; do
  for t in "${TARGETS[@]}"; do
    while [ "$(jobs -rp | wc -l)" -ge "$PARALLEL" ]; do wait -n; done
    one "$t" "$mode" &
  done
  wait
  ls "$OUT"/train-*-"$mode".json >/dev/null 2>&1 && \
    python3 benchmarks/bench_table.py --summary "$OUT"/train-*-"$mode".json > "$OUT/summary-$mode.md"
done
cat "$OUT"/summary-*.md 2>/dev/null
