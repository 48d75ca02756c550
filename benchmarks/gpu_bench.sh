#!/usr/bin/env bash
# GPU bench reports: `mend bench` on CUDA (Inductor -> Triton), fp16, in
# default and reduce-overhead modes, for corpus targets and three transformers models.
#
#   benchmarks/gpu_bench.sh [corpus|families|hf|all] [default|reduce-overhead|both]     (defaults: all both)
#
# Run from the repository root; writes one JSON report and its Markdown rendering per
# (set, mode) to $OUT (default ./gpu-bench-out), plus versions.txt. Each invocation stays
# well under 10 minutes per set and mode, so they can be run one call at a time.
# Needs torch with CUDA, transformers (hf set), typer + rich (the CLI) and libcst (mend fix,
# for the mended arm). A folder of extra packages can be carried and put on the path:
#   pip install --target build/gpu-site --python-version 3.12 --only-binary=:all: \
#       --platform manylinux2014_x86_64 typer rich libcst        (here: match the GPU box's Python)
#   then delete from it what the box has (typing_extensions; PYTHONPATH comes before site-packages,
#   so only packages the box lacks may be there) and carry build/gpu-site.
# MEND_EXTRA_SITE names the folder (default .gpu-site, or build/gpu-site when that exists). Env: OUT, RUNS, WARMUP, TIMEOUT, MEND_TARGETS,
# MEND_BENCH_FLAGS (extra `mend bench` flags, e.g. --unsafe-fixes or --train), ARMS (default all four),
# STEM_SUFFIX (appended to the output names, e.g. -train).
# Without libcst the mended arm is reported as unavailable, with the reason; the others run.
set -u
cd "$(dirname "$0")/.."
SET="${1:-all}"
MODES="${2:-both}"
OUT="${OUT:-$PWD/gpu-bench-out}"
RUNS="${RUNS:-50}"
WARMUP="${WARMUP:-10}"
TIMEOUT="${TIMEOUT:-240}"
mkdir -p "$OUT"
EXTRA="${MEND_EXTRA_SITE:-$PWD/.gpu-site}"
[ -z "${MEND_EXTRA_SITE:-}" ] && [ ! -d "$EXTRA" ] && [ -d "$PWD/build/gpu-site" ] && EXTRA="$PWD/build/gpu-site"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
[ -d "$EXTRA" ] && export PYTHONPATH="$PYTHONPATH:$EXTRA"

# corpus targets that have a hand-fixed reference (mended vs reference is the goal figure)
CORPUS_TARGETS=(
  corpus/mlp_stack.py::mend_target_mlp_stack
  corpus/attention.py::mend_target_padded_attention
  corpus/moe.py::mend_target_moe_router
  corpus/norms.py::mend_target_rmsnorm_item_stats
  corpus/rotary.py::mend_target_rotary_ntk_scaling
  corpus/losses.py::mend_target_lm_loss_guards
  corpus/audio.py::mend_target_audio_frame_masking
  corpus/decoding.py::mend_target_early_exit_decoder
)
# every corpus target with a verified fix, one or more per fix family (where, side effects,
# guards, host scalars, unbacked sizes, hoisting, the opaque MoE op, the Hugging Face models)
FAMILY_TARGETS=(
  corpus/attention.py::mend_target_padded_attention
  corpus/audio.py::mend_target_audio_utterance_norm
  corpus/cache.py::mend_target_kv_cache_update
  corpus/cache.py::mend_target_sliding_cache_warning_once
  corpus/decoding.py::mend_target_repetition_penalty_and_or
  corpus/detection.py::mend_target_box_score_filter
  corpus/losses.py::mend_target_lm_loss_guards
  corpus/losses.py::mend_target_masked_token_loss
  corpus/mlp_stack.py::mend_target_mlp_stack
  corpus/moe.py::mend_target_moe_router
  corpus/moe.py::mend_target_moe_topk_dispatch
  corpus/norms.py::mend_target_rmsnorm_item_stats
  corpus/rotary.py::mend_target_longrope_ternary
  corpus/hf_models.py::mend_target_hf_bigbird
  corpus/hf_models.py::mend_target_hf_reformer
  corpus/hf_models.py::mend_target_hf_switch_transformers
  corpus/hf_models.py::mend_target_hf_xlm
  corpus/hf_models.py::mend_target_hf_nllb_moe
)
HF_TARGETS=(
  corpus/hf_models.py::mend_target_hf_xlm
  corpus/hf_models.py::mend_target_hf_switch_transformers
  corpus/hf_models.py::mend_target_hf_longformer
)

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  python3 - <<'PY'
import importlib, platform
print("python:", platform.python_version())
for name in ("torch", "triton", "transformers", "libcst", "typer", "rich"):
    try:
        m = importlib.import_module(name)
        print(f"{name}: {getattr(m, '__version__', '?')}")
    except Exception as exc:
        print(f"{name}: MISSING ({type(exc).__name__})")
try:
    import torch
    print("cuda:", torch.version.cuda, "| device:", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none")
except Exception:
    pass
PY
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null
} > "$OUT/versions.txt" 2>&1
cat "$OUT/versions.txt"

case "$MODES" in both) MODE_LIST=(default reduce-overhead) ;; *) MODE_LIST=("$MODES") ;; esac
case "$SET" in all) SETS=(corpus hf) ;; *) SETS=("$SET") ;; esac

status=0
for set_name in "${SETS[@]}"; do
  case "$set_name" in
    corpus) TARGETS=("${CORPUS_TARGETS[@]}") ;;
    families) TARGETS=("${FAMILY_TARGETS[@]}") ;;
    *) TARGETS=("${HF_TARGETS[@]}") ;;
  esac
  # MEND_TARGETS="a.py::t b.py::u" replaces the list (a quick check, or one target per call)
  [ -n "${MEND_TARGETS:-}" ] && read -r -a TARGETS <<< "$MEND_TARGETS"
  for mode in "${MODE_LIST[@]}"; do
    stem="$OUT/bench-$set_name-$mode-fp16${STEM_SUFFIX:-}"
    echo "== $set_name / $mode -> $stem.{json,md}"
    python3 -m graphmend bench "${TARGETS[@]}" --device cuda --dtype float16 --mode "$mode" \
      --runs "$RUNS" --warmup "$WARMUP" --arms "${ARMS:-eager,original,mended,reference}" --timeout "$TIMEOUT" --quiet --format json --output "$stem.json" \
      ${MEND_BENCH_FLAGS:-} \
      2> "$stem.stderr.txt"
    rc=$?
    echo "   exit $rc (0 ok, 1 an arm failed or mismatched, 2 usage/internal error)"
    [ $rc -gt $status ] && status=$rc
    if [ -s "$stem.json" ]; then
      python3 -m graphmend report "$stem.json" --format md --output "$stem.md" \
        || python3 benchmarks/bench_table.py "$stem.json" > "$stem.md"
      python3 benchmarks/bench_table.py "$stem.json" > "$stem.table.md"
      cat "$stem.table.md"
    fi
    tail -n 5 "$stem.stderr.txt"
  done
done
exit $status
