"""python_env refuses clearly what cannot work (run once per verify, against node1).

Each case runs molecule/python_env/negative.yml with ansible-playbook and checks the exit
status, the PLAY RECAP (nothing changed where the role must stop before changing anything) and
the message: it names the node, the value found, the value expected and what to do.
Pure check files get simulated inputs (an nvcc that does not match torch, a ds_report table).
"""
from __future__ import annotations

import json
import shutil
import subprocess
import pytest

from python_env_helpers import PROJECT_DIR, flat, run_playbook

WHEELHOUSE = PROJECT_DIR / ".cache" / "wheelhouse" / "cpu-cp311"


def _extra(**variables) -> list:
    return ["-e", json.dumps(variables)]


def _docker_exec(node: str, script: str) -> None:
    subprocess.run(["docker", "exec", node, "bash", "-c", script], check=True, capture_output=True, text=True)


def test_python_without_torch_wheels_stops_before_any_change():
    result, recap = run_playbook("negative.yml", *_extra(megatron_stack_profile="cu117", python_env_python_version="3.12"))
    out = flat(result)
    assert result.returncode == 2 and recap["node1"] == (0, 1), out
    assert ("python_env: node node1: torch==1.13.1 (stack profile cu117) publishes wheels for CPython "
            "3.7, 3.8, 3.9, 3.10, 3.11 only, but this node would build the venv with Python 3.12 "
            "(/usr/bin/python3.12).") in out, out
    assert "Set python_env_python_version to one of 3.7, 3.8, 3.9, 3.10, 3.11" in out


def test_debian_cannot_provide_another_python():
    result, recap = run_playbook("negative.yml", *_extra(python_env_python_version="3.10"))
    out = flat(result)
    assert result.returncode == 2 and recap["node1"] == (0, 1), out
    assert "Debian 12" in out and "provides Python 3.11 only, and python_env_python_version asks for 3.10" in out


def test_cuda_profile_without_nvcc_stops_before_any_change():
    """The real check path: cu117 wants apex, the container has no CUDA toolkit."""
    # node1 asks for the SDPA flash-attention adapter (molecule.yml), which cu117 refuses first.
    result, recap = run_playbook("negative.yml", *_extra(megatron_stack_profile="cu117", python_env_flash_attn="auto"))
    out = flat(result)
    assert result.returncode == 2 and recap["node1"] == (0, 1), out
    assert "/usr/local/cuda/bin/nvcc does not run" in out and "expected CUDA 11.7 for torch==1.13.1" in out


@pytest.mark.parametrize(
    ("nvcc", "torch_cuda", "fails"),
    [
        ("Cuda compilation tools, release 11.8, V11.8.89", "11.7", True),
        ("Cuda compilation tools, release 13.0, V13.0.88", "13.0", False),
    ],
)
def test_nvcc_torch_mismatch_stops_apex(nvcc, torch_cuda, fails):
    result, recap = run_playbook("negative.yml", *_extra(
        python_env_negative_entry="check_cuda_match",
        __python_env_nvcc_output="nvcc: NVIDIA (R) Cuda compiler driver\n" + nvcc,
        __python_env_expected_cuda=torch_cuda,
        __python_env_torch_label="torch 1.13.1+cu117 in /opt/megatron/venv",
    ))
    out = flat(result)
    if not fails:
        assert result.returncode == 0 and recap["node1"] == (0, 0), out
        return
    found = nvcc.split("release ")[1].split(",")[0]
    assert result.returncode == 2 and recap["node1"] == (0, 1), out
    # apex's own wording first, then node, found, expected and the fix.
    assert ("Cuda extensions are being compiled with a version of Cuda that does not match the version "
            "used to compile Pytorch binaries. python_env: node node1:") in out, out
    assert ("/usr/local/cuda/bin/nvcc is CUDA %s, and torch 1.13.1+cu117 in /opt/megatron/venv was "
            "compiled with CUDA %s" % (found, torch_cuda)) in out, out
    assert "Fix: install CUDA %s" % torch_cuda in out


@pytest.fixture()
def partial_wheelhouse(tmp_path):
    """A wheelhouse with the build tools only: torch is the first wheel the role cannot find."""
    for pattern in ("pip-*.whl", "setuptools-*.whl", "wheel-*.whl"):
        for wheel in WHEELHOUSE.glob(pattern):
            shutil.copy(wheel, tmp_path)
    yield tmp_path
    _docker_exec("node1", "rm -rf /opt/megatron/venv-offline-test /opt/megatron/cache/wheelhouse-partial")


def test_missing_wheel_offline_names_the_package(partial_wheelhouse):
    result, recap = run_playbook("negative.yml", *_extra(
        python_env_path="/opt/megatron/venv-offline-test",
        python_env_wheelhouse=str(partial_wheelhouse),
        python_env_wheelhouse_dest="/opt/megatron/cache/wheelhouse-partial",
        python_env_megatron_source="none",
    ))
    out = flat(result)
    assert result.returncode == 2 and recap["node1"][1] == 1, out
    assert ("python_env: node node1: offline install (pip --no-index) found no wheel for torch==2.13.0 in "
            "the wheelhouse /opt/megatron/cache/wheelhouse-partial (versions there: none; expected one for "
            "CPython 3.11 on linux x86_64, stack profile cpu).") in out, out
    assert "fill.py --profile cpu --python 3.11" in out


DS_REPORT = (
    "--------------------------------------------------\n"
    "op name ................ installed .. compatible\n"
    "--------------------------------------------------\n"
    "deepspeed_not_implemented  \x1b[93m[NO]\x1b[0m ....... \x1b[92m[OKAY]\x1b[0m\n"
    "cpu_adam ............... \x1b[92m[YES]\x1b[0m ...... \x1b[92m[OKAY]\x1b[0m\n"
    "fused_adam ............. \x1b[93m[NO]\x1b[0m ....... \x1b[92m[OKAY]\x1b[0m\n"
    "fp_quantizer ........... \x1b[93m[NO]\x1b[0m ....... \x1b[93m[NO]\x1b[0m\n"
)


@pytest.mark.parametrize(
    ("ops", "missing"),
    [(["CPU_ADAM"], None), (["cpu_adam", "FUSED_ADAM"], "fused_adam"),
     (["ALL"], "deepspeed_not_implemented, fused_adam")],
)
def test_ds_report_shows_the_prebuilt_ops(ops, missing):
    result, recap = run_playbook("negative.yml", *_extra(
        python_env_negative_entry="check_ds_ops",
        __python_env_ds_report=DS_REPORT,
        python_env_deepspeed_build_ops=ops,
    ))
    out = flat(result)
    if missing is None:
        assert result.returncode == 0, out
        return
    assert result.returncode == 2 and recap["node1"] == (0, 1), out
    assert "are not installed according to ds_report: %s (installed: cpu_adam)" % missing in out, out


CRASHING_HELPER = r"""
#include <csignal>
#include <pybind11/pybind11.h>
#include <pybind11/numpy.h>
namespace py = pybind11;
// Same signature as Megatron's helper; dies the way the GPU host's helper did (docs/upstream-facts.md §G).
py::array build_sample_idx(const py::array_t<int32_t>&, const py::array_t<int32_t>&,
                           const int32_t, const int32_t, const int64_t) {
  std::raise(SIGSEGV);
  return py::array();
}
PYBIND11_MODULE(helpers, m) { m.def("build_sample_idx", &build_sample_idx); }
"""
MAKEFILE = (
    "CXXFLAGS += -O0 -shared -std=c++11 -fPIC\n"
    "CPPFLAGS += $(shell python3 -m pybind11 --includes)\n"
    "LIBEXT = $(shell python3-config --extension-suffix)\n"
    "default: helpers$(LIBEXT)\n"
    "%$(LIBEXT): %.cpp\n\t$(CXX) $(CXXFLAGS) $(CPPFLAGS) $< -o $@\n"
)


def test_a_crashing_dataset_helper_fails_the_install(tmp_path):
    """Importing the helper works; calling it kills the process. The role must say so."""
    (tmp_path / "helpers.cpp").write_text(CRASHING_HELPER)
    (tmp_path / "Makefile").write_text(MAKEFILE)
    _docker_exec("node1", "rm -rf /tmp/crash-mds && mkdir -p /tmp/crash-mds/megatron/data")
    for name in ("helpers.cpp", "Makefile"):
        subprocess.run(["docker", "cp", str(tmp_path / name), "node1:/tmp/crash-mds/megatron/data/" + name], check=True)
    try:
        result, recap = run_playbook("negative.yml", *_extra(
            python_env_negative_entry="helpers",
            python_env_megatron_dir="/tmp/crash-mds",
            __python_env_owner="root",
            __python_env_megatron_ref="test",
        ))
    finally:
        _docker_exec("node1", "rm -rf /tmp/crash-mds")
    out = flat(result)
    assert result.returncode == 2, out
    # Every compiler on the node was tried (each builds the same crashing helper), and each is named.
    assert ("python_env: node node1: no C++ compiler on the node built a Megatron dataset helper "
            "(/tmp/crash-mds/megatron/data/helpers*.so) that passes build_sample_idx") in out, out
    assert "make's default (g++) (crashed with signal 11" in out, out
