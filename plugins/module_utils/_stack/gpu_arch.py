# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU architectures against the stack profiles: which compute capability a GPU has, and whether a
profile's torch wheel and CUDA toolkit (which builds apex and DeepSpeed's ops on the node) carry code
for it.

A profile's ``arch`` entry (profiles.py) lists the ``sm_XY`` targets its torch wheel was built for
(``torch.cuda.get_arch_list()``) and the capability range its toolkit's nvcc builds for. A GPU of
capability X.Y runs a cubin built for X.Z with Z <= Y (CUDA's binary compatibility within a major), so
an A100 (8.0) runs torch's sm_80 code and an L40 (8.9) its sm_86 code, while an H100 (9.0) finds no
sm_9x code in torch 1.13.1+cu117 and stops at its first kernel.

No Ansible imports: unit-tested alone.
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, Mapping, Optional, Tuple

from . import profiles as _profiles

# Compute capability by GPU name, for the GPUs whose nvidia-smi XML names an architecture of several
# capabilities (Ampere, Blackwell) and for the planner's inventory names. Patterns are matched, in
# order, against the name lower-cased with every run of other characters made one space. Source:
# NVIDIA's CUDA GPU list (developer.nvidia.com/cuda-gpus) and its architecture matrix; verified
# here only for the H200 (torch reported 9.0 on the validation host).
GPU_CAPABILITY: Tuple[Tuple[str, str], ...] = (
    (r"\b(gh|h)(100|200|800)\b", "9.0"),
    (r"\bgb(200|300)\b|\bb(100|200|300)\b", "10.0"),
    (r"\ba(100|800|30)\b", "8.0"),
    (r"\ba(10|16|2|40)\b|\brtx a\d+\b", "8.6"),
    (r"\bl(4|20|40|40s)\b", "8.9"),
    (r"\bv100\b", "7.0"),
    (r"\bt4\b", "7.5"),
)


def parse_capability(value: Any) -> Optional[Tuple[int, int]]:
    """(major, minor) from "9.0", "sm_90", "90", 9.0 or (9, 0); None when it is none of these."""
    if isinstance(value, (tuple, list)) and len(value) == 2:
        try:
            return int(value[0]), int(value[1])
        except (TypeError, ValueError):
            return None
    text = str(value if value is not None else "").strip().lower()
    match = re.match(r"^(\d+)\.(\d+)$", text)
    if match:
        return int(match.group(1)), int(match.group(2))
    match = re.match(r"^(?:sm_|compute_)?(\d+)(\d)[a-z]?$", text)
    if match:
        return int(match.group(1)), int(match.group(2))
    return None


def show(capability: Optional[Tuple[int, int]]) -> str:
    return "%d.%d" % capability if capability else "unknown"


def capability_of(name: Optional[str], reported: Any = None) -> Optional[Tuple[int, int]]:
    """A GPU's compute capability: what nvidia-smi reported (gpu_stack_facts' compute_capability),
    else the one its name implies (GPU_CAPABILITY), else None."""
    parsed = parse_capability(reported)
    if parsed:
        return parsed
    text = re.sub(r"[^a-z0-9]+", " ", str(name or "").lower()).strip()
    for pattern, capability in GPU_CAPABILITY:
        if text and re.search(pattern, text):
            return parse_capability(capability)
    return None


def arch_of(profile: Any) -> Optional[Mapping[str, Any]]:
    """A profile's (a dict or a name) arch lists {torch, toolkit}; None for a profile without GPU
    code (cpu) or one the table does not know."""
    if not isinstance(profile, Mapping):
        try:
            profile = _profiles.get(profile)
        except _profiles.UnknownProfileError:
            return None
    return profile.get("arch")


def torch_runs_on(arch_list: List[str], capability: Tuple[int, int]) -> bool:
    """Whether a torch built for ``arch_list`` (sm_XY names) has code a GPU of ``capability`` runs:
    an sm of the same major and a minor no higher."""
    for arch in arch_list:
        built = parse_capability(arch)
        if built and built[0] == capability[0] and built[1] <= capability[1]:
            return True
    return False


def toolkit_builds_for(toolkit: List[str], capability: Tuple[int, int]) -> bool:
    """Whether a toolkit whose nvcc builds for capabilities ``toolkit`` = [lowest, highest] can build
    apex and DeepSpeed's ops for ``capability``."""
    low, high = parse_capability(toolkit[0]), parse_capability(toolkit[1])
    return bool(low and high and low <= capability <= high)


def judge(profile: Any, capability: Tuple[int, int]) -> Dict[str, Any]:
    """{fits, torch, toolkit, why, arch_list}: whether ``profile`` (a dict or a name) runs on GPUs of
    ``capability``; ``why`` names what lacks the code (empty when it fits, or for a profile with no
    GPU code: the cpu profile fits nothing and is not judged here)."""
    arch = arch_of(profile)
    if not arch:
        return {"fits": False, "torch": False, "toolkit": False, "why": "no GPU code", "arch_list": []}
    torch_ok = torch_runs_on(arch["torch"], capability)
    toolkit_ok = toolkit_builds_for(arch["toolkit"], capability)
    why = []
    if not torch_ok:
        why.append("its torch carries %s, no sm_%d%d-compatible code" % (" ".join(arch["torch"]), capability[0], capability[1]))
    if not toolkit_ok:
        why.append("its CUDA toolkit builds apex and DeepSpeed's ops for %s to %s only" % tuple(arch["toolkit"]))
    return {"fits": torch_ok and toolkit_ok, "torch": torch_ok, "toolkit": toolkit_ok, "why": "; ".join(why),
            "arch_list": list(arch["torch"])}


def profiles_for(capability: Tuple[int, int]) -> List[str]:
    """The GPU profiles whose torch and toolkit both carry code for ``capability``, by name."""
    return [name for name in _profiles.names()
            if _profiles.PROFILES[name].get("arch") and judge(name, capability)["fits"]]


def refusal(profile_name: str, gpu: str, capability: Tuple[int, int]) -> Optional[str]:
    """One sentence refusing ``profile_name`` on ``gpu`` and naming the profiles that fit; None
    when the profile fits (or has no GPU code to judge)."""
    verdict = judge(profile_name, capability)
    if verdict["fits"] or not arch_of(profile_name):
        return None
    fitting = profiles_for(capability)
    return ("stack profile %s cannot run on %s (compute capability %s): %s; set megatron_stack_profile to %s"
            % (profile_name, gpu, show(capability), verdict["why"],
               " or ".join(fitting) if fitting else "a profile built for it (none in the table is)"))
