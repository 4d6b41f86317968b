# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""bench/gpu/trace_summary.py: kernel categories, busy time and the summary of a trace."""
import gzip
import importlib.util
import json
import os

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PATH = os.path.join(HERE, "..", "..", "..", "bench", "gpu", "trace_summary.py")
_spec = importlib.util.spec_from_file_location("trace_summary", PATH)
ts = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ts)


@pytest.mark.parametrize("name, expected", [
    # Kernel names as the H200 trace of Megatron-DeepSpeed's pretrain_gpt.py printed them.
    ("nvjet_sm90_tst_128x256_64x4_2x1_v_bz_coopA_NTN", "matmul"),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", "matmul"),
    ("cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_26_64x64x128", "attention"),
    ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128>>", "attention"),
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "communication"),
    ("void cuComputeGradInput<c10::BFloat16, float, c10::BFloat16, true>(c10::BFloat16 const*)", "normalization"),
    ("void cuComputePartGradGammaBeta<c10::BFloat16, float>", "normalization"),
    ("void multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor<float>>", "optimizer"),
    # Templated ATen kernels carry "[lambda(...)]" in their names: not the LAMB optimizer.
    ("void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<"
     "at::native::CUDAFunctor_add<c10::BFloat16>>(at::TensorIteratorBase&, [lambda(int) (instance 1)])",
     "elementwise"),
    ("void at::native::vectorized_elementwise_kernel<8, at::native::GeluBackwardCUDAKernelImpl(at::TensorIteratorBase&)"
     "::[lambda() (instance 2)]", "elementwise"),
    ("void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda"
     "(at::TensorIteratorBase&)::[lambda() (instance 3)]>", "copy"),
    ("void at::native::reduce_kernel<128, 4, at::native::ReduceOp<c10::BFloat16, at::native::func_wrapper_t<float>>>",
     "reduction"),
    ("void at::native::fused_dropout_kernel_vec<c10::BFloat16, float, unsigned int, 1, 4, bool>", "dropout"),
    ("void at::native::cunn_SoftMaxForward<4, float, float, float, at::native::LogSoftMaxForwardEpilogue>", "softmax/loss"),
    ("Memcpy HtoD (Pageable -> Device)", "copy"),
    ("some_custom_kernel", "other"),
])
def test_category(name, expected):
    assert ts.category(name) == expected


@pytest.mark.parametrize("intervals, expected", [
    ([], 0.0),
    ([(0, 10)], 10.0),
    ([(0, 10), (20, 25)], 15.0),            # a gap is not busy
    ([(0, 10), (5, 12)], 12.0),             # overlapping streams count once
    ([(5, 12), (0, 10), (11, 30)], 30.0),   # order does not matter
    ([(0, 10), (0, 10)], 10.0),
    ([(0, 10), (2, 3)], 10.0),              # nested
])
def test_busy_time(intervals, expected):
    assert ts.busy_time(intervals) == expected


def _kernel(name, ts_us, dur, cat="kernel"):
    return {"ph": "X", "cat": cat, "name": name, "ts": ts_us, "dur": dur, "pid": 0, "tid": 7}


TRACE = {"traceEvents": [
    _kernel("nvjet_sm90_tst_128x256", 0, 60),
    _kernel("nvjet_sm90_tst_128x256", 100, 60),
    _kernel("cudnn_generated_fort_native_sdpa_sm90_flash_fprop", 60, 20),
    _kernel("ncclDevKernel_AllReduce_Sum_bf16", 150, 30),       # overlaps the second matmul
    _kernel("Memcpy DtoH (Device -> Pinned)", 190, 10, cat="gpu_memcpy"),
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 500},   # CPU side: ignored
    {"ph": "i", "cat": "kernel", "name": "instant", "ts": 5},               # not a complete event
    {"ph": "X", "cat": "kernel", "name": "no duration", "ts": 5},
]}


def test_summarize():
    summary = ts.summarize(TRACE, top=2)
    assert summary["kernels"] == 5
    assert summary["kernel_us"] == 180.0
    assert summary["span_us"] == 200.0
    assert summary["busy_us"] == 170.0            # 0-80, 100-180, 190-200
    assert summary["busy_fraction"] == pytest.approx(0.85)
    assert summary["categories"][0] == ("matmul", 120.0)
    assert dict(summary["categories"]) == {"matmul": 120.0, "communication": 30.0, "attention": 20.0, "copy": 10.0}
    assert summary["top"] == [("nvjet_sm90_tst_128x256", 120.0, 2), ("ncclDevKernel_AllReduce_Sum_bf16", 30.0, 1)]


@pytest.mark.parametrize("trace", [{}, {"traceEvents": []}, [], {"traceEvents": [{"ph": "X", "cat": "cpu_op", "dur": 3}]}])
def test_summarize_without_kernels(trace):
    summary = ts.summarize(trace)
    assert (summary["kernels"], summary["kernel_us"], summary["busy_fraction"], summary["top"]) == (0, 0, 0.0, [])


@pytest.mark.parametrize("suffix, opener", [(".json", open), (".json.gz", gzip.open)])
def test_main_reads_plain_and_gzip_traces(tmp_path, capsys, suffix, opener):
    path = str(tmp_path / ("rank0.pt.trace" + suffix))
    with opener(path, "wt") as handle:
        json.dump(TRACE, handle)
    assert ts.main([path, "--top", "1"]) == 0
    out = capsys.readouterr().out
    assert "5 kernels, 0.2 ms of kernel time over a 0.2 ms span; GPU busy 85.0%" in out
    assert "matmul" in out and "66.7%" in out
    assert "nvjet_sm90_tst_128x256" in out and "ncclDevKernel" not in out.split("top kernels")[1]
