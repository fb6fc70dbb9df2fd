#!/usr/bin/env bash
# Everything a GPU machine is for, in one command: `calibrate gpu` (inventory, copies, P2P, cuBLAS
# GEMM grid and the catalog models' layer GEMMs, NCCL collectives in nccl-tests' format), then
# single-GPU PyTorch training of ResNet-50, AlexNet, GPT-2 and GPT 1.3B at several batch sizes
# (step times, each CNN layer alone, a profiler trace) in TF32 and BF16, then the profiles built
# from them and `dtsim validate` of the measured steps against dtsim's predictions. Run on an
# H200 on 2026-11-27 (data/runs/gpu/h200_vm): about 3 minutes, and 2 more for the compiled GPTs.
#
#   calibrate/scripts/gpu_session.sh OUT_DIR [BIN_DIR]
#
# BIN_DIR holds release builds of `calibrate` and `dtsim` (default target/release): build them on
# a machine with Rust (`cargo build --release -p calibrate -p sim`) and copy them along; they load
# the CUDA driver, cuBLAS and NCCL at run time, including the copies inside PyTorch's pip wheels.
# Each step's output is kept even when a later one fails; the exit status is the first failure's.
# Copy OUT_DIR to data/runs/gpu/MACHINE and the two profiles to data/profiles/ to commit them.
#
# Environment: MODELS (default resnet50,alexnet,gpt2,gpt_1_3b: torch_bench's step models and the
# layer GEMMs calibrate times), LAYER_BATCHES (1,2,8,32), SMALL_MODELS (default
# resnet18_cifar,bert_base: small models stepped and their layer GEMMs timed at SMALL_BATCHES,
# default 8,32,128,512,2048, in a second `calibrate gpu` whose GEMMs join the first's; empty to
# skip), STEP_TIMEOUT (seconds any one step may take, default 900; TIMEOUT_<step> for one step: a
# machine lent for minutes keeps whatever the earlier steps measured). Run on an H100 on
# 2026-11-27 (data/runs/gpu/h100_vm, in two parts): 392 s and 157 s.
set -uo pipefail
out=${1:?usage: gpu_session.sh OUT_DIR [BIN_DIR]}
bin=${2:-target/release}
py=${PYTHON:-python3}
mkdir -p "$out/logs" "$out/torch_tf32" "$out/torch_bf16"
status=0
models=${MODELS:-resnet50,alexnet,gpt2,gpt_1_3b}
small=${SMALL_MODELS-resnet18_cifar,bert_base}
step_timeout=${STEP_TIMEOUT:-900}
run() { # name, command...: logs to OUT/NAME.log, remembers the first failure
  local name=$1; shift
  echo "=== $name: $*" >&2
  local limit="TIMEOUT_$name" # a step's own limit, e.g. TIMEOUT_torch_bf16=300
  timeout "${!limit:-$step_timeout}" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  tail -n 40 "$out/$name.log" >&2
  [ $rc -eq 0 ] || { echo "=== $name failed with $rc" >&2; [ $status -ne 0 ] || status=$rc; }
}

command -v nvidia-smi >/dev/null && nvidia-smi -q >"$out/nvidia_smi.txt" 2>&1
host=$(hostname)
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | tr ' ' '_')
tag=$(echo "${gpu:-gpu}" | tr 'A-Z' 'a-z' | tr -cd 'a-z0-9_')

# Copies, the GEMM grid, every layer GEMM of the models (tf32, bf16) and NCCL: the profile's
# compute section, with each layer GEMM's time (on an H200: about 15 s).
run calibrate_gpu "$bin/calibrate" gpu --out "$out/${tag}_measured.json" --logs "$out/logs" \
  --max-bytes "${MAX_BYTES:-1GiB}" --warmup 3 --reps 10 --layer-models "$models" \
  --layer-batches "${LAYER_BATCHES:-1,2,8,32}" --layer-dtypes tf32,bf16
# The small models' layer GEMMs at their large batches (CIFAR ResNet-18's study runs to 2048),
# joined with the first run's into one compute section.
if [ -n "$small" ]; then
  mkdir -p "$out/logs_small"
  run calibrate_gpu_small "$bin/calibrate" gpu --out "$out/${tag}_small.json" \
    --logs "$out/logs_small" --max-bytes 4MiB --warmup 3 --reps 10 --layer-models "$small" \
    --layer-batches "${SMALL_BATCHES:-8,32,128,512,2048}" --layer-dtypes tf32,bf16
  [ -e "$out/logs_small/gpu_measurements.json" ] && run import_joined "$bin/calibrate" import \
    gpu-measurements "$out/logs/gpu_measurements.json" "$out/logs_small/gpu_measurements.json" \
    --out "$out/${tag}_measured.json"
  models="$models,$small"
fi
for dt in bf16 tf32; do
  run "torch_$dt" env PYTHONUNBUFFERED=1 "$py" calibrate/scripts/torch_bench.py --device cuda \
    --dtype "$dt" --out "$out/torch_$dt" --label "$gpu ($host)" --models "$models" --kernels \
    --profile "data/profiles/${tag}_measured.json;data/profiles/${tag}_torch.json"
done
# The GPTs as fused training runs them: torch's fused attention, eager and torch.compile'd.
gpts=$(echo "$models" | tr ',' '\n' | grep -E '^(gpt|bert)' | paste -sd, -)
one_batch=""  # compiling takes a minute a model: one batch each
for m in ${gpts//,/ }; do
  case $m in
    gpt2) one_batch="$one_batch gpt2=8" ;;
    gpt_1_3b) one_batch="$one_batch gpt_1_3b=2" ;;
    bert_base) one_batch="$one_batch bert_base=32" ;;
  esac
done
if [ -n "$gpts" ]; then
  run torch_bf16_sdpa env PYTHONUNBUFFERED=1 "$py" calibrate/scripts/torch_bench.py --device cuda \
    --dtype bf16 --out "$out/torch_bf16_sdpa" --label "$gpu ($host)" --models "$gpts" \
    --attention sdpa --no-layers --no-gemm --no-trace --profile "data/profiles/${tag}_measured.json"
  run torch_bf16_sdpa_compiled env PYTHONUNBUFFERED=1 "$py" calibrate/scripts/torch_bench.py \
    --device cuda --dtype bf16 --out "$out/torch_bf16_sdpa_compiled" --label "$gpu ($host)" \
    --models "$gpts" --batches $one_batch --attention sdpa --compile --steps 10 \
    --warmup 3 --no-layers --no-gemm --no-trace --profile "data/profiles/${tag}_measured.json"
fi
# A profile from what PyTorch measured (GEMMs at the layer shapes, copy rate, each layer alone).
run import_device "$bin/calibrate" import torch-device "$out/torch_tf32/device.json" \
  --out "$out/${tag}_torch.json"
run import_device_bf16 "$bin/calibrate" import torch-device "$out/torch_bf16/device.json" \
  --out "$out/${tag}_torch.json"
for dt in tf32 bf16; do
  run "import_layers_$dt" "$bin/calibrate" import layer-times "$out/torch_$dt/layer_times.csv" \
    --out "$out/${tag}_torch.json" --measured-on "$gpu ($host)"
done
for trace in "$out"/torch_*/trace_*.json.gz; do
  [ -e "$trace" ] && run "kineto_$(basename "$(dirname "$trace")")_$(basename "$trace" .json.gz)" \
    "$bin/calibrate" import kineto "$trace"
done
# Predicted vs measured with the profiles as they will sit in data/profiles/.
mkdir -p data/profiles
cp "$out/${tag}_measured.json" "$out/${tag}_torch.json" data/profiles/ 2>/dev/null
run validate "$bin/dtsim" validate "$out"/torch_*/step_times.csv --out "$out/validation"
exit $status
