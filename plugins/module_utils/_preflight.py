# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The preflight gate: every node's gpu_stack_facts against the stack profile and each other.

Pure functions, no Ansible imports: ``run_checks`` turns the facts of every node into rows
(one per check and node), ``summary_line`` says the verdict; ``_report`` prints them.
The action plugin ``megatron_ds.cluster.preflight`` is a thin adapter around them.

Three kinds of check, in this order:

* the matrix, per node: each installed version against the profile and against the rules
  that NVIDIA and DeepSpeed enforce at run time (driver minimum per CUDA release, fabric
  manager == driver, DeepSpeed's nvcc-vs-torch rule, ...);
* across nodes: every version and path identical on all nodes, clocks in sync;
* the cluster: hostfile slots == GPUs, memlock, InfiniBand, peermem, disk, ssh from the head.

A row names the node, the component, the value found, the value expected and the fix.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import asdict, dataclass
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from . import _report
from ._stack_profiles import DS_CUDA_MINOR_MISMATCH_OK, min_driver_for_cuda
from ._versions import compare, local_label, major, major_minor, parse, satisfies

PASS = "pass"
FAIL = "fail"
WARN = "warn"
SKIP = "skip"
STATUSES = (PASS, FAIL, WARN, SKIP)

ALL_NODES = "all"
MISSING = "missing"
DEFAULT_MAX_CLOCK_OFFSET_MS = 100.0
UNLIMITED = ("unlimited", "infinity", "-1")

COLLECTION = "megatron_ds.cluster"


@dataclass
class Row:
    """One line of the verdict: a check on one node (or on ``all`` of them)."""

    check: str
    status: str
    node: str
    component: str
    found: str = ""
    expected: str = ""
    fix: str = ""

    def as_dict(self) -> Dict[str, str]:
        return asdict(self)


# ---------------------------------------------------------------------------------------
# Small helpers: reading facts, normalising versions
# ---------------------------------------------------------------------------------------


def _get(data: Any, *path: str) -> Any:
    """``data[path[0]][path[1]]...``, None as soon as a level is missing or not a mapping."""
    for key in path:
        if not isinstance(data, Mapping):
            return None
        data = data.get(key)
    return data


def _text(value: Any) -> Optional[str]:
    """A fact as a stripped string; None for null, '' and empty containers."""
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        value = ".".join(str(part) for part in value)
    text = str(value).strip()
    return text or None


def _show(value: Any) -> str:
    text = _text(value)
    return MISSING if text is None else text


def _version(facts: Mapping[str, Any], *path: str) -> Optional[str]:
    """A version fact as text. Library versions arrive dotted: gpu_stack_facts decodes torch's
    cuDNN and NCCL codes on the node (_gpu_facts.cudnn_version_from_int, nccl_version_from_torch),
    once, so the gate never decodes them again."""
    return _text(_get(facts, *path))


def _satisfies(version: Optional[str], spec: Optional[str]) -> Optional[bool]:
    """satisfies() that answers None instead of raising on a garbled version."""
    if version is None or spec is None:
        return None
    try:
        return satisfies(version, spec)
    except ValueError:
        return None


def _mm(version: Optional[str]) -> Optional[str]:
    if version is None:
        return None
    try:
        return major_minor(version)
    except ValueError:
        return None


def _is_plain_version(spec: str) -> bool:
    """'11.7.1' or '2.28' (a prefix), not '>=0.16.1,<=0.19.6'."""
    try:
        parse(spec)
    except ValueError:
        return False
    return not any(ch in spec for ch in "<>=!~,*")


def nvcc_torch_compatible(nvcc: str, torch_cuda: str) -> bool:
    """DeepSpeed's op_builder rule (assert_no_cuda_mismatch), docs/upstream-facts.md §D4.

    nvcc and torch.version.cuda must agree on major.minor, except that a minor mismatch is
    allowed when both minors are listed in cuda_minor_mismatch_ok for that major. CUDA 13
    has no entry there, so 13.x must match exactly; different majors never match.
    """
    have, want = major_minor(nvcc), major_minor(torch_cuda)
    if have == want:
        return True
    if major(have) != major(want):
        return False
    allowed = DS_CUDA_MINOR_MISMATCH_OK.get(major(have), [])
    return have in allowed and want in allowed


def _nvcc_version(facts: Mapping[str, Any]) -> Optional[str]:
    nvcc = _text(_get(facts, "cuda", "nvcc_version"))
    if nvcc is None and _text(_get(facts, "cuda", "source")) == "nvcc":
        nvcc = _text(_get(facts, "cuda", "version"))
    return nvcc


def _torch_unusable(facts: Mapping[str, Any]) -> Optional[str]:
    """Why torch's own values cannot be trusted on this node (torch.version says it), or None.

    A torch whose version is known but that carries an error (an import that fails, a
    half-removed install) reports no meaningful CUDA, cuDNN or NCCL: the checks that read them
    skip, and torch.version fails once for all of them.
    """
    if _text(_get(facts, "torch", "version")) is None:
        return "torch is not importable (see torch.version)"
    if _text(_get(facts, "torch", "error")) is not None:
        return "torch is broken on this node (see torch.version)"
    return None


def _broken_install(ctx: "_Context", node: str, facts: Mapping[str, Any], component: str, spec_key: str) -> str:
    """The fix for a package whose version is there but which does not import or is half removed."""
    venv = _text(_get(facts, "venv")) or "<venv>"
    return (
        "reinstall %s in the venv on %s: %s/bin/pip install --force-reinstall --no-deps '%s' (pip and %s "
        "take the recorded version as installed and skip it), then rerun %s" % (
            component, node, venv, ctx.spec(spec_key, "pip"), _role("python_env"), _role("python_env"))
    )


def _unwrap(node_facts: Any) -> Any:
    """Accept the facts themselves or the module result that carries them."""
    if isinstance(node_facts, Mapping):
        if isinstance(node_facts.get("gpu_stack_facts"), Mapping):
            return node_facts["gpu_stack_facts"]
        inner = _get(node_facts, "ansible_facts", "gpu_stack_facts")
        if isinstance(inner, Mapping):
            return inner
    return node_facts


def _usable(node_facts: Any) -> bool:
    """Facts from a node that answered: a mapping carrying at least one known section."""
    return isinstance(node_facts, Mapping) and any(
        key in node_facts for key in ("driver", "gpus", "python", "torch", "hostname")
    )


def _role(name: str) -> str:
    return "the %s.%s role" % (COLLECTION, name)


def _gb(num_bytes: float) -> str:
    return "%.1f GB" % (num_bytes / 1e9)


# ---------------------------------------------------------------------------------------
# The check context: profile, options and the nodes that answered
# ---------------------------------------------------------------------------------------


class _Context(object):
    def __init__(self, facts_by_node: Mapping[str, Any], profile: Mapping[str, Any], options: Mapping[str, Any]):
        self.profile = profile
        self.name = str(profile.get("name") or "?")
        self.options = dict(options or {})
        self.cuda = profile.get("accelerator") == "cuda"
        self.nodes: "OrderedDict[str, Mapping[str, Any]]" = OrderedDict()
        self.missing: "OrderedDict[str, str]" = OrderedDict()
        names = list(facts_by_node or {})
        for extra in (self.options.get("slots") or {}, self.options.get("ssh_reachable") or {}):
            names.extend(node for node in extra if node not in names)
        for node in sorted(names):
            raw = (facts_by_node or {}).get(node)
            facts = _unwrap(raw)
            if _usable(facts):
                self.nodes[node] = facts
            else:
                self.missing[node] = _missing_reason(raw, node in (facts_by_node or {}))

    def spec(self, *path: str) -> Any:
        return _get(self.profile, *path)

    def pip_version(self, component: str) -> str:
        """The exact version the python_env role installs ('torch==1.13.1' -> '1.13.1')."""
        pip = str(self.spec(component, "pip") or "")
        return pip.partition("==")[2] or str(self.spec(component, "version"))


def _missing_reason(raw: Any, listed: bool) -> str:
    if not listed:
        return "not in the play: no facts gathered"
    if isinstance(raw, Mapping):
        if raw.get("failed"):
            return "gpu_stack_facts failed: %s" % (_text(raw.get("msg")) or "no message")
        if raw.get("skipped"):
            return "gpu_stack_facts was skipped on this node"
    return "no gpu_stack_facts (unreachable, or the facts task did not run)"


# What a connection plugin leaves in a task result when the node is not there. The ssh plugin
# marks the result unreachable. The docker plugin does not: `docker exec` into a stopped
# container fails like a module, with the daemon's words on stderr (and Ansible then says
# "Module result deserialization failed: No start of json char found").
_CONNECTION_ERRORS = (
    "is not running", "No such container", "Cannot connect to the Docker daemon", "is paused", "is restarting",
    "Connection refused", "Connection timed out", "No route to host", "Could not resolve hostname",
    "Connection reset by peer", "Host key verification failed", "Permission denied (publickey",
)


def unreachable_error(raw: Any) -> Optional[str]:
    """The connection's last error when ``raw`` (a registered task result) says the node could
    not be reached; None when it answered (even with a failure of its own)."""
    if not isinstance(raw, Mapping):
        return None
    if raw.get("unreachable"):
        return _text(raw.get("msg")) or "no error message"
    if not raw.get("failed"):
        return None
    for key in ("module_stderr", "stderr", "msg", "module_stdout"):
        for line in str(raw.get(key) or "").splitlines():
            if any(words in line for words in _CONNECTION_ERRORS):
                return line.strip()
    return None


def describe_connection(node: str, variables: Optional[Mapping[str, Any]]) -> str:
    """How Ansible reaches ``node``, from its variables: 'ssh ops@10.0.0.5:22', 'docker container
    node3', 'local'."""
    variables = variables or {}
    plugin = _text(variables.get("ansible_connection")) or "ssh"
    short = plugin.rsplit(".", 1)[-1]
    host = _text(variables.get("ansible_host")) or node
    if short in ("docker", "docker_api", "podman"):
        return "%s container %s" % ("podman" if short == "podman" else "docker", host)
    if short == "local":
        return "local"
    if short in ("ssh", "paramiko_ssh", "paramiko", "smart"):
        user = _text(variables.get("ansible_user"))
        return "ssh %s%s:%s" % (user + "@" if user else "", host, _text(variables.get("ansible_port")) or "22")
    return "%s %s" % (plugin, host)


def _unreachable_fix(node: str, connection: str) -> str:
    if connection.startswith("docker container ") or connection.startswith("podman container "):
        engine, _word, name = connection.split(" ", 2)
        return "start the container (%s start %s), then rerun playbooks/preflight.yml" % (engine, name)
    if connection.startswith("ssh "):
        target = connection[4:]
        host, _sep, port = target.rpartition(":")
        return ("bring %s up and let Ansible in (ssh -p %s %s true must work: the machine is on, sshd listens, "
                "the key is accepted), then rerun playbooks/preflight.yml" % (node, port, host))
    return "make %s reachable over %s, then rerun playbooks/preflight.yml" % (node, connection)


def _row(check: str, status: str, node: str, component: str, found: Any = "", expected: Any = "", fix: str = "") -> Row:
    return Row(
        check=check,
        status=status,
        node=node,
        component=component,
        found="" if found is None else str(found),
        expected="" if expected is None else str(expected),
        fix=fix,
    )


# ---------------------------------------------------------------------------------------
# Matrix checks: one function per check, each returns the row for one node
# ---------------------------------------------------------------------------------------

NodeCheck = Callable[[_Context, str, Mapping[str, Any]], Optional[Row]]


def _cpu_skip(ctx: _Context, check: str, node: str, component: str) -> Optional[Row]:
    if ctx.cuda:
        return None
    return _row(check, SKIP, node, component, fix="profile %s runs on CPU: no %s needed" % (ctx.name, component))


def check_driver(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Row:
    check, comp = "driver.version", "driver"
    skipped = _cpu_skip(ctx, check, node, comp)
    if skipped:
        return skipped
    found = _text(_get(facts, "driver", "version"))
    needs: List[Tuple[str, str]] = []
    if ctx.spec("driver", "min"):
        needs.append((str(ctx.spec("driver", "min")), "profile %s minimum" % ctx.name))
    toolkit = _text(_get(facts, "cuda", "version"))
    torch_cuda = _text(_get(facts, "torch", "cuda"))
    for what, cuda in (("CUDA toolkit", toolkit), ("torch built for CUDA", torch_cuda)):
        if cuda:
            try:
                need = min_driver_for_cuda(cuda)
            except ValueError:
                need = None
            if need:
                needs.append((need, "%s %s" % (what, cuda)))
    if not needs:
        return _row(check, SKIP, node, comp, found, fix="no driver minimum known for this stack")
    floor = needs[0][0]
    for need, _why in needs[1:]:
        if compare(need, floor) > 0:
            floor = need
    why = ", ".join(reason for need, reason in needs if compare(need, floor) == 0)
    expected = ">= %s (%s)" % (floor, why)
    install = ctx.spec("driver", "install") or floor
    if compare(str(install), floor) < 0:
        install = floor
    fix = "install NVIDIA driver %s or newer on %s with %s, then reboot" % (install, node, _role("nvidia_driver"))
    if found is None:
        return _row(check, FAIL, node, comp, MISSING, expected, "no NVIDIA driver loaded: " + fix)
    try:
        ok = compare(found, floor) >= 0
    except ValueError:
        return _row(check, FAIL, node, comp, found, expected, "unreadable driver version: " + fix)
    return _row(check, PASS if ok else FAIL, node, comp, found, expected, "" if ok else fix)


def check_fabric_manager(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Row:
    check, comp = "fabric_manager.version", "fabric_manager"
    skipped = _cpu_skip(ctx, check, node, comp)
    if skipped:
        return skipped
    if not _get(facts, "nvswitch", "present"):
        return _row(check, SKIP, node, comp, fix="no NVSwitch on this node: fabric manager not needed")
    driver = _text(_get(facts, "driver", "version"))
    version = _text(_get(facts, "fabric_manager", "version"))
    installed = _get(facts, "fabric_manager", "installed")
    active = _get(facts, "fabric_manager", "active")
    expected = "%s (== driver), service active" % _show(driver)
    pin = "install nvidia-fabricmanager pinned to driver %s (and libnvidia-nscq) on %s with %s" % (
        _show(driver),
        node,
        _role("nvidia_driver"),
    )
    if not installed or version is None:
        return _row(check, FAIL, node, comp, "not installed", expected, pin + "; NVSwitch systems fail CUDA init without it")
    try:
        same = driver is not None and parse(version) == parse(driver)
    except ValueError:
        same = False
    if not same:
        return _row(check, FAIL, node, comp, version, expected, pin + ": fabric manager refuses to start on another driver version")
    if not active:
        return _row(
            check, FAIL, node, comp, "%s, not active" % version, expected,
            "start and enable nvidia-fabricmanager on %s (systemctl enable --now nvidia-fabricmanager)" % node,
        )
    return _row(check, PASS, node, comp, "%s, active" % version, expected)


def check_cuda_toolkit(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Row:
    check, comp = "cuda.toolkit", "cuda"
    skipped = _cpu_skip(ctx, check, node, comp)
    if skipped:
        return skipped
    spec = str(ctx.spec("cuda", "version"))
    found = _text(_get(facts, "cuda", "version"))
    source = _text(_get(facts, "cuda", "source")) or "unknown source"
    fix = "install CUDA %s (profile %s) on %s with %s" % (ctx.spec("cuda", "install") or spec, ctx.name, node, _role("cuda_toolkit"))
    if found is None:
        return _row(check, FAIL, node, comp, MISSING, spec, "no CUDA toolkit found: " + fix)
    shown = "%s (%s)" % (found, source)
    ok = _satisfies(found, spec)
    if not ok and _is_plain_version(spec) and _mm(found) is not None and _mm(found) == _mm(spec):
        # nvcc, ptxas and library names carry the release (13.0) and a component version
        # (13.0.88), never the toolkit update (11.7.1); version.json from 11.8 on is reported
        # as major.minor. Where the update is not visible, judge at major.minor.
        if source != "version.json" or len(parse(found)) < len(parse(spec)):
            return _row(check, PASS, node, comp, shown + "; update level not visible", spec)
    if ok is None:
        return _row(check, FAIL, node, comp, shown, spec, "unreadable CUDA version: " + fix)
    return _row(check, PASS if ok else FAIL, node, comp, shown, spec, "" if ok else fix)


def check_nvcc_torch(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Row:
    check, comp = "cuda.nvcc_vs_torch", "nvcc"
    skipped = _cpu_skip(ctx, check, node, comp)
    if skipped:
        return skipped
    torch_cuda = _text(_get(facts, "torch", "cuda"))
    unusable = _torch_unusable(facts)
    if unusable:
        return _row(check, SKIP, node, comp, fix=unusable)
    if torch_cuda is None:
        return _row(check, SKIP, node, comp, fix="torch is a CPU build (see torch.cuda)")
    nvcc = _nvcc_version(facts)
    want = _mm(torch_cuda)
    try:
        minors = DS_CUDA_MINOR_MISMATCH_OK.get(major(torch_cuda), [])
    except ValueError:
        minors = []
    if want in minors:
        expected = "nvcc %s-%s (DeepSpeed's minor-mismatch list)" % (minors[0], minors[-1])
    else:
        expected = "nvcc %s exactly (DeepSpeed's rule)" % want
    if nvcc is None:
        return _row(
            check, FAIL, node, comp, "nvcc not found", expected,
            "install the CUDA %s toolkit on %s with %s: Megatron's fused-kernel loader and DeepSpeed's "
            "op builder run CUDA_HOME/bin/nvcc" % (_mm(torch_cuda), node, _role("cuda_toolkit")),
        )
    try:
        ok = nvcc_torch_compatible(nvcc, torch_cuda)
    except ValueError:
        ok = False
    fix = (
        "make nvcc and torch agree on %s: install CUDA %s with %s, or torch built for CUDA %s with "
        "%s; DeepSpeed refuses to build ops otherwise" % (node, _mm(torch_cuda), _role("cuda_toolkit"), _mm(nvcc), _role("python_env"))
    )
    return _row(check, PASS if ok else FAIL, node, comp, "nvcc %s, torch.version.cuda %s" % (nvcc, torch_cuda), expected, "" if ok else fix)


def check_cudnn_system(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Row:
    check, comp = "cudnn.system", "cudnn"
    skipped = _cpu_skip(ctx, check, node, comp)
    if skipped:
        return skipped
    spec = str(ctx.spec("cudnn", "version"))
    cuda_major = ctx.spec("cudnn", "cuda_major")
    expected = "%s (cuda%s build)" % (spec, cuda_major) if cuda_major else spec
    found = _version(facts, "cudnn", "version")
    fix = "install cuDNN %s (profile %s) on %s with %s" % (ctx.spec("cudnn", "install") or spec, ctx.name, node, _role("cudnn"))
    if found is None:
        return _row(check, FAIL, node, comp, MISSING, expected, "no system cuDNN found: " + fix)
    source = _text(_get(facts, "cudnn", "source"))
    shown = "%s (%s)" % (found, source) if source else found
    ok = _satisfies(found, spec)
    if ok:
        return _row(check, PASS, node, comp, shown, expected)
    try:
        wrong_major = major(found) != major(spec)
    except ValueError:
        wrong_major = True
    if wrong_major:
        fix += "; cuDNN %s is another major, which extensions built against cuDNN %s cannot load" % (
            _show(found).split(".", 1)[0], spec.split(".", 1)[0])
    return _row(check, FAIL, node, comp, shown, expected, fix)


def _torch_child(ctx: _Context, check: str, comp: str, node: str, facts: Mapping[str, Any], what: str) -> Row:
    """torch's bundled cuDNN / NCCL: the versions torch actually loads (docs/upstream-facts.md §H)."""
    skipped = _cpu_skip(ctx, check, node, comp)
    if skipped:
        return skipped
    unusable = _torch_unusable(facts)
    if unusable:
        return _row(check, SKIP, node, comp, fix=unusable)
    if _text(_get(facts, "torch", "cuda")) is None:
        return _row(check, SKIP, node, comp, fix="torch is a CPU build (see torch.cuda)")
    found = _version(facts, "torch", what)
    spec = ctx.spec("torch", what)
    if spec is None:
        return _row(check, PASS, node, comp, _show(found), "not pinned by profile %s (reported only)" % ctx.name)
    fix = "reinstall torch %s from %s (profile %s) with %s on %s: torch loads its own %s, not the system one" % (
        ctx.pip_version("torch"), ctx.spec("torch", "index_url"), ctx.name, _role("python_env"), node,
        "cuDNN" if what == "cudnn" else "NCCL",
    )
    if found is None:
        if _text(_get(facts, "torch", "source")) == "files":
            # Read from files, a torch that bundles the library in torch/lib names no version.
            return _row(
                check, WARN, node, comp, "not readable from the venv's files", str(spec),
                "rerun with preflight_python_probe=import (gpu_stack_facts python_probe=import) to read "
                "the %s that torch loads on %s; if it is still missing: %s" % (
                    "cuDNN" if what == "cudnn" else "NCCL", node, fix),
            )
        return _row(check, FAIL, node, comp, MISSING, str(spec), fix)
    ok = _satisfies(found, str(spec))
    return _row(check, PASS if ok else FAIL, node, comp, found, str(spec), "" if ok else fix)


def check_cudnn_torch(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Row:
    return _torch_child(ctx, "cudnn.torch", "torch.cudnn", node, facts, "cudnn")


def check_nccl_system(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Row:
    check, comp = "nccl.system", "nccl"
    skipped = _cpu_skip(ctx, check, node, comp)
    if skipped:
        return skipped
    spec = str(ctx.spec("nccl", "version"))
    found = _version(facts, "nccl", "version")
    install = str(ctx.spec("nccl", "install") or spec)
    fix = "install NCCL %s (profile %s) on %s with %s" % (install, ctx.name, node, _role("nccl"))
    if found is None:
        return _row(check, FAIL, node, comp, MISSING, spec, "no system NCCL found: " + fix)
    ok = _satisfies(found, spec)
    return _row(check, PASS if ok else FAIL, node, comp, found, spec, "" if ok else fix)


def check_nccl_torch(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Row:
    return _torch_child(ctx, "nccl.torch", "torch.nccl", node, facts, "nccl")


def check_torch_version(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Row:
    check, comp = "torch.version", "torch"
    spec = str(ctx.spec("torch", "version"))
    label = ctx.spec("torch", "local")
    expected = "%s (+%s)" % (spec, label) if label else spec
    found = _text(_get(facts, "torch", "version"))
    fix = "run %s on %s so torch matches (%s from %s)" % (
        _role("python_env"), node, ctx.spec("torch", "pip"), ctx.spec("torch", "index_url"))
    error = _text(_get(facts, "torch", "error"))
    if found is None:
        shown = "not importable: %s" % error if error else MISSING
        return _row(check, FAIL, node, comp, shown, expected, fix)
    if error:
        # The version alone is what pip recorded; a torch that does not import (or is half
        # removed) must not pass on it.
        return _row(check, FAIL, node, comp, "%s, broken: %s" % (found, error), expected,
                    _broken_install(ctx, node, facts, "torch", "torch"))
    ok = _satisfies(found, spec)
    have_label = local_label(found)
    if ok and label and have_label and have_label != label:
        # A CUDA build of torch still runs on a CPU profile; only a CUDA profile needs the label.
        status = FAIL if ctx.cuda else WARN
        return _row(check, status, node, comp, found, expected, fix)
    return _row(check, PASS if ok else FAIL, node, comp, found, expected, "" if ok else fix)


def check_torch_cuda(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Row:
    check, comp = "torch.cuda", "torch"
    if not ctx.cuda:
        return _row(check, SKIP, node, comp, fix="profile %s runs on CPU: any torch build will do" % ctx.name)
    unusable = _torch_unusable(facts)
    if unusable:
        return _row(check, SKIP, node, comp, fix=unusable)
    spec = str(ctx.spec("torch", "cuda"))
    found = _text(_get(facts, "torch", "cuda"))
    fix = "run %s on %s so torch matches (a +%s build of %s)" % (
        _role("python_env"), node, ctx.spec("torch", "local"), ctx.spec("torch", "pip"))
    if found is None:
        return _row(check, FAIL, node, comp, "None (CPU-only torch)", spec, fix)
    ok = _mm(found) is not None and _mm(found) == _mm(spec)
    return _row(check, PASS if ok else FAIL, node, comp, found, spec, "" if ok else fix)


def check_deepspeed(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Row:
    check, comp = "deepspeed.version", "deepspeed"
    spec = str(ctx.spec("deepspeed", "version"))
    found = _text(_get(facts, "deepspeed", "version"))
    fix = "run %s on %s so DeepSpeed matches (%s)" % (_role("python_env"), node, ctx.spec("deepspeed", "pip"))
    error = _text(_get(facts, "deepspeed", "error"))
    if found is None:
        return _row(check, FAIL, node, comp, "not importable: %s" % error if error else MISSING, spec, fix)
    if error:
        return _row(check, FAIL, node, comp, "%s, broken: %s" % (found, error), spec,
                    _broken_install(ctx, node, facts, "DeepSpeed", "deepspeed"))
    ok = _satisfies(found, spec)
    return _row(check, PASS if ok else FAIL, node, comp, found, spec, "" if ok else fix)


def check_python(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Row:
    check, comp = "python.version", "python"
    spec = str(ctx.spec("python", "version"))
    found = _text(_get(facts, "python", "version"))
    fix = "rebuild the venv on %s with Python %s (profile %s allows %s) with %s" % (
        node, ctx.spec("python", "preferred"), ctx.name, spec, _role("python_env"))
    if found is None:
        return _row(check, FAIL, node, comp, MISSING, spec, fix)
    # Profiles name Python series ('<=3.11' means any 3.11.x), so compare major.minor.
    ok = _satisfies(_mm(found), spec)
    return _row(check, PASS if ok else FAIL, node, comp, found, spec, "" if ok else fix)


def check_apex(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Row:
    check, comp = "apex.cuda_ext", "apex"
    if not ctx.cuda:
        return _row(check, SKIP, node, comp, fix="profile %s runs on CPU: Megatron does not import apex there" % ctx.name)
    if not ctx.spec("megatron_deepspeed", "needs_apex"):
        return _row(check, SKIP, node, comp, fix="profile %s does not need apex" % ctx.name)
    present = bool(_get(facts, "apex", "present"))
    cuda_ext = bool(_get(facts, "apex", "cuda_ext"))
    found = "not installed" if not present else ("with CUDA extensions" if cuda_ext else "without CUDA extensions")
    ok = present and cuda_ext
    fix = (
        "build NVIDIA apex with --cpp_ext --cuda_ext against CUDA %s on %s with %s: Megatron-DeepSpeed "
        "imports amp_C and fused_layer_norm_cuda at start-up" % (ctx.spec("torch", "cuda"), node, _role("python_env"))
    )
    return _row(check, PASS if ok else FAIL, node, comp, found, "with CUDA extensions (amp_C, fused_layer_norm_cuda)", "" if ok else fix)


def check_gpus(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Row:
    check, comp = "gpu.present", "gpu"
    if not ctx.cuda:
        return _row(check, SKIP, node, comp, fix="profile %s runs on CPU" % ctx.name)
    count = _int(_get(facts, "gpus", "count")) or 0
    model = _text(_get(facts, "gpus", "model"))
    if count > 0:
        return _row(check, PASS, node, comp, "%d x %s" % (count, _show(model)), ">= 1 GPU")
    return _row(
        check, FAIL, node, comp, "no GPU", ">= 1 GPU",
        "nvidia-smi sees no GPU on %s: check the driver (%s) and the hardware, or use the cpu profile" % (node, _role("nvidia_driver")),
    )


def check_megatron(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Row:
    check, comp = "megatron_deepspeed.present", "megatron_deepspeed"
    path = _text(_get(facts, "megatron_deepspeed", "path"))
    if _get(facts, "megatron_deepspeed", "present"):
        commit = _text(_get(facts, "megatron_deepspeed", "commit"))
        shown = commit if commit else "no git commit (not a git checkout: an archive?)"
        return _row(check, PASS, node, comp, "%s at %s" % (shown, _show(path)), "a checkout (ref %s)" % ctx.spec("megatron_deepspeed", "ref"))
    # A warning, not a failure: preflight also runs right after provisioning, before the
    # checkout; the launch itself fails loudly without it.
    return _row(
        check, WARN, node, comp, "no checkout at %s" % _show(path), "a checkout (ref %s)" % ctx.spec("megatron_deepspeed", "ref"),
        "check out Megatron-DeepSpeed %s on %s with %s" % (ctx.spec("megatron_deepspeed", "ref"), node, _role("python_env")),
    )


# ---------------------------------------------------------------------------------------
# Damaged installs: what gpu_stack_facts found against pip's RECORD and git's index
# ---------------------------------------------------------------------------------------


def _files_found(files: Mapping[str, Any], against: str) -> str:
    bad = [str(item) for item in (files.get("bad") or [])]
    count = _int(files.get("bad_count")) or len(bad)
    shown = "; ".join(bad)
    if count > len(bad):
        shown += "; ... (%d more)" % (count - len(bad))
    return "%d of %d files differ from %s: %s" % (count, _int(files.get("checked")) or 0, against, shown)


def _files_row(ctx: _Context, node: str, facts: Mapping[str, Any], check: str, section: str, against: str,
               expected: str, fix: str, missing_is: str = FAIL) -> Row:
    comp = section
    files = _get(facts, section, "files")
    if not isinstance(files, Mapping):
        return _row(check, SKIP, node, comp, fix="gpu_stack_facts did not compare the files (an older collection)")
    if (_int(files.get("bad_count")) or 0) > 0 or files.get("bad"):
        return _row(check, missing_is, node, comp, _files_found(files, against), expected, fix)
    error = _text(files.get("error"))
    if error:
        return _row(check, WARN, node, comp, error, expected, fix)
    checked = _int(files.get("checked")) or 0
    if checked == 0:
        return _row(check, SKIP, node, comp, fix="nothing to compare on %s (not installed, or no %s)" % (node, against))
    return _row(check, PASS, node, comp, "%d files as recorded" % checked, expected)


def _reinstall_fix(ctx: _Context, node: str, facts: Mapping[str, Any], component: str, spec_key: str) -> str:
    venv = _text(_get(facts, "venv")) or "<venv>"
    index = ctx.spec(spec_key, "index_url") if spec_key == "torch" else None
    return (
        "reinstall %s on %s: %s/bin/pip install --force-reinstall --no-deps '%s'%s, then rerun "
        "playbooks/preflight.yml (re-running playbooks/provision.yml alone keeps it: pip takes the "
        "recorded version as installed)" % (
            component, node, venv, ctx.spec(spec_key, "pip"), " --index-url %s" % index if index else "")
    )


PIP_RECORD = "pip's RECORD"
PIP_EXPECTED = "every file pip installed, at its recorded size"


def check_torch_files(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Row:
    return _files_row(ctx, node, facts, "torch.files", "torch", PIP_RECORD, PIP_EXPECTED,
                      _reinstall_fix(ctx, node, facts, "torch", "torch"))


def check_deepspeed_files(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Row:
    return _files_row(ctx, node, facts, "deepspeed.files", "deepspeed", PIP_RECORD, PIP_EXPECTED,
                      _reinstall_fix(ctx, node, facts, "DeepSpeed", "deepspeed"))


def check_apex_files(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Row:
    venv = _text(_get(facts, "venv")) or "<venv>"
    fix = ("rebuild apex on %s: %s/bin/pip uninstall -y apex, then re-run playbooks/provision.yml (%s builds "
           "it again)" % (node, venv, _role("python_env")))
    # Only a profile whose Megatron-DeepSpeed imports apex fails on it; elsewhere it is a warning.
    needed = ctx.cuda and bool(ctx.spec("megatron_deepspeed", "needs_apex"))
    return _files_row(ctx, node, facts, "apex.files", "apex", PIP_RECORD, PIP_EXPECTED, fix, FAIL if needed else WARN)


def check_megatron_files(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Row:
    path = _text(_get(facts, "megatron_deepspeed", "path")) or "<checkout>"
    fix = ("restore the checkout on %s: git -C %s checkout -- . (or re-run playbooks/provision.yml with "
           "python_env_megatron_force=true, which resets it to ref %s)" % (node, path, ctx.spec("megatron_deepspeed", "ref")))
    return _files_row(ctx, node, facts, "megatron_deepspeed.files", "megatron_deepspeed", "git's index",
                      "every tracked file as checked out", fix)


MATRIX_CHECKS: Sequence[NodeCheck] = (
    check_gpus,
    check_driver,
    check_fabric_manager,
    check_cuda_toolkit,
    check_nvcc_torch,
    check_cudnn_system,
    check_cudnn_torch,
    check_nccl_system,
    check_nccl_torch,
    check_python,
    check_torch_version,
    check_torch_cuda,
    check_deepspeed,
    check_torch_files,
    check_deepspeed_files,
    check_apex,
    check_apex_files,
    check_megatron,
    check_megatron_files,
)


def _int(value: Any) -> Optional[int]:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


# ---------------------------------------------------------------------------------------
# Cross-node checks: every value identical on all nodes
# ---------------------------------------------------------------------------------------


def _torch_dependent(path: Tuple[str, ...]) -> Callable[[Mapping[str, Any]], Optional[str]]:
    def read(facts: Mapping[str, Any]) -> Optional[str]:
        return _version(facts, *path)

    return read


# (check id, component, what, reader, needs a GPU profile, role that fixes it)
SAME: Sequence[Tuple[str, str, str, Callable[[Mapping[str, Any]], Any], bool, str]] = (
    ("same.driver", "driver", "NVIDIA driver", lambda f: _text(_get(f, "driver", "version")), True, "nvidia_driver"),
    ("same.cuda", "cuda", "CUDA toolkit", lambda f: _text(_get(f, "cuda", "version")), True, "cuda_toolkit"),
    ("same.nvcc", "nvcc", "nvcc", _nvcc_version, True, "cuda_toolkit"),
    ("same.cudnn", "cudnn", "system cuDNN", lambda f: _version(f, "cudnn", "version"), True, "cudnn"),
    ("same.nccl", "nccl", "system NCCL", lambda f: _version(f, "nccl", "version"), True, "nccl"),
    ("same.python", "python", "Python", lambda f: _text(_get(f, "python", "version")), False, "python_env"),
    ("same.torch", "torch", "torch", lambda f: _text(_get(f, "torch", "version")), False, "python_env"),
    ("same.torch_cuda", "torch", "torch.version.cuda", lambda f: _text(_get(f, "torch", "cuda")), True, "python_env"),
    ("same.torch_cudnn", "torch.cudnn", "torch's bundled cuDNN", _torch_dependent(("torch", "cudnn")), True, "python_env"),
    ("same.torch_nccl", "torch.nccl", "torch's bundled NCCL", _torch_dependent(("torch", "nccl")), True, "python_env"),
    ("same.deepspeed", "deepspeed", "DeepSpeed", lambda f: _text(_get(f, "deepspeed", "version")), False, "python_env"),
    ("same.gpu_model", "gpu", "GPU model", lambda f: _text(_get(f, "gpus", "model")), True, ""),
    ("same.gpu_count", "gpu", "GPU count", lambda f: _text(_get(f, "gpus", "count")), True, ""),
    ("same.megatron_commit", "megatron_deepspeed", "Megatron-DeepSpeed commit",
     lambda f: _text(_get(f, "megatron_deepspeed", "commit")), False, "python_env"),
    ("same.megatron_path", "megatron_deepspeed", "Megatron-DeepSpeed path",
     lambda f: _text(_get(f, "megatron_deepspeed", "path")), False, "python_env"),
    ("same.venv", "venv", "venv path", lambda f: _text(_get(f, "venv")), False, "python_env"),
    ("same.python_executable", "venv", "Python executable path",
     lambda f: _text(_get(f, "python", "executable")), False, "python_env"),
)

# Values that only exist when torch imports (and, for its libraries, is a CUDA build): a
# node without them fails torch.version / torch.cuda and is left out of these comparisons,
# so one broken venv is reported once, not four times.
_NEEDS_TORCH = ("same.torch_cuda", "same.torch_cudnn", "same.torch_nccl")
_NEEDS_TORCH_CUDA = ("same.torch_cudnn", "same.torch_nccl")


def _left_out(check: str, facts: Mapping[str, Any]) -> bool:
    if check in _NEEDS_TORCH and _torch_unusable(facts):
        return True
    return check in _NEEDS_TORCH_CUDA and _text(_get(facts, "torch", "cuda")) is None


def _majority(values: "OrderedDict[str, str]") -> Tuple[Optional[str], List[str]]:
    """The value most nodes share (None on a tie) and the nodes that differ from it."""
    counts: Dict[str, int] = {}
    for value in values.values():
        counts[value] = counts.get(value, 0) + 1
    best = max(counts.values())
    leaders = [value for value, count in counts.items() if count == best]
    if len(leaders) > 1:
        return None, list(values)
    return leaders[0], [node for node, value in values.items() if value != leaders[0]]


def cross_node_rows(ctx: _Context) -> List[Row]:
    rows: List[Row] = []
    for check, comp, what, read, gpu_only, role in SAME:
        if gpu_only and not ctx.cuda:
            rows.append(_row(check, SKIP, ALL_NODES, comp, fix="profile %s runs on CPU" % ctx.name))
            continue
        values: "OrderedDict[str, str]" = OrderedDict()
        for node, facts in ctx.nodes.items():
            if _left_out(check, facts):
                continue
            values[node] = _show(read(facts))
        if not values:
            rows.append(_row(check, SKIP, ALL_NODES, comp, fix="no node reported it"))
            continue
        expected, odd = _majority(values)
        for node, value in values.items():
            if node not in odd:
                rows.append(_row(check, PASS, node, comp, value, "same on all nodes"))
                continue
            if expected is None:
                seen = "; ".join("%s on %s" % (v, n) for n, v in values.items())
                want = "one %s on all nodes (no majority: %s)" % (what, seen)
            else:
                want = "%s (as on the other nodes)" % expected
            if role:
                fix = "make the %s on %s match the other nodes: run %s on %s" % (what, node, _role(role), node)
            else:
                fix = "the %s on %s differs from the other nodes: replace the node or fix its hardware" % (what, node)
            if expected is None:
                fix += " (decide which value is right and apply it everywhere)"
            rows.append(_row(check, FAIL, node, comp, value, want, fix))
    return rows


def check_clock(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Row:
    check, comp = "clock.sync", "clock"
    limit = float(ctx.options.get("max_clock_offset_ms") or DEFAULT_MAX_CLOCK_OFFSET_MS)
    synced = _get(facts, "clock", "synchronized")
    offset = _get(facts, "clock", "offset_ms")
    source = _text(_get(facts, "clock", "source"))
    expected = "synchronized, |offset| <= %g ms" % limit
    try:
        offset_ms: Optional[float] = None if offset is None else float(offset)
    except (TypeError, ValueError):
        offset_ms = None
    found = "%s, offset %s" % (
        {True: "synchronized", False: "not synchronized"}.get(synced, "sync unknown"),
        "unknown" if offset_ms is None else "%g ms" % offset_ms,
    )
    if source:
        found += " (%s)" % source
    fix = "enable time sync (chrony/NTP) on %s with %s; skewed clocks break NCCL timeouts and log order" % (node, _role("os_base"))
    if synced is False or (offset_ms is not None and abs(offset_ms) > limit):
        if str(ctx.options.get("clock") or "required") == "advisory":
            return _row(check, WARN, node, comp, found, expected + " (clock: advisory)", fix)
        return _row(check, FAIL, node, comp, found, expected, fix)
    if synced is None and offset_ms is None:
        return _row(check, WARN, node, comp, found, expected, "could not read the clock state on %s: %s" % (node, fix))
    return _row(check, PASS, node, comp, found, expected)


# ---------------------------------------------------------------------------------------
# Cluster checks
# ---------------------------------------------------------------------------------------


def check_slots(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Optional[Row]:
    check, comp = "hostfile.slots", "hostfile"
    slots = ctx.options.get("slots")
    if slots is None:
        return _row(check, SKIP, node, comp, fix="no hostfile slots given")
    if not ctx.cuda:
        return _row(check, SKIP, node, comp, fix="profile %s: slots are CPU ranks, not GPUs" % ctx.name)
    gpus = _int(_get(facts, "gpus", "count")) or 0
    if node not in slots:
        return _row(
            check, WARN, node, comp, "not in the hostfile", "%d slots" % gpus,
            "add '%s slots=%d' to the hostfile, or take %s out of megatron_nodes" % (node, gpus, node),
        )
    want = _int(slots[node])
    ok = want == gpus
    fix = (
        "the hostfile gives %s slots=%s but nvidia-smi shows %d GPUs: set megatron_job_gpus_per_node "
        "to %d, or bring the missing GPUs back (%s)" % (node, _show(slots[node]), gpus, gpus, _role("nvidia_driver"))
    )
    return _row(check, PASS if ok else FAIL, node, comp, "%d GPUs" % gpus, "%s slots" % _show(slots[node]), "" if ok else fix)


def _limit_unlimited(value: Any) -> bool:
    return _text(value) is not None and str(_text(value)).lower() in UNLIMITED


MEMLOCK_MODES = ("auto", "required", "advisory")
CLOCK_MODES = ("required", "advisory")


def _rdma_active(facts: Mapping[str, Any]) -> bool:
    """Whether the node reports an Active InfiniBand/RoCE port: NCCL then uses it by default."""
    for hca in _get(facts, "infiniband", "hcas") or []:
        for port in _get(hca, "ports") or []:
            if "active" in _show(_get(port, "state")).lower():
                return True
    return False


def memlock_required(ctx: _Context, facts: Mapping[str, Any]) -> Tuple[bool, str]:
    """Whether this node needs unlimited memlock, and why. RDMA registers (pins) NCCL's buffers
    against RLIMIT_MEMLOCK; CUDA's pinned host memory does not count against it, so a node whose
    NCCL runs over sockets or NVLink only trains with a small limit."""
    mode = str(ctx.options.get("memlock") or "auto")
    if mode == "required":
        return True, "memlock: required"
    if mode == "advisory":
        return False, "memlock: advisory"
    if ctx.options.get("infiniband_required"):
        return True, "infiniband_required is true"
    if ctx.options.get("gpudirect"):
        return True, "gpudirect is true"
    if _rdma_active(facts):
        return True, "the node has an Active RDMA port, which NCCL uses"
    return False, "no Active RDMA port and infiniband_required false: NCCL uses sockets"


def check_memlock(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Row:
    check, comp = "memlock.unlimited", "memlock"
    current = _get(facts, "memlock", "current")
    ssh = _get(facts, "memlock", "noninteractive_ssh")
    if _text(ssh) is None:
        # playbooks/preflight.yml reads it in the head node's ssh sweep (the session pdsh opens).
        swept = _text((ctx.options.get("ssh_memlock") or {}).get(node))
        ssh = swept if swept not in (None, "-") else None
    found = "current %s" % _show(current)
    if _text(ssh) is not None:
        found += ", non-interactive ssh %s" % _show(ssh)
    required, why = memlock_required(ctx, facts)
    expected = "unlimited (also in a non-interactive ssh session)"
    if not required:
        expected += "; advised, not required (%s)" % why
    fix = (
        "set memlock unlimited on %s with %s (limits.d and pam_limits for sshd): NCCL over "
        "InfiniBand pins memory, and pdsh starts ranks in a non-interactive ssh session" % (node, _role("os_base"))
    )
    if _text(current) is None:
        return _row(check, WARN, node, comp, found, expected, "memlock was not reported: " + fix)
    ok = _limit_unlimited(current) and (_text(ssh) is None or _limit_unlimited(ssh))
    if not ok:
        return _row(check, FAIL if required else WARN, node, comp, found, expected, fix)
    ssh_error = _text(_get(facts, "memlock", "noninteractive_ssh_error"))
    if _text(ssh) is None and ssh_error:
        return _row(
            check, WARN, node, comp, found + "; ssh session not read: " + ssh_error, expected,
            "let the facts read it (ssh as the training user to localhost, %s), then rerun" % _role("cluster_ssh"),
        )
    return _row(check, PASS, node, comp, found, expected)


def check_infiniband(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Row:
    check, comp = "infiniband.ports", "infiniband"
    if not ctx.options.get("infiniband_required"):
        return _row(check, SKIP, node, comp, fix="infiniband_required is false")
    hcas = _get(facts, "infiniband", "hcas") or []
    ports: List[Tuple[str, str]] = []
    for hca in hcas:
        for port in (_get(hca, "ports") or []):
            state = _show(_get(port, "state"))
            ports.append(("%s/%s" % (_show(_get(hca, "name")), _show(_get(port, "port"))), state))
    expected = "every port Active"
    fix = (
        "bring the InfiniBand links up on %s: check cables and the subnet manager (ibstat), and "
        "install the RDMA stack with %s" % (node, _role("infiniband"))
    )
    if not ports:
        return _row(check, FAIL, node, comp, "no InfiniBand HCA", expected, fix)
    down = ["%s %s" % (name, state) for name, state in ports if "active" not in state.lower()]
    found = "%d/%d ports Active" % (len(ports) - len(down), len(ports))
    if down:
        found += " (%s)" % ", ".join(down)
    if len(down) == len(ports):
        return _row(check, FAIL, node, comp, found, expected, fix)
    if down:
        # NCCL runs on the Active ports; a missing cable on one rail costs bandwidth, not correctness.
        return _row(check, WARN, node, comp, found, expected, fix)
    return _row(check, PASS, node, comp, found, expected)


def check_peermem(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Row:
    check, comp = "infiniband.peermem", "peermem"
    if not ctx.options.get("gpudirect"):
        return _row(check, SKIP, node, comp, fix="gpudirect is false")
    loaded = bool(_get(facts, "infiniband", "peermem_loaded"))
    fix = "load nvidia-peermem on %s (modprobe nvidia-peermem, persisted) with %s" % (node, _role("infiniband"))
    return _row(check, PASS if loaded else FAIL, node, comp, "loaded" if loaded else "not loaded", "loaded (GPUDirect RDMA)", "" if loaded else fix)


def check_disk(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Row:
    check, comp = "disk.free", "disk"
    min_gb = ctx.options.get("min_free_gb")
    if min_gb is None:
        return _row(check, SKIP, node, comp, fix="min_free_gb not given")
    disk = _get(facts, "disk") or {}
    paths = list(ctx.options.get("disk_paths") or sorted(disk))
    expected = ">= %g GB free on %s" % (float(min_gb), ", ".join(paths) or "the data and checkpoint paths")
    if not paths:
        return _row(check, WARN, node, comp, "no path measured", expected, "pass disk_paths to gpu_stack_facts and preflight")
    need = float(min_gb) * 1e9
    problems: List[str] = []
    report: List[str] = []
    for path in paths:
        entry = _get(disk, path)
        if not isinstance(entry, Mapping):
            problems.append("%s: not measured" % path)
        elif entry.get("exists") is False:
            problems.append("%s: does not exist" % path)
        else:
            free = entry.get("free_bytes")
            try:
                free_b = float(free)
            except (TypeError, ValueError):
                problems.append("%s: free space unknown" % path)
                continue
            report.append("%s: %s" % (path, _gb(free_b)))
            if free_b < need:
                problems.append("%s: %s free" % (path, _gb(free_b)))
    if problems:
        return _row(
            check, FAIL, node, comp, "; ".join(problems), expected,
            "free space or mount the storage on %s (missing paths: create them, or mount the shared "
            "storage there); a checkpoint write that runs out of space loses the step" % node,
        )
    return _row(check, PASS, node, comp, "; ".join(report), expected)


def check_ssh(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Row:
    check, comp = "ssh.from_head", "ssh"
    reach = ctx.options.get("ssh_reachable")
    if reach is None:
        return _row(check, SKIP, node, comp, fix="ssh reachability not tested (single node, or not asked)")
    if node not in reach:
        return _row(check, WARN, node, comp, "not tried", "reachable", "the ssh test from the head node did not cover %s" % node)
    ok = reachable(reach[node])
    fix = (
        "the head node cannot ssh to %s as the training user without a prompt: run %s (keys, "
        "known_hosts, pdsh); the DeepSpeed launcher needs it" % (node, _role("cluster_ssh"))
    )
    return _row(check, PASS if ok else FAIL, node, comp, "reachable" if ok else "not reachable", "reachable", "" if ok else fix)


def reachable(value: Any) -> bool:
    """True for True and for an ssh exit code of 0 (the playbook passes ``rc``)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value == 0
    return str(value).strip().lower() in ("true", "yes", "0")


CLUSTER_CHECKS: Sequence[NodeCheck] = (check_clock, check_slots, check_memlock, check_infiniband, check_peermem, check_disk, check_ssh)


# ---------------------------------------------------------------------------------------
# Entry points
# ---------------------------------------------------------------------------------------


def run_checks(facts_by_node: Mapping[str, Any], profile: Mapping[str, Any], options: Optional[Mapping[str, Any]] = None) -> List[Row]:
    """Every preflight row for these nodes, in table order.

    ``facts_by_node`` maps node names to gpu_stack_facts (or to the module result carrying
    them, or to None for a node that gave none). ``profile`` is a ``_stack_profiles.get()``
    result. ``options``: slots, infiniband_required, gpudirect, min_free_gb, disk_paths,
    max_clock_offset_ms, ssh_reachable (see the action plugin's documentation).
    """
    ctx = _Context(facts_by_node, profile, options or {})
    rows: List[Row] = []
    for node in sorted(set(ctx.nodes) | set(ctx.missing)):
        if node in ctx.missing:
            raw = (facts_by_node or {}).get(node)
            error = unreachable_error(raw)
            if error is not None:
                connection = (ctx.options.get("connections") or {}).get(node) or describe_connection(node, None)
                rows.append(_row(
                    "facts.gathered", FAIL, node, "connection", "unreachable over %s: %s" % (connection, error),
                    "%s answers over %s" % (node, connection), _unreachable_fix(node, connection),
                ))
                continue
            rows.append(_row(
                "facts.gathered", FAIL, node, "facts", ctx.missing[node], "gpu_stack_facts from this node",
                "make %s reachable by Ansible and rerun playbooks/preflight.yml; see the gather task's "
                "error above" % node,
            ))
        else:
            errors = [str(e) for e in (_get(ctx.nodes[node], "errors") or []) if e]
            if errors:
                # The module reports what it could not read instead of failing; the affected
                # checks fail on their own, this row says why the values are missing.
                rows.append(_row(
                    "facts.gathered", WARN, node, "facts", "gathered with problems: " + "; ".join(errors),
                    "gpu_stack_facts from this node, no errors",
                    "look at the problems named on %s; the checks that depend on them say what to fix" % node,
                ))
            else:
                rows.append(_row("facts.gathered", PASS, node, "facts", "gathered", "gpu_stack_facts from this node"))
    for node_check in MATRIX_CHECKS:
        for node, facts in ctx.nodes.items():
            row = node_check(ctx, node, facts)
            if row is not None:
                rows.append(row)
    rows.extend(cross_node_rows(ctx))
    for node_check in CLUSTER_CHECKS:
        for node, facts in ctx.nodes.items():
            row = node_check(ctx, node, facts)
            if row is not None:
                rows.append(row)
    return rows


def counts(rows: Iterable[Row]) -> Dict[str, int]:
    return _report.counts({"status": row.status} for row in rows)


def summary_line(rows: Sequence[Row], profile_name: str) -> str:
    """One line: the verdict, the counts, the nodes and the profile."""
    tally = counts(rows)
    nodes = sorted(set(row.node for row in rows if row.node != ALL_NODES))
    verdict = "FAILED" if tally[FAIL] else "passed"
    bad = sorted(set(row.node for row in rows if row.status == FAIL))
    line = "preflight %s for profile %s on %d node(s): %d failed, %d warning(s), %d passed, %d skipped" % (
        verdict, profile_name, len(nodes), tally[FAIL], tally[WARN], tally[PASS], tally[SKIP])
    if bad:
        line += "; failing: %s" % ", ".join(bad)
    lost = sorted(set(row.node for row in rows if row.check == "facts.gathered" and row.component == "connection"))
    if lost:
        line += "; unreachable: %s" % ", ".join(lost)
    return line
