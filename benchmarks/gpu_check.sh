#!/usr/bin/env bash
# The GPU check: one command, from a bare checkout, on one GPU (about 10 minutes).
#
#   bash benchmarks/gpu_check.sh                     # data: $TTGNN_DATA, else ./dataset
#   bash benchmarks/gpu_check.sh --root DIR --out gpu_check
#   bash benchmarks/gpu_check.sh --dry-run           # print the steps only
#   bash benchmarks/gpu_check.sh --steps setup,kernels,tests   # some steps only (names below)
#   bash benchmarks/gpu_check.sh --offline           # no network: dgl, ogb, pymetis already importable
#   bash benchmarks/gpu_check.sh --venv none         # no venv: use (and install into) python3 itself
#
# Steps (each logged to OUT/<step>.log; a failing step is reported and the next ones still run):
#   setup      a venv (.venv-gpu): a torch that already sees the GPU (the machine's own build) is
#              kept (--system-site-packages), else the pinned one from requirements.txt (on a GPU
#              machine the PyPI torch==2.13.0 is the CUDA 13.0 build); the rest of
#              requirements.txt; the package with the CUDA kernels (TORCH_CUDA_ARCH_LIST defaults
#              to this GPU's architecture, which keeps the build short). With --offline nothing is
#              downloaded: the requirements must already import (e.g. installed from wheels), and
#              the package is built with --no-deps
#   kernels    ttgnn._C has its CUDA kernels and one lookup equals the reference
#   tests      every CUDA test (pytest -k "cuda or gpu": kernels vs reference, tensor layers, training)
#   lookup     benchmarks/bench_lookup.py --device cuda (the whole table)
#   train-*    ttgnn train on ogbn-arxiv, full graph, --device cuda --gnn-backend torch, 5 epochs:
#              SAGE and GAT, TT and full embedding (epoch time, peak GPU memory, accuracy)
#   epoch      benchmarks/bench_gnn_backend.py --device cuda: CUDA-event epoch times, same models
#   torchrun   torchrun --nproc-per-node=1 ... --device cuda --mode minibatch, 2 epochs (NCCL)
# Then one summary table (date and device named), also written to OUT/summary.md.
set -uo pipefail

ROOT_DIR="${TTGNN_DATA:-dataset}"
OUT="gpu_check_out"
VENV=".venv-gpu"
DRY=0
OFFLINE=0
STEPS="setup,kernels,tests,lookup,train,epoch,torchrun"
ALL_STEPS="$STEPS"
while [ $# -gt 0 ]; do
  case "$1" in
    --root) ROOT_DIR="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --venv) VENV="$2"; shift 2 ;;
    --dry-run) DRY=1; shift ;;
    --offline) OFFLINE=1; shift ;;
    --steps) STEPS="$2"; shift 2 ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    *) echo "gpu_check.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
for s in ${STEPS//,/ }; do
  case ",$ALL_STEPS," in *",$s,"*) ;; *) echo "gpu_check.sh: unknown step $s (valid: $ALL_STEPS)" >&2; exit 2 ;; esac
done
cd "$(dirname "$0")/.." || exit 2
if [ "$DRY" != 1 ]; then  # a dry run writes nothing
  mkdir -p "$OUT"
  OUT="$(cd "$OUT" && pwd)"
  [ -f "$OUT/steps.tsv" ] || : > "$OUT/steps.tsv"   # a later call with other --steps adds its rows
fi
# --venv none: no venv, the python found first (PYTHON, else python3) is used and the package goes into it
# (for a machine whose torch lives in a venv already: a venv made from a venv does not see its packages)
if [ "$VENV" = none ]; then PY="$(command -v "${PYTHON:-python3}")"; else PY="$VENV/bin/python"; fi
export TTGNN_DATA="$ROOT_DIR"  # the tests that need the real graphs read it

# wanted GROUP: whether --steps names GROUP
wanted() { case ",$STEPS," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }

# step NAME COMMAND...: run it (logged), record status and seconds, if its group is wanted
step() {
  local name="$1"; shift
  wanted "${name%%-*}" || return 0
  echo "== $name: $*"
  if [ "$DRY" = 1 ]; then return 0; fi
  local start=$SECONDS
  "$@" > "$OUT/$name.log" 2>&1
  local code=$?
  printf '%s\t%s\t%s\n' "$name" "$code" "$((SECONDS - start))" >> "$OUT/steps.tsv"
  if [ "$code" != 0 ]; then echo "   FAILED (exit $code), see $OUT/$name.log"; tail -5 "$OUT/$name.log"; fi
  return 0
}

setup_env() {
  local base="${PYTHON:-python3}"
  if [ "$OFFLINE" = 1 ]; then
    [ -x "$PY" ] || "$base" -m venv --system-site-packages "$VENV" || return 1
    "$PY" -c "import torch, dgl, ogb, pymetis, numpy, scipy, tqdm, pytest" || {
      echo "--offline: the requirements above must already import (install them from wheels first)"; return 1; }
  elif "$base" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
    echo "keeping this machine's torch: $("$base" -c 'import torch; print(torch.__version__, torch.version.cuda)')"
    [ -x "$PY" ] || "$base" -m venv --system-site-packages "$VENV" || return 1
    grep -v '^torch==' requirements.txt > "$OUT/requirements-no-torch.txt"
    "$PY" -m pip install --quiet -r "$OUT/requirements-no-torch.txt" || return 1
  else
    [ -x "$PY" ] || "$base" -m venv "$VENV" || return 1
    "$PY" -m pip install --quiet -r requirements.txt || return 1
  fi
  "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'this torch sees no GPU')" || return 1
  local arch
  arch="$("$PY" -c 'import torch; print("%d.%d" % torch.cuda.get_device_capability())')"
  local nodeps=()
  [ "$OFFLINE" = 1 ] && nodeps=(--no-deps --no-index)
  TORCH_CUDA_ARCH_LIST="${TORCH_CUDA_ARCH_LIST:-$arch}" "$PY" -m pip install --no-build-isolation "${nodeps[@]}" -e . \
    || return 1
}

check_kernels() {
  "$PY" - <<'EOF'
import torch
from ttgnn import TTNodeEmbedding
from ttgnn.ops import tt_lookup, tt_lookup_reference
emb = TTNodeEmbedding(169343, 128, ranks=16).cuda()
rows = torch.randint(0, 169343, (100_000,), device="cuda")
cores = list(emb.cores)
torch.testing.assert_close(tt_lookup(cores, rows), tt_lookup_reference(cores, rows), rtol=1e-4, atol=1e-5)
assert torch.ops.ttgnn.tt_lookup.default.has_kernel_for_dispatch_key("CUDA"), "ttgnn._C has no CUDA kernels"
print("CUDA kernels present and equal to the reference on", torch.cuda.get_device_name())
EOF
}

TRAIN=(--dataset ogbn-arxiv --root "$ROOT_DIR" --device cuda --gnn-backend torch --mode full --epochs 5
       --no-progress --no-correct-smooth --overwrite)
TT=(--embedding tt --rank 8 --row-shape 55,55,56 --col-shape 8,4,4)

if [ "$DRY" = 1 ]; then echo "(dry run: nothing is executed)"; fi
step setup setup_env
step kernels check_kernels
step tests "$PY" -m pytest -q -rs tests -k "cuda or gpu" -m "not slow"
step lookup "$PY" benchmarks/bench_lookup.py --device cuda --json "$OUT/lookup.json"
for model in sage gat; do
  step "train-$model-tt" "$PY" -m ttgnn train "${TRAIN[@]}" --model "$model" "${TT[@]}" --output-dir "$OUT/train-$model-tt"
  step "train-$model-full" "$PY" -m ttgnn train "${TRAIN[@]}" --model "$model" --embedding full \
    --output-dir "$OUT/train-$model-full"
done
step epoch "$PY" benchmarks/bench_gnn_backend.py --root "$ROOT_DIR" --device cuda --backends torch --models sage gat \
  --embedding tt full --rounds 5 --json "$OUT/epoch.json"
step torchrun "$PY" -m torch.distributed.run --standalone --nproc-per-node=1 -m ttgnn.cli train --dataset ogbn-arxiv \
  --root "$ROOT_DIR" --device cuda --gnn-backend torch --mode minibatch --epochs 2 --model sage "${TT[@]}" \
  --no-progress --no-correct-smooth --overwrite --output-dir "$OUT/torchrun"
if [ "$DRY" = 1 ]; then exit 0; fi

"$PY" - "$OUT" <<'EOF'
import datetime, json, sys
from pathlib import Path

import torch

out = Path(sys.argv[1])
lines = [f"GPU check, {datetime.date.today()}, {torch.cuda.get_device_name() if torch.cuda.is_available() else 'no GPU'}, "
         f"torch {torch.__version__} (CUDA {torch.version.cuda})", "",
         "| step | result | seconds | figures |", "|---|---|---:|---|"]
epoch = {}
if (out / "epoch.json").exists():
    for row in json.loads((out / "epoch.json").read_text()):
        epoch[(row["model"], row["embedding"])] = row
for line in (out / "steps.tsv").read_text().splitlines():
    name, code, seconds = line.split("\t")
    figures = ""
    metrics = out / name / "metrics.json"
    if metrics.exists():
        m = json.loads(metrics.read_text())
        last = m["epochs"][-1] if m["epochs"] else {}
        figures = (f"{m.get('gnn_backend')}, world {m.get('world_size')}: test {m['test_acc']:.4f}, epoch "
                   f"{m['epoch_time']:.3f} s, peak GPU {last.get('peak_gpu_memory_mib', float('nan')):.0f} MiB")
        key = tuple(name.split("-")[1:3])
        if key in epoch:
            figures += f"; CUDA-event epoch {epoch[key]['epoch_s'] * 1000:.1f} ms"
    elif name == "lookup" and (out / "lookup.json").exists():
        figures = f"table in {out / 'lookup.json'} and lookup.log"
    elif name == "torchrun":
        log = (out / "torchrun.log").read_text() if (out / "torchrun.log").exists() else ""
        figures = "nccl" if "nccl" in log.lower() else ""
    lines.append(f"| {name} | {'ok' if code == '0' else 'FAILED (exit ' + code + ')'} | {seconds} | {figures} |")
if epoch:
    lines += ["", "| model | embedding | backend | epoch ms (CUDA events, median) | peak GPU MiB |", "|---|---|---|---:|---:|"]
    for (model, emb), row in epoch.items():
        lines.append(f"| {model} | {emb} | {row['backend']} | {row['epoch_s'] * 1000:.1f} | {row['peak_gpu_mib']:.0f} |")
text = "\n".join(lines)
(out / "summary.md").write_text(text + "\n")
print(text)
EOF
