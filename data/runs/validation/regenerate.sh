#!/usr/bin/env bash
# Rewrites every folder of data/runs/validation/ with `dtsim validate --out` (the commands in
# this folder's README), or with --check writes them into a scratch folder and fails naming
# every folder whose predictions.csv or errors.csv differ from the committed ones: the README's
# tables and every run's track record (`dtsim run` reads these files back) must be what this
# commit's model predicts. Run from anywhere; DTSIM names the binary (default: the release
# build, `cargo build --release -p sim`).
set -euo pipefail
cd "$(dirname "$0")/../../.."
dtsim="${DTSIM:-target/release/dtsim}"
check=false
[ "${1:-}" = "--check" ] && check=true
out_root=data/runs/validation
if $check; then
  out_root="$(mktemp -d)"
  trap 'rm -rf "$out_root"' EXIT
fi

# folder, then the datasets and options of its `dtsim validate`. A folder whose tables are not
# on this machine (the shared ones live beside the repository, in ../shared/validation) is
# skipped, and said.
validate() {
  local folder=$1
  shift
  for a in "$@"; do
    if [[ $a == *.csv && ! -f $a ]]; then
      echo "skipped $folder: $a is not on this machine"
      return 0
    fi
  done
  "$dtsim" validate "$@" --out "$out_root/$folder" >/dev/null 2>"$out_root/.stderr" || {
    echo "dtsim validate for $folder failed:" >&2
    cat "$out_root/.stderr" >&2
    exit 1
  }
}

mkdir -p "$out_root"
for dir in data/runs/validation/testbed_*/; do
  folder=$(basename "$dir")
  case $folder in
    testbed_gloo) src=data/runs/testbed_gloo_collectives.csv ;;
    testbed_mpi) src=data/runs/testbed_mpi_allreduce.csv ;;
    *) src=data/runs/$folder.csv ;;
  esac
  validate "$folder" "$src"
done
for name in azure_nd_single_node_allreduce gcp_a3mega_2node_h100_allreduce \
  autodl_2x2080ti_pcie_noP2P_nccl; do
  validate "$name" "../shared/validation/$name.csv"
done
validate tf_cnn_benchmarks_2017_scaling ../shared/validation/tf_cnn_benchmarks_2017_scaling.csv \
  --calibrate-on 'num_gpus=1'
validate pytorch_ddp_benchmark_dgx1_v100 ../shared/validation/pytorch_ddp_benchmark_dgx1_v100.csv \
  --calibrate-on 'num_gpus=1'
validate compute_epyc_2vcpu data/runs/compute/epyc_2vcpu/step_times.csv
for gpu in h200 h100; do
  validate "gpu_${gpu}_vm" data/runs/gpu/${gpu}_vm/torch_*/step_times.csv \
    data/runs/gpu/${gpu}_vm/eager_*/step_times.csv
done
rm -f "$out_root/.stderr"

if $check; then
  stale=()
  for dir in "$out_root"/*/; do
    folder=$(basename "$dir")
    for f in predictions.csv errors.csv; do
      cmp -s "$dir/$f" "data/runs/validation/$folder/$f" || stale+=("$folder/$f")
    done
  done
  if [ ${#stale[@]} -gt 0 ]; then
    echo "data/runs/validation is not what this commit's model predicts: ${stale[*]}" >&2
    echo "rewrite it with data/runs/validation/regenerate.sh and commit it" >&2
    exit 1
  fi
  echo "data/runs/validation: every folder is what this commit's model predicts"
fi
