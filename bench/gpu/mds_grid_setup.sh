#!/usr/bin/env bash
# Prepares a bare GPU host of the H200 image for `bench/gpu/mds_grid.py run`: the Python
# packages the image lacks, the three apex extensions, the flash-attention SDPA adapter, and two
# Megatron-DeepSpeed trees under ROOT (mds: as given; mds-noflash: the same with the three `.view`
# calls of CoreAttention.forward made `.reshape`, without which the unfused attention path fails
# on torch 2.11, docs/upstream-facts.md §G). Everything comes from SRC, nothing from a network:
#   SRC/whl/*.whl         DeepSpeed 0.19.6 (pure Python, DS_BUILD_OPS=0) and the deps the image lacks
#   SRC/mds/              a Megatron-DeepSpeed tree (megatron/, pretrain_gpt.py, tools/)
#   SRC/apex/             NVIDIA apex source (apex/ and csrc/), built by apex_min_build.py ...
#   SRC/apex-built.tgz    ... unless a previous run's build is given (then it is unpacked)
#   SRC/flash_attn/       roles/python_env/files/flash_attn_sdpa/flash_attn
# and, from this checkout, roles/python_env/files/fused_ops (run the script from bench/gpu here).
#
#   OUT=/tmp/out bench/gpu/mds_grid_setup.sh SRC
# Writes OUT/env.txt (host, driver, CUDA, torch, DeepSpeed versions as read) and, after a build,
# OUT/apex-built.tgz.
set -euo pipefail
SRC=$(cd "${1:?usage: mds_grid_setup.sh SRC}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=${ROOT:-/tmp/mdsgrid}
VENV=${VENV:-/opt/torch/.venv}
OUT=${OUT:-/tmp/mdsgrid-out}
PY=$VENV/bin/python3
export PATH=$VENV/bin:$PATH NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p "$ROOT" "$OUT"
SITE=$($PY -c 'import site; print(site.getsitepackages()[0])')
t0=$(date +%s)
step() { echo "[setup +$(($(date +%s) - t0))s] $*"; }

step "wheels into $VENV"
$PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade "$SRC"/whl/*.whl

if [[ -f "$SRC/apex-built.tgz" ]]; then
  step "apex: unpacking $SRC/apex-built.tgz"
  tar xzf "$SRC/apex-built.tgz" -C "$SITE"
else
  step "apex: building amp_C, fused_layer_norm_cuda, apex_C (arch 9.0, $(nproc) jobs)"
  TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=$(nproc) $PY "$HERE/apex_min_build.py" "$SRC/apex" "$ROOT/apex-build"
  cp "$ROOT"/apex-build/*.so "$SITE/"
  rm -rf "$SITE/apex" && cp -r "$SRC/apex/apex" "$SITE/apex"
  (cd "$SITE" && tar czf "$OUT/apex-built.tgz" amp_C.so fused_layer_norm_cuda.so apex_C.so apex)
fi
(cd /tmp && $PY -c "import torch, amp_C, fused_layer_norm_cuda, apex_C, apex
from apex.normalization import MixedFusedRMSNorm, FusedLayerNorm
from apex.optimizers import FusedAdam
print('apex extensions import')")

step "flash-attention SDPA adapter"
rm -rf "$SITE/flash_attn" && cp -r "$SRC/flash_attn" "$SITE/flash_attn"
(cd /tmp && $PY -c "import flash_attn; from flash_attn.flash_attn_interface import flash_attn_varlen_func; print('flash_attn adapter', flash_attn.__version__)")

step "Megatron-DeepSpeed trees and the dataset helper (/usr/bin/g++: the image's CXX builds one that segfaults)"
rm -rf "$ROOT/mds" "$ROOT/mds-noflash"
cp -r "$SRC/mds" "$ROOT/mds"
make -C "$ROOT/mds/megatron/data" CXX=/usr/bin/g++
(cd "$ROOT/mds" && $PY -c "
import numpy as np
from megatron.data import helpers
s = helpers.build_sample_idx(np.array([5,7,3,9],dtype=np.int32), np.array([0,1,2,3],dtype=np.int32), 4, 1, 24)
print('dataset helper call ok', s.shape)")
cp -a "$ROOT/mds" "$ROOT/mds-noflash"
$PY - "$ROOT/mds-noflash/megatron/model/transformer.py" <<'PATCH'
import sys
path = sys.argv[1]
text = open(path).read()
for old in ("query_layer = query_layer.view(output_size[2],", "key_layer = key_layer.view(output_size[3],",
            "value_layer = value_layer.view(value_layer.size(0),"):
    assert text.count(old) == 1, (path, old)
    text = text.replace(old, old.replace(".view(", ".reshape("))
open(path, "w").write(text)
print("patched", path)
PATCH

step "megatron_ds_fused_ops and its .pth, as python_env_fused_ops installs them (used by rows named *-fx)"
FUSED=$(cd "$HERE/../../roles/python_env/files/fused_ops" && pwd)
rm -rf "$ROOT/fused_ops" && cp -r "$FUSED" "$ROOT/fused_ops"
$PY -m pip install -q --no-build-isolation --no-index --no-deps --no-cache-dir --force-reinstall "$ROOT/fused_ops"
cp "$FUSED/megatron_ds_fused_ops.pth" "$SITE/"
(cd /tmp && MEGATRON_DS_FUSED_OPS=1 $PY -c "import sys, megatron_ds_fused_ops as m; print('fused ops', m.__version__, 'hook', any(type(f).__name__ == '_Finder' for f in sys.meta_path))")

step "host facts -> $OUT/env.txt"
{
  nvidia-smi --query-gpu=index,name,memory.total,driver_version,pci.bus_id --format=csv
  nvidia-smi topo -m || true
  nvcc --version | tail -2 || true
  $PY - <<'FACTS'
import sys, torch, deepspeed, numpy
print('python', sys.version.split()[0])
print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version(),
      'nccl', '.'.join(map(str, torch.cuda.nccl.version())))
print('deepspeed', deepspeed.__version__)
print('numpy', numpy.__version__)
FACTS
  echo "cpus $(nproc)"; uname -r
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
step done
