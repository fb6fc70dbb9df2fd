#!/usr/bin/env bash
# What an eager PyTorch step costs the host, and steps the eager model was not built on, in one
# command (about 3 minutes on an H200): for bf16 (autocast) and tf32,
# - `torch_bench.py --host-costs`: the host's seconds per layer kind, forward, backward and
#   optimizer (device.json `eager_host`), and `--kernel-rates`: the GPU's seconds per element
#   of the memory-bound layer kinds at large sizes (`eager_kernels`) and of GPT blocks' kernels
#   besides their products (`eager_blocks`); `calibrate import eager` puts them in a profile;
#   and `--kernels`: a host-speed probe (seconds per op issued, a whole step of tiny layers)
#   that another run's rows can be compared by (lent machines' hosts differ up to ~2x);
# - whole eager training steps of models and batches no profile was built from: ResNet-18,
#   ResNet-101 and VGG-16 (torchvision), CIFAR-10 ResNet-18, BERT-base, and ResNet-50, AlexNet
#   and GPT-2 at batches the earlier runs did not measure (step_times.csv, predicted with the
#   GPU's bundled profile).
#
#   calibrate/scripts/eager_session.sh OUT_DIR
#
# Each dtype's output is kept even when the other fails; the exit status is the first failure's.
set -uo pipefail
out=${1:?usage: eager_session.sh OUT_DIR}
py=${PYTHON:-python3}
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | tr ' ' '_')
case "$gpu" in
  *H200*) profile=data/profiles/h200_sxm_node.json ;;
  *H100*) profile=data/profiles/h100_sxm_node.json ;;
  *) profile=data/profiles/default.json ;;
esac
status=0
for dt in bf16 tf32; do
  mkdir -p "$out/eager_$dt"
  PYTHONUNBUFFERED=1 timeout "${STEP_TIMEOUT:-400}" "$py" calibrate/scripts/torch_bench.py \
    --device cuda --dtype "$dt" --out "$out/eager_$dt" --label "${gpu:-gpu} ($(hostname))" \
    --host-costs --kernel-rates --kernels --no-trace --no-layers --no-gemm --profile "$profile" \
    --models resnet18,resnet101,vgg16,resnet18_cifar,bert_base,resnet50,alexnet,gpt2 \
    --batches resnet18=16,64 resnet101=16,32 vgg16=16,32 resnet18_cifar=32,128,512 \
    bert_base=8,32 resnet50=4,128 alexnet=16,512 gpt2=2,32 2>&1 | tee "$out/eager_$dt.log"
  rc=${PIPESTATUS[0]}
  [ "$rc" -eq 0 ] || { echo "=== $dt failed with $rc" >&2; [ $status -ne 0 ] || status=$rc; }
done
exit $status
