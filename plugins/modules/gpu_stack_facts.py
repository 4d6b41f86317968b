#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_stack_facts
author: megatron_ds.cluster developers (@megatron-ds)
version_added: 1.0.0
short_description: Report every GPU, CUDA and training-stack version of a node in one call
description:
  - Collects, in one call per node, what the preflight gate compares across a cluster.
    It reports the NVIDIA driver and its kernel-module flavour, the GPUs (one C(nvidia-smi -q -x) call),
    NVSwitch and fabric manager, and every CUDA toolkit under C(/usr/local), saying where each
    version was read.
  - It also reports the system cuDNN and NCCL (headers and library), and torch, DeepSpeed and apex
    in the training venv. By default they are read from the venv's files without starting any
    process (O(python_probe=files)); O(python_probe=import) imports them in one Python subprocess
    in the venv instead, which costs seconds of CPU per node but also catches a package that is
    installed whole and still fails to import.
  - It checks that torch, DeepSpeed and apex are installed whole (every file in pip's C(RECORD)
    present with its size) and that the Megatron-DeepSpeed checkout's tracked files match git's
    index, in the same call and without starting a process.
  - Finally it reports the Megatron-DeepSpeed commit, InfiniBand ports, nvidia-peermem, the memlock limit
    (optionally in a non-interactive ssh session of the training user), free disk space and
    clock synchronisation.
  - Never changes anything on the node. Anything missing is reported as null, false or an
    empty list, never as a failure; problems met on the way are listed in C(errors).
  - Every version is a string. The same component can have several versions on one node,
    for example the system cuDNN against the cuDNN that torch bundles, so each version comes with its source.
options:
  venv:
    description:
      - The training virtual environment. It must hold C(bin/python) (or C(bin/python3)); see
        O(python_probe) for how torch, DeepSpeed and apex are read from it.
      - When omitted, C(python), C(torch), C(deepspeed) and C(apex) are reported empty.
    type: path
  python_probe:
    description:
      - How to read the venv's Python, torch, DeepSpeed and apex.
      - V(files) starts no process. It reads the Python version from C(pyvenv.cfg) (else the
        C(lib/pythonX.Y) directory name), and uses C(lib/python3*/site-packages) (and C(lib64)).
        It takes torch's version and CUDA from C(torch/version.py), and torch's cuDNN and NCCL from
        the C(nvidia-cudnn-cu*) and C(nvidia-nccl-cu*) distributions that torch loads them from.
        It takes DeepSpeed's version from its C(dist-info). apex counts as present with
        C(apex/normalization) or C(apex/optimizers), and its CUDA extensions as built with
        C(amp_C*.so) and C(fused_layer_norm_cuda*.so).
        A half-removed install (dist-info without the package, or the reverse, or two versions)
        is reported in C(torch.error) / C(deepspeed.error) next to the version.
      - V(import) runs the venv's python once with C(-I) (only the venv's own packages count).
        It imports torch, DeepSpeed, apex and its CUDA extensions, and reports what they say
        (C(torch.backends.cudnn.version()), C(torch.cuda.nccl.version()), ...). Importing torch
        costs several seconds of CPU per node.
    type: str
    choices: [files, import]
    default: files
  megatron_dir:
    description:
      - A Megatron-DeepSpeed checkout. Its commit comes from C(.git/HEAD), the loose ref and
        C(packed-refs), or from C(git rev-parse HEAD) where those do not name it.
    type: path
  megatron_entry:
    description:
      - The trainer's entry script, relative to O(megatron_dir). Its start-up imports are walked
        statically inside the checkout (nothing is imported) and every top-level module from
        outside it is looked up in the venv's site-packages and the standard library; what
        resolves nowhere is reported in C(megatron_deepspeed.imports.missing).
    type: str
    default: pretrain_gpt.py
  accelerator:
    description:
      - DeepSpeed's accelerator on this node (the stack profile's). Megatron-DeepSpeed chooses
        its CUDA-only imports (apex, amp_C) by C(get_accelerator().device_name()), so the import
        walk takes the branch this accelerator takes.
    type: str
    choices: [cuda, cpu]
    default: cuda
  disk_paths:
    description:
      - Paths whose free space to report, typically the data and checkpoint directories.
      - A path that does not exist yet is reported with C(exists=false) and the free space of
        its nearest existing parent, where it would be created.
    type: list
    elements: path
    default: []
  ssh_user:
    description:
      - When set, also read C(ulimit -l) the way a launcher sees it. The module runs
        C(ssh -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null <ssh_user>@localhost 'ulimit -l')
        as that user (through C(su -s /bin/sh <ssh_user> -c ...) when the module runs as root).
      - Checking as another user needs root on the node (C(become=true)). The known-hosts file is
        C(/dev/null), so the check writes nothing.
    type: str
  ssh_sweep_targets:
    description:
      - Addresses to ssh to from this node, as the launcher's hostfile names them. When set, the
        module runs C(ssh -o BatchMode=yes -o StrictHostKeyChecking=yes <address> 'ulimit -l') to
        every address at once, as O(ssh_sweep_user), while it collects the other facts, and reports
        each exit code and limit in C(ssh_sweep).
      - C(playbooks/preflight.yml) sets it on the head node only, so reachability from the head
        node costs no task of its own.
    type: list
    elements: str
    default: []
  ssh_sweep_user:
    description:
      - The user the sweep of O(ssh_sweep_targets) runs as, through C(su -s /bin/sh <user>) when the
        module runs as root. Default is the user the module runs as.
      - Sweeping as another user needs root on the node (C(become=true)).
    type: str
  training_user:
    description:
      - The user the ranks run as. Its C(~/.ssh/environment) and C(~/.bashrc) (home from C(/etc/passwd))
        are read for C(nccl_env), beside C(/etc/environment) and C(/etc/bash.bashrc). Omit to read only
        those two and the launcher's files.
    type: str
  nccl_env_file:
    description:
      - The launcher's file of NCCL variables (the nccl role writes it; C(megatron_job_nccl_env_file)),
        read for C(nccl_env) after the user's files. Omit to leave it out.
    type: path
  nccl_env_dir:
    description:
      - The directory of further C(*.env) files of NCCL variables (the infiniband role's), read in name
        order after O(nccl_env_file).
    type: path
  root:
    description:
      - Path prefix under which every file is read, and every toolkit binary is looked up and run.
        Symlinks are followed inside it as in a chroot.
      - Only for tests against a recorded filesystem tree; leave the default on real nodes.
    type: path
    default: /
  timeout:
    description:
      - Seconds allowed to each command (C(nvidia-smi), C(nvcc), the venv probe, ssh, ...).
      - With O(python_probe=import), importing torch and DeepSpeed takes several seconds on a cold page cache.
    type: int
    default: 120
  converge_dir:
    description:
      - Where the provisioning roles leave their converge stamps (C(/var/lib/megatron_ds/converge)).
        When set, C(converge) reports every stamp there and re-checks, in the same call, the
        files and services each stamp recorded.
      - Used by playbooks/provision.yml to decide which roles a node still needs
        (megatron_ds.cluster.converge_plan).
    type: path
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.facts
attributes:
  check_mode:
    support: full
    details: The module only reads; it behaves the same in check mode.
  diff_mode:
    support: none
  facts:
    support: full
  platform:
    platforms: posix
notes:
  - Runs on the managed node with Python 3.8 or later and the standard library only.
  - Sources, in order of preference. Driver from C(/proc/driver/nvidia/version), else C(nvidia-smi).
    GPUs from C(nvidia-smi -q -x), else C(nvidia-smi --query-gpu) CSV.
    CUDA from C(version.json), else C(bin/nvcc --version), else C(bin/ptxas --version), else the C(libcudart.so.X.Y.Z) file name.
  - From CUDA 11.8, C(version.json) can carry a release date as its third field (C(11.8.20220929)).
    Such a version is reported as major.minor (C(11.8)).
  - C(torch.cudnn) is the cuDNN that torch loads (for pip wheels, the bundled one), which can
    differ from the system C(cudnn.version); C(torch.nccl) likewise against C(nccl.version).
    torch 1.13.1 from PyPI, for example, loads cuDNN 8.5 whatever cuDNN the system has.
  - With O(python_probe=files), a torch that bundles cuDNN or NCCL inside C(torch/lib) instead of
    depending on NVIDIA's wheels names no full version there. The static NCCL of torch 1.13.1 is
    one example. C(torch.cudnn) / C(torch.nccl) are then null; use O(python_probe=import) to read them.
  - With O(python_probe=files), C(python.version) is the version the venv was created with
    (C(pyvenv.cfg)); a later patch-level upgrade of the base interpreter does not show.
seealso:
  - name: NVIDIA System Management Interface
    description: The C(nvidia-smi -q -x) XML that the GPU facts come from.
    link: https://docs.nvidia.com/deploy/nvidia-smi/index.html
"""

EXAMPLES = r"""
- name: Facts | Gather the GPU stack of every node
  megatron_ds.cluster.gpu_stack_facts:
    venv: /opt/megatron/venv
    megatron_dir: /opt/megatron/Megatron-DeepSpeed
    disk_paths:
      - /data/megatron
      - /checkpoints
    ssh_user: train
  become: true

- name: Facts | Import torch, DeepSpeed and apex in the venv (slower, also catches import failures)
  megatron_ds.cluster.gpu_stack_facts:
    venv: /opt/megatron/venv
    python_probe: import
  become: true

- name: Facts | Show what torch sees next to the system toolkit
  ansible.builtin.debug:
    msg: >-
      torch {{ gpu_stack_facts.torch.version }} built for CUDA {{ gpu_stack_facts.torch.cuda }},
      nvcc {{ gpu_stack_facts.cuda.nvcc_version }} ({{ gpu_stack_facts.cuda.source }}),
      {{ gpu_stack_facts.gpus.count }} x {{ gpu_stack_facts.gpus.model }}
"""

RETURN = r"""
ansible_facts:
  description: Facts to add to ansible_facts.
  returned: always
  type: dict
  contains:
    gpu_stack_facts:
      description: Everything about the node's GPU stack. Missing things are null, false or empty.
      returned: always
      type: dict
      contains:
        hostname:
          description: The node's host name.
          type: str
          sample: gpu-node-01
        os:
          description: C(ID) and C(VERSION_ID) from C(/etc/os-release).
          type: dict
          sample: {id: ubuntu, version_id: "24.04"}
        python:
          description: The venv's interpreter (null values without O(venv)).
          type: dict
          contains:
            version:
              description:
                - Python version, e.g. C(3.12.3).
                - From C(pyvenv.cfg) (C(version) or C(version_info)), else the C(lib/pythonX.Y)
                  directory name (C(3.12), major.minor only), with O(python_probe=files).
                  From C(sys.version_info) with O(python_probe=import).
              type: str
            executable:
              description: The venv path of the interpreter (C(bin/python), else C(bin/python3)).
              type: str
            source:
              description: C(pyvenv.cfg), C(lib directory) or C(import); null without a version.
              type: str
        driver:
          description: The NVIDIA driver.
          type: dict
          contains:
            version:
              description: Driver version, e.g. C(580.159.04).
              type: str
            kernel_module:
              description: C(open) or C(proprietary) (from /proc only).
              type: str
            source:
              description: C(/proc/driver/nvidia/version) or C(nvidia-smi).
              type: str
        driver_stack:
          description:
            - What breaks a GPU node between two runs without a change of ours, read from files only
              (C(_facts/driver_stack.py)). Null when it could not be read.
          type: dict
          contains:
            userspace_version:
              description: The user-space driver, from the file C(libnvidia-ml.so.1) resolves to; null without one.
              type: str
            userspace_library:
              description: That library's path.
              type: str
            module_version:
              description: The loaded kernel module's version (C(/sys/module/nvidia/version)); null when none is loaded.
              type: str
            running_kernel:
              description: The running kernel release; null when the facts read another root.
              type: str
            next_kernel:
              description: The newest kernel under C(/lib/modules), the one the boot loader defaults to after a kernel upgrade.
              type: str
            next_kernel_modules:
              description: Whether that kernel's module tree holds C(nvidia) and C(nvidia_peermem) (module name -> bool).
              type: dict
            running_kernel_modules:
              description: The same for the running kernel.
              type: dict
            peermem_symbol_errors:
              description: The kernel log's C(disagrees about version of symbol) lines for nvidia-peermem, each once.
              type: list
              elements: str
        gpus:
          description: GPUs as nvidia-smi lists them.
          type: dict
          contains:
            count:
              description: Number of GPUs.
              type: int
              sample: 2
            model:
              description: The product name all GPUs share; null when none or mixed.
              type: str
              sample: NVIDIA H200
            models:
              description: Distinct product names.
              type: list
              elements: str
            memory_mib:
              description: Memory of the smallest GPU in MiB.
              type: int
              sample: 143771
            compute_capability:
              description:
                - The CUDA compute capability every GPU shares, e.g. C(9.0) for H100/H200; null when they differ or one is unknown.
                - From C(--query-gpu=compute_cap) where the CSV was read, else from the XML's C(product_architecture) where that
                  architecture has one capability (Hopper, Ada Lovelace, Turing, Volta); Ampere and Blackwell leave it null and
                  the controller's checks read it off the GPU name.
              type: str
              sample: "9.0"
            uuids:
              description: GPU UUIDs.
              type: list
              elements: str
            list:
              description: One entry per GPU, in nvidia-smi order.
              type: list
              elements: dict
              contains:
                index:
                  description: nvidia-smi index.
                  type: int
                name:
                  description: Product name.
                  type: str
                uuid:
                  description: GPU UUID.
                  type: str
                memory_mib:
                  description: Total memory in MiB.
                  type: int
                pci_bus_id:
                  description: PCI bus id, e.g. C(00000000:00:06.0).
                  type: str
                persistence_mode:
                  description: Persistence mode enabled; null when unknown.
                  type: bool
                architecture:
                  description: The XML's C(product_architecture), e.g. C(Hopper); null from the CSV query.
                  type: str
                compute_capability:
                  description: This GPU's compute capability (see C(gpus.compute_capability)); null when unknown.
                  type: str
            pci_devices:
              description:
                - PCI addresses of the NVIDIA GPUs on the bus (vendor 0x10de, class 0x03), driver bound or not,
                  from C(/sys/bus/pci/devices).
                - An empty list means no NVIDIA GPU on this node; null means the node shows no PCI bus in sysfs.
              type: list
              elements: str
              sample: ["0000:18:00.0", "0000:2a:00.0"]
        nvswitch:
          description: NVSwitch devices (from C(/proc/driver/nvidia-nvswitch/devices), else C(/dev/nvidia-nvswitchN)).
          type: dict
          contains:
            present:
              description: At least one NVSwitch.
              type: bool
            count:
              description: Number of NVSwitches.
              type: int
        fabric_manager:
          description: NVIDIA fabric manager.
          type: dict
          contains:
            installed:
              description: C(nv-fabricmanager) or an C(nvidia-fabricmanager*) package found.
              type: bool
            version:
              description: From C(nv-fabricmanager --version), else the package version without its Debian revision.
              type: str
            active:
              description: C(systemctl is-active nvidia-fabricmanager); null without a running systemd.
              type: bool
        cuda:
          description: The CUDA toolkit at C(home) and every toolkit found.
          type: dict
          contains:
            version:
              description: Toolkit version, e.g. C(13.0.88) or C(11.7.1).
              type: str
            source:
              description: C(version.json), C(nvcc), C(ptxas) or C(library).
              type: str
            home:
              description: C(/usr/local/cuda), else the toolkit of the nvcc on PATH, else the newest C(/usr/local/cuda-*).
              type: str
            nvcc_version:
              description: What C(home/bin/nvcc --version) says (DeepSpeed compares its major.minor with torch's).
              type: str
            installed:
              description: Every C(/usr/local/cuda-*) and C(/usr/local/cuda) directory (plus C(home) when elsewhere).
              type: list
              elements: dict
              contains:
                path:
                  description: The toolkit directory.
                  type: str
                version:
                  description: Its version.
                  type: str
                source:
                  description: Where the version was read.
                  type: str
        cudnn:
          description: The system cuDNN, from C(cudnn_version.h) (or C(cudnn.h) before cuDNN 8).
          type: dict
          contains:
            version:
              description: e.g. C(9.14.0).
              type: str
            source:
              description: The header read.
              type: str
        nccl:
          description: The system NCCL.
          type: dict
          contains:
            version:
              description: From C(nccl.h), else from the library file name.
              type: str
            source:
              description: The header (or library) the version came from.
              type: str
            library:
              description: The C(libnccl.so.X.Y.Z) file found first in the loader's usual order.
              type: str
        torch:
          description: torch in the venv.
          type: dict
          contains:
            version:
              description:
                - C(torch.__version__), e.g. C(2.11.0+cu130).
                - With O(python_probe=files), C(__version__) in C(torch/version.py), else the
                  C(Version) of torch's dist-info (then C(error) says why the package is missing).
              type: str
            cuda:
              description: C(torch.version.cuda) (the C(cuda) line of C(torch/version.py) with O(python_probe=files)); null for CPU builds.
              type: str
            cudnn:
              description:
                - The cuDNN torch loads, as C(torch.backends.cudnn.version()) reports it, dotted
                  (C(8500) -> C(8.5.0)); null for CPU builds.
                - With O(python_probe=files), the first three fields of the C(nvidia-cudnn-cu*)
                  distribution's version (C(8.5.0.96) -> C(8.5.0)).
              type: str
            nccl:
              description:
                - C(torch.cuda.nccl.version()) as a dotted string; null for CPU builds.
                - With O(python_probe=files), the version of the C(nvidia-nccl-cu*) distribution (C(2.21.5)).
              type: str
            error:
              description:
                - Why torch could not be read, or null. With O(python_probe=import), the import error.
                - With O(python_probe=files), a missing torch, or a half-removed install such as
                  a dist-info without C(torch/version.py). C(version) is then still set.
              type: str
            source:
              description: C(files) or C(import), the O(python_probe) that read these values.
              type: str
            files:
              description:
                - The installed files against pip's C(RECORD) in the dist-info, with either O(python_probe);
                  every file listed with a size must exist with that size (missing, cut short or grown files),
                  and a file written after pip wrote C(RECORD) (a newer mtime, or a newer ctime as after an edit whose
                  mtime was set back) must still have its recorded sha256 (a same-size edit). Byte code is judged
                  by its source (pip compiles it again over a wheel's own C(.pyc)). No process is started; an
                  C(.egg-info) install has no RECORD.
              type: dict
              contains:
                source:
                  description: The record compared against; null when there was none to compare.
                  type: str
                checked:
                  description: How many files were compared.
                  type: int
                bad_count:
                  description: How many of them are missing or differ.
                  type: int
                bad:
                  description: "The first five, one line each, for example C(torch/lib/libtorch_cpu.so: 1048576 bytes, RECORD says 452984832)."
                  type: list
                  elements: str
                error:
                  description: Why the files could not be compared, or null.
                  type: str
                hashed:
                  description: Files written after the install that were hashed.
                  type: int
                unhashed:
                  description: Files written after the install left unhashed by the per-call budget (512 MiB).
                  type: int
        deepspeed:
          description: DeepSpeed in the venv.
          type: dict
          contains:
            version:
              description:
                - C(deepspeed.__version__) (the installed distribution's version when the import fails).
                - With O(python_probe=files), the C(Version) of DeepSpeed's dist-info, else the
                  C(version) of C(deepspeed/git_version_info_installed.py).
              type: str
            error:
              description:
                - The import error, e.g. the NumPy 2 failure of DeepSpeed 0.9.2, or null (O(python_probe=import)).
                - With O(python_probe=files), a missing DeepSpeed or a half-removed install
                  (dist-info without the package, a package without dist-info).
              type: str
            source:
              description: C(files) or C(import).
              type: str
            files:
              description:
                - The installed files against pip's C(RECORD) in the dist-info, with either O(python_probe);
                  every file listed with a size must exist with that size (missing, cut short or grown files),
                  and a file written after pip wrote C(RECORD) (a newer mtime, or a newer ctime as after an edit whose
                  mtime was set back) must still have its recorded sha256 (a same-size edit). Byte code is judged
                  by its source (pip compiles it again over a wheel's own C(.pyc)). No process is started; an
                  C(.egg-info) install has no RECORD.
              type: dict
              contains:
                source:
                  description: The record compared against; null when there was none to compare.
                  type: str
                checked:
                  description: How many files were compared.
                  type: int
                bad_count:
                  description: How many of them are missing or differ.
                  type: int
                bad:
                  description: "The first five, one line each, for example C(torch/lib/libtorch_cpu.so: 1048576 bytes, RECORD says 452984832)."
                  type: list
                  elements: str
                error:
                  description: Why the files could not be compared, or null.
                  type: str
                hashed:
                  description: Files written after the install that were hashed.
                  type: int
                unhashed:
                  description: Files written after the install left unhashed by the per-call budget (512 MiB).
                  type: int
        venv:
          description: The venv given.
          type: str
        megatron_deepspeed:
          description: The Megatron-DeepSpeed checkout.
          type: dict
          contains:
            path:
              description: The directory given.
              type: str
            commit:
              description: HEAD commit.
              type: str
            present:
              description: The directory holds C(pretrain_gpt.py) or C(megatron/).
              type: bool
            files:
              description:
                - The tracked files against git's index (C(.git/index)), without running git. It finds missing,
                  changed (sizes compared, and content hashed as git does where the mtime differs), type and
                  executable-bit changes, unmerged entries. Untracked files are not looked at; a checkout
                  that is not a git repository (an archive) has nothing to compare.
              type: dict
              contains:
                source:
                  description: The record compared against; null when there was none to compare.
                  type: str
                checked:
                  description: How many files were compared.
                  type: int
                bad_count:
                  description: How many of them are missing or differ.
                  type: int
                bad:
                  description: "The first five, one line each, for example C(torch/lib/libtorch_cpu.so: 1048576 bytes, RECORD says 452984832)."
                  type: list
                  elements: str
                error:
                  description: Why the files could not be compared, or null.
                  type: str
            imports:
              description:
                - The start-up imports of O(megatron_entry), walked statically inside the checkout, and
                  the top-level modules from outside it that neither the venv nor the standard library
                  holds. Null when there is no checkout or no venv.
              type: dict
              contains:
                entry:
                  description: The entry script walked.
                  type: str
                accelerator:
                  description: The accelerator whose import branches were taken.
                  type: str
                walked:
                  description: How many modules of the checkout were parsed.
                  type: int
                outside:
                  description: How many top-level modules from outside the checkout were looked up.
                  type: int
                missing:
                  description: What resolves nowhere, each with C(module), C(imported_at) (up to three C(file:line)) and C(package).
                  type: list
                  elements: dict
                error:
                  description: A file that could not be read or parsed, or null.
                  type: str
        apex:
          description: NVIDIA apex in the venv (PyPI's unrelated C(apex) package does not count).
          type: dict
          contains:
            present:
              description: NVIDIA apex imports (with O(python_probe=files), C(apex/normalization) or C(apex/optimizers) exists).
              type: bool
            cuda_ext:
              description: C(amp_C) and C(fused_layer_norm_cuda) import after torch (with O(python_probe=files), their C(.so) files exist).
              type: bool
            error:
              description: What is missing or failed to import, or null.
              type: str
            source:
              description: C(files) or C(import).
              type: str
            files:
              description:
                - The installed files against pip's C(RECORD) in the dist-info, with either O(python_probe);
                  every file listed with a size must exist with that size (missing, cut short or grown files),
                  and a file written after pip wrote C(RECORD) (a newer mtime, or a newer ctime as after an edit whose
                  mtime was set back) must still have its recorded sha256 (a same-size edit). Byte code is judged
                  by its source (pip compiles it again over a wheel's own C(.pyc)). No process is started; an
                  C(.egg-info) install has no RECORD.
              type: dict
              contains:
                source:
                  description: The record compared against; null when there was none to compare.
                  type: str
                checked:
                  description: How many files were compared.
                  type: int
                bad_count:
                  description: How many of them are missing or differ.
                  type: int
                bad:
                  description: "The first five, one line each, for example C(torch/lib/libtorch_cpu.so: 1048576 bytes, RECORD says 452984832)."
                  type: list
                  elements: str
                error:
                  description: Why the files could not be compared, or null.
                  type: str
                hashed:
                  description: Files written after the install that were hashed.
                  type: int
                unhashed:
                  description: Files written after the install left unhashed by the per-call budget (512 MiB).
                  type: int
        packages:
          description:
            - Every distribution of the venv (C(lib/python3*/site-packages)), read from files with either
              O(python_probe), for the cross-node comparison and the RECORD check of the packages that
              torch, DeepSpeed and apex do not cover.
          type: dict
          contains:
            installed:
              description: Normalized distribution name (PEP 503, with C(_)) to version; a name installed twice gives both, comma separated.
              type: dict
              sample: {"numpy": "2.2.6", "torch": "2.13.0+cpu", "typing_extensions": "4.16.0"}
            files:
              description: The RECORD check of every other distribution, as for C(torch.files), summed.
              type: dict
              contains:
                source:
                  description: What was compared.
                  type: str
                checked:
                  description: How many files were compared.
                  type: int
                bad_count:
                  description: How many of them are missing or differ.
                  type: int
                bad:
                  description:
                    - "The first five, each prefixed with the distribution, for example
                      C(numpy 2.2.6: numpy/_core/_multiarray_umath.cpython-311-x86_64-linux-gnu.so: 4096 bytes, RECORD says 10578456)."
                  type: list
                  elements: str
                error:
                  description: The first distribution whose files could not be compared, and why; or null.
                  type: str
                distributions:
                  description: How many distributions were compared.
                  type: int
                bad_distributions:
                  description: C(name==version) of every distribution with a bad file, for the reinstall.
                  type: list
                  elements: str
                hashed:
                  description: Files written after the install that were hashed.
                  type: int
                unhashed:
                  description: Files written after the install left unhashed by the per-call budget.
                  type: int
            unowned:
              description:
                - What Python runs or imports from the venv's site-packages that no distribution's record owns
                  (a C(RECORD) line, or an C(.egg-info)'s C(installed-files.txt) and C(top_level.txt)); null
                  without a venv.
              type: dict
              contains:
                count:
                  description: How many such entries there are.
                  type: int
                entries:
                  description: The first twenty.
                  type: list
                  elements: dict
                  contains:
                    path:
                      description: Its node path.
                      type: str
                    kind:
                      description:
                        - C(pth) (site.py runs its C(import) lines at every interpreter start and adds its other
                          lines to C(sys.path)), C(startup) (C(sitecustomize) or C(usercustomize), imported at every
                          start), C(module) or C(package) (importable by its name).
                      type: str
                    detail:
                      description: "What Python does with it, for example C(1 import line(s) run at every interpreter start: import os; ...)."
                      type: str
            pins:
              description:
                - The exact pins (C(name==version) lines) of the constraints file that the python_env role writes into
                  the venv (C(megatron-ds/constraints.txt)) and passes to every pip call; null where the venv has none.
              type: dict
              contains:
                source:
                  description: The file's node path.
                  type: str
                pins:
                  description: Normalized distribution name to the pinned version.
                  type: dict
                  sample: {"numpy": "2.2.6", "deepspeed": "0.19.6"}
        nccl_env:
          description:
            - The C(NCCL_*) variables a rank gets on this node, from files read without running them, in the
              order they apply (C(/etc/environment), the training user's C(~/.ssh/environment),
              C(/etc/bash.bashrc), its C(~/.bashrc), then O(nccl_env_file) and O(nccl_env_dir)C(/*.env)).
              Nothing but C(NCCL_*) assignments is kept.
          type: dict
          contains:
            user:
              description: O(training_user).
              type: str
            values:
              description: Each variable's last value.
              type: dict
              sample: {"NCCL_IB_HCA": "=mlx5_0:1", "NCCL_SOCKET_IFNAME": "eth1"}
            sources:
              description: The file that set each variable last.
              type: dict
            read:
              description: The files that exist and were read.
              type: list
              elements: str
            error:
              description: Why the user's files could not be read, or null.
              type: str
        infiniband:
          description: RDMA devices from C(/sys/class/infiniband) and GPUDirect modules from C(/proc/modules).
          type: dict
          contains:
            hcas:
              description: One entry per HCA.
              type: list
              elements: dict
              contains:
                name:
                  description: Device name, e.g. C(mlx5_0).
                  type: str
                ports:
                  description: Its ports, with the words the kernel writes in sysfs.
                  type: list
                  elements: dict
                  contains:
                    port:
                      description: Port number.
                      type: int
                    state:
                      description: C(ACTIVE), C(INIT), C(ARMED), C(DOWN), ... (the number the kernel prefixes is dropped).
                      type: str
                    phys_state:
                      description: C(LinkUp), C(Polling), C(Disabled), ...
                      type: str
                    rate:
                      description: As sysfs writes it, for example V(200 Gb/sec (4X HDR\)).
                      type: str
                    link_layer:
                      description: C(InfiniBand) or C(Ethernet) (RoCE).
                      type: str
            peermem_loaded:
              description: C(nvidia_peermem) (or the older C(nv_peer_mem)) is loaded.
              type: bool
            peermem_module:
              description: Which of C(nvidia_peermem) and C(nv_peer_mem) is loaded, or null.
              type: str
            memory_peers:
              description: The peer-memory clients registered in C(/sys/kernel/mm/memory_peers) (C(nv_mem), C(nv_mem_nc)), which NCCL before 2.23.4 looks for.
              type: list
              elements: str
        memlock:
          description: Locked-memory limit in KiB, as C(ulimit -l) prints it.
          type: dict
          contains:
            current:
              description: The module process's soft limit, C(unlimited) or a number.
              type: str
            hard:
              description: The module process's hard limit, the ceiling no limits.d file can raise past.
              type: str
            container:
              description: Why the node looks like a container (C(/.dockerenv), PID 1's C(container=), its cgroup), or null.
              type: str
            noninteractive_ssh:
              description: C(ulimit -l) in an ssh session of O(ssh_user) on localhost; null when unchecked or failed.
              type: str
            noninteractive_ssh_error:
              description: Why the ssh check gave no value, or null.
              type: str
        disk:
          description: For each of O(disk_paths), C(free_bytes) (int) and C(exists) (bool).
          type: dict
          sample: {"/data": {"free_bytes": 1048576000, "exists": true}}
        clock:
          description: Clock synchronisation.
          type: dict
          contains:
            synchronized:
              description: Synchronised to a time source; null when no tool answered.
              type: bool
            offset_ms:
              description: System clock minus NTP time in ms (C(chronyc) only).
              type: float
            source:
              description: C(chronyc) or C(timedatectl).
              type: str
        ssh_sweep:
          description: The ssh sweep of O(ssh_sweep_targets).
          returned: when O(ssh_sweep_targets) is set
          type: dict
          contains:
            user:
              description: The user the sweep ran as.
              type: str
            nodes:
              description:
                - One entry per address, in the order of O(ssh_sweep_targets); an address without
                  an answer (the sweep could not run or died) is left out.
              type: list
              elements: dict
              contains:
                address:
                  description: The address tried.
                  type: str
                rc:
                  description: ssh's exit code; 0 means reached, 255 a connection or authentication failure.
                  type: int
                memlock:
                  description: C(ulimit -l) in that non-interactive ssh session, C(-) where ssh failed.
                  type: str
            error:
              description: Why addresses are missing from C(nodes), or null.
              type: str
        converge:
          description:
            - One entry per converge stamp found in O(converge_dir), by role.
          returned: when O(converge_dir) is set
          type: dict
          sample: {"os_base": {"digest": "3f2a9c01d4e5b6a7", "inputs": {"os_base_extra_packages": "9b1c2d3e4f5a6b7c"}, "problems": []}}
          contains:
            digest:
              description: The digest of the role's inputs when it last finished here; null for an unreadable stamp.
              type: str
            inputs:
              description: The digest of each input (variable, collection, cluster members) the role recorded.
              type: dict
            problems:
              description: What no longer holds of the stamp, one line each (a managed file changed or gone, a service not active).
              type: list
              elements: str
        errors:
          description: Problems met while collecting, one line each, starting with the component.
          type: list
          elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.megatron_ds.cluster.plugins.module_utils._converge import stamps as _stamps
from ansible_collections.megatron_ds.cluster.plugins.module_utils._facts.collect import Host, collect


ARGUMENT_SPEC = dict(
    venv=dict(type="path"),
    python_probe=dict(type="str", choices=["files", "import"], default="files"),
    megatron_dir=dict(type="path"),
    megatron_entry=dict(type="str", default="pretrain_gpt.py"),
    accelerator=dict(type="str", choices=["cuda", "cpu"], default="cuda"),
    disk_paths=dict(type="list", elements="path", default=[]),
    ssh_user=dict(type="str"),
    ssh_sweep_targets=dict(type="list", elements="str", default=[]),
    ssh_sweep_user=dict(type="str"),
    root=dict(type="path", default="/"),
    timeout=dict(type="int", default=120),
    converge_dir=dict(type="path"),
    training_user=dict(type="str"),
    nccl_env_file=dict(type="path"),
    nccl_env_dir=dict(type="path"),
)


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    params = module.params
    if params["timeout"] <= 0:
        module.fail_json(msg="gpu_stack_facts: timeout is %s; give a positive number of seconds per command"
                         % params["timeout"])
    host = Host(root=params["root"], timeout=params["timeout"])
    facts = collect(host, venv=params["venv"], megatron_dir=params["megatron_dir"],
                    disk_paths=params["disk_paths"], ssh_user=params["ssh_user"],
                    python_probe=params["python_probe"], ssh_sweep_user=params["ssh_sweep_user"],
                    ssh_sweep_targets=params["ssh_sweep_targets"], megatron_entry=params["megatron_entry"],
                    accelerator=params["accelerator"], training_user=params["training_user"],
                    nccl_env_file=params["nccl_env_file"], nccl_env_dir=params["nccl_env_dir"])
    if params["converge_dir"]:
        # Files a stamp names are node paths: under O(root) like every other path read here.
        facts["converge"] = _stamps.read_stamps(host.path(params["converge_dir"]),
                                                lambda argv: host.run(argv, 30),
                                                lambda path: _stamps.file_signature(host.path(path)))
    module.exit_json(changed=False, ansible_facts={"gpu_stack_facts": facts})


if __name__ == "__main__":
    main()
