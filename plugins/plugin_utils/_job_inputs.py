# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The job as the inventory gives it, read once on the controller.

The ``job`` lookup (every role and playbook), and the validate_job and plan_job actions read the
job through these functions: the ``megatron_job_*`` variables templated (``spec_vars``), the
variables the job role inherits from outside it (``megatron_stack_profile``, ``nccl_env``), the
normalized spec (module_utils/_job/spec.py ``normalize``: defaults, coercion, ``auto`` resolved
with the profile), and the cluster's shape (``cluster``: nodes, head, rank 0, ssh addresses).
``template`` is the caller's templar, so a variable that names another is resolved as Ansible
would.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Dict, Iterable, List, Mapping, NamedTuple, Optional, Tuple, Union

from ansible.errors import AnsibleError
from ansible.module_utils.common.text.converters import to_text

from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import files as _job_files
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import schema as _job_schema
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import script as _job_script
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import spec as _job_spec
from ansible_collections.megatron_ds.cluster.plugins.module_utils._mds import args as _mds_args
from ansible_collections.megatron_ds.cluster.plugins.module_utils._stack import profiles as _stack_profiles

NODES_GROUP = "megatron_nodes"
HEAD_GROUP = "megatron_head"
ADDRESS_VAR = _job_schema.PREFIX + "node_address"
# The role's defaults take these from outside it (schema INHERITED): the inventory-wide name wins
# over the schema default unless the job variable itself is set.
INHERITED_FROM = {"stack_profile": "megatron_stack_profile", "nccl_env": "nccl_env", "user": "cluster_ssh_user"}

Template = Callable[[Any], Any]


class JobInputError(ValueError):
    """A job variable that cannot be read; the message names it and what to do."""


def spec_vars(variables: Mapping[str, Any], template: Template, inherit: Union[bool, Iterable[str]] = True) -> Dict[str, Any]:
    """Every ``megatron_job_*`` variable visible to the caller, templated; with ``inherit`` (True, or
    the keys of INHERITED_FROM to take), also the ones the job role takes from outside it
    (validate_job resolves the profile itself, from its own ``stack_profile`` option first)."""
    out: Dict[str, Any] = {}
    for name in sorted(k for k in variables if str(k).startswith(_job_schema.PREFIX)):
        try:
            out[name] = template(variables[name])
        except AnsibleError as exc:
            raise JobInputError("Job spec variable %s cannot be templated: %s; fix its value in the inventory" % (name, exc)) from exc
    keys = tuple(INHERITED_FROM) if inherit is True else tuple(inherit or ())
    for key, outer in INHERITED_FROM.items():
        if key not in keys:
            continue
        if _job_schema.PREFIX + key not in out and outer in variables:
            value = template(variables[outer])
            if value not in (None, ""):
                out[_job_schema.PREFIX + key] = value
    return out


def _group(variables: Mapping[str, Any], name: str) -> List[str]:
    groups = variables.get("groups") or {}
    return list(groups.get(name) or [])


def cluster(variables: Mapping[str, Any], template: Template, nodes_group: str = NODES_GROUP,
            head_group: str = HEAD_GROUP, extra_groups: Iterable[str] = ()) -> Dict[str, Any]:
    """The cluster's shape: ``nodes`` (the training group, in order), ``head`` (first of the head
    group, else the first node: it runs the launcher), ``rank0`` (the first node: global rank 0
    binds the rendezvous port and writes ``latest``), ``addresses`` (host -> the name ssh and the
    hostfile use: its megatron_job_node_address, else its inventory name; for the nodes and the
    members of ``extra_groups``) and ``hosts`` (those names in node order)."""
    nodes = _group(variables, nodes_group)
    head = (_group(variables, head_group) + nodes)[:1]
    members = list(nodes)
    for group in extra_groups:
        members += [h for h in _group(variables, group) if h not in members]
    hostvars = variables.get("hostvars") or {}
    addresses: Dict[str, str] = {}
    for host in members:
        given = None
        try:
            given = hostvars[host].get(ADDRESS_VAR)
        except (KeyError, AttributeError):
            given = None
        given = template(given) if given is not None else None
        addresses[host] = str(given) if given not in (None, "") else host
    return {
        "nodes": nodes,
        "head": head[0] if head else "",
        "rank0": nodes[0] if nodes else "",
        "addresses": addresses,
        "hosts": [addresses[h] for h in nodes],
    }


PARTS = ("spec", "cluster", "vars")


def job(variables: Mapping[str, Any], template: Template, nodes_group: str = NODES_GROUP,
        head_group: str = HEAD_GROUP, extra_groups: Iterable[str] = (),
        given: Optional[Mapping[str, Any]] = None, parts: Iterable[str] = PARTS) -> Dict[str, Any]:
    """``spec`` (the normalized spec, with ``nodes`` when the group has members), ``cluster``
    (cluster()) and ``vars`` (the variables the spec is read from), each only when in ``parts``,
    so a caller that needs the shape alone does not judge the spec. ``given`` replaces the
    inventory's variables."""
    parts = tuple(parts)
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        raise JobInputError("unknown part %s; ask for %s" % (", ".join(map(repr, unknown)), ", ".join(PARTS)))
    out: Dict[str, Any] = {}
    shape = cluster(variables, template, nodes_group, head_group, extra_groups)
    if "cluster" in parts:
        out["cluster"] = shape
    if "spec" in parts or "vars" in parts:
        raw = dict(given) if given is not None else spec_vars(variables, template)
        if "vars" in parts:
            out["vars"] = raw
        if "spec" in parts:
            try:
                out["spec"] = _job_spec.normalize(raw, nodes=len(shape["nodes"]) or None)
            except _job_schema.JobError as exc:
                raise JobInputError("job spec invalid: %s" % exc) from exc
    return out


# --------------------------------------------------------------------------------------------
# The inputs validate_job and plan_job share (each action is a thin adapter around these).
# --------------------------------------------------------------------------------------------
def spec_from_vars(given: Optional[Mapping[str, Any]], variables: Mapping[str, Any], template: Template,
                   profile_name: Optional[str]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """(the job variables, the normalized spec) from an action's ``spec=`` argument or the task's
    ``megatron_job_*`` variables. ``profile_name`` (the action's ``stack_profile`` option, else
    the inventory's ``megatron_stack_profile``) applies unless the spec names its own profile."""
    # Every inherited value but the profile (resolved below): without them validate.yml judged the
    # job with no nccl_env while the role renders the inventory's into nccl.env and the pdsh command
    # line, so a shell character there passed validation.
    raw = dict(given) if given is not None else spec_vars(
        variables, template, inherit=[key for key in INHERITED_FROM if key != "stack_profile"])
    if profile_name and not any(k in raw for k in ("stack_profile", _job_schema.PREFIX + "stack_profile")):
        raw = dict(raw, stack_profile=profile_name)
    try:
        return raw, _job_spec.normalize(raw)
    except _job_schema.JobError as exc:
        raise JobInputError("Job spec invalid: %s" % exc) from exc


def template_var(variables: Mapping[str, Any], template: Template, name: str) -> Any:
    """A task variable, templated; None when it is not set."""
    return template(variables[name]) if name in variables else None


def profile_deepspeed(name: Optional[str]) -> Optional[str]:
    """The DeepSpeed version the stack profile pins."""
    try:
        return _stack_profiles.deepspeed_pin(name)
    except _stack_profiles.UnknownProfileError as exc:
        raise JobInputError(str(exc.args[0])) from exc


def resolve_path(path: str, option: str, path_dwim: Callable[[str], str]) -> str:
    """A controller path: absolute, relative to the current directory, or relative to the
    playbook directory (``path_dwim``), in that order."""
    candidates = [path]
    if not os.path.isabs(path):
        candidates.append(path_dwim(path))
    for candidate in candidates:
        if os.path.isfile(candidate):
            return os.path.abspath(candidate)
    raise JobInputError("%s: %s not found on the controller (looked in %s); give an existing path"
                        % (option, path, ", ".join(os.path.abspath(c) for c in candidates)))


def read_text(path: str, option: str) -> str:
    """A controller file's text, or an error that names the option."""
    try:
        with open(path, "rb") as handle:
            return to_text(handle.read(), errors="surrogate_or_strict")
    except (IOError, OSError, UnicodeError) as exc:
        raise JobInputError("%s: cannot read %s: %s" % (option, path, exc)) from exc


def _node_gpus(variables: Mapping[str, Any], nodes_group: str) -> List[Tuple[str, Mapping[str, Any]]]:
    """(host, the gpus part of its gpu_stack_facts) for each node whose facts are known, gathered
    in this run (a registered fact) or cached by the last preflight (ansible_facts)."""
    hostvars = variables.get("hostvars") or {}
    found = []
    for host in _group(variables, nodes_group):
        try:
            facts = hostvars[host].get("gpu_stack_facts") or (hostvars[host].get("ansible_facts") or {}).get("gpu_stack_facts")
            gpus = (facts or {}).get("gpus") or {}
        except (KeyError, AttributeError, TypeError):
            continue
        if isinstance(gpus, Mapping):
            found.append((host, gpus))
    return found


def gpu_facts(variables: Mapping[str, Any], nodes_group: str = NODES_GROUP) -> Tuple[Optional[int], Optional[int]]:
    """(smallest GPU count, smallest GPU memory in MiB) over the nodes whose gpu_stack_facts are
    known (gathered in this run or cached); (None, None) otherwise."""
    counts: List[int] = []
    memories: List[int] = []
    for _host, gpus in _node_gpus(variables, nodes_group):
        if isinstance(gpus.get("count"), int) and gpus["count"] > 0:
            counts.append(gpus["count"])
        if isinstance(gpus.get("memory_mib"), int):
            memories.append(gpus["memory_mib"])
    return (min(counts) if counts else None), (min(memories) if memories else None)


def gpu_model(variables: Mapping[str, Any], template: Template,
              nodes_group: str = NODES_GROUP) -> Tuple[Optional[str], str]:
    """(the planner's GPU name, where it came from): the inventory's ``megatron_gpu_model``, else
    the GPU name in the nodes' gpu_stack_facts (gathered in this run or cached by the last
    preflight) when every node reports the same one; (None, why not) otherwise. An unknown name
    raises JobInputError naming the known ones."""
    from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import plan as _job_plan

    given = template_var(variables, template, _job_plan.GPU_MODEL_VAR)
    if given not in (None, ""):
        key = _job_plan.gpu_key(str(given))
        if key is None:
            raise JobInputError("%s is %r; expected one of %s (the planner's GPUs)" % (
                _job_plan.GPU_MODEL_VAR, given, ", ".join(sorted(_job_plan.GPUS))))
        return key, "inventory %s" % _job_plan.GPU_MODEL_VAR
    seen = {}
    for host, gpus in _node_gpus(variables, nodes_group):
        if gpus.get("model"):
            seen[host] = (gpus["model"], gpus.get("memory_mib"))
    models = sorted(set(_job_plan.gpu_key(name, memory) or name for name, memory in seen.values()))
    if len(models) == 1 and models[0] in _job_plan.GPUS:
        return models[0], "gpu_stack_facts of %d node(s) (%s)" % (len(seen), sorted(set(n for n, _m in seen.values()))[0])
    if len(models) > 1:
        return None, "the nodes' gpu_stack_facts name different GPUs (%s)" % ", ".join(models)
    if models:
        return None, "the nodes' gpu_stack_facts name %s, which the planner does not know" % models[0]
    return None, "neither %s in the inventory nor gpu_stack_facts of the nodes" % _job_plan.GPU_MODEL_VAR


def node_count(given: Optional[int], hosts: Any, variables: Mapping[str, Any],
               script: Optional[Mapping[str, Any]] = None, nodes_group: str = NODES_GROUP) -> Tuple[Optional[int], str]:
    """(the number of nodes, where it came from): the action's ``nodes=``, a hostfile's hosts, the
    inventory group, a train.sh's ``--num_nodes``, in that order."""
    if given is not None:
        return given, "nodes argument"
    if hosts:
        return len(hosts), "hostfile"
    group = _group(variables, nodes_group)
    if group:
        return len(group), "inventory group %s" % nodes_group
    launcher = (script or {}).get("launcher") or {}
    if launcher.get("num_nodes"):
        return launcher["num_nodes"], "the script's --num_nodes"
    return None, "unknown"


# --------------------------------------------------------------------------------------------
# validate_job's input, gathered in one place: the job (a spec, or a train.sh read into the same
# keys), the ds_config.json and hostfile beside it, the profile and era, the cluster's shape.
# --------------------------------------------------------------------------------------------
class ValidateInput(NamedTuple):
    """What validate_job judges. ``script`` is the parsed train.sh (None for a spec) and
    ``script_path`` its file; ``cluster`` is the rules' {nodes, gpus_per_node, gpu_memory_mib,
    hosts, gpu_model}; ``nodes_from`` and ``notes`` say where values came from, for the task's result."""

    spec: Dict[str, Any]
    spec_vars: Dict[str, Any]
    script: Optional[Dict[str, Any]]
    script_path: Optional[str]
    ds_config: Optional[Dict[str, Any]]
    ds_config_file: Optional[str]
    hostfile: Optional[str]
    hosts: Optional[Dict[str, int]]
    cluster: Dict[str, Any]
    resume: Optional[Dict[str, Any]]
    deepspeed_version: Optional[str]
    era: str
    nodes_from: str
    notes: List[str]


def _era(deepspeed_version: Optional[str]) -> str:
    try:
        return _mds_args.era_for_deepspeed(deepspeed_version)
    except ValueError as exc:
        raise JobInputError("deepspeed_version: found %r, expected a version such as 0.9.2 or 0.19.6 (%s)"
                            % (deepspeed_version, exc)) from None


def _beside_script(script_path: str, given: Optional[str], named: Optional[str], what: str,
                   notes: List[str]) -> Optional[str]:
    """A file the script names (--deepspeed_config, the launcher's --hostfile), relative to the
    script's directory, when the caller gave none and it exists."""
    if given or not named:
        return given
    candidate = os.path.join(os.path.dirname(script_path), named)
    if not os.path.isfile(candidate):
        return None
    notes.append("%s: %s" % (what, candidate))
    return candidate


def _read_ds_config(given: Optional[str], path_dwim: Callable[[str], str],
                    notes: List[str]) -> Tuple[Optional[Dict[str, Any]], Optional[str]]:
    if not given:
        return None, None
    path = resolve_path(given, "ds_config_file", path_dwim)
    try:
        ds_config, duplicates = _job_files.load_ds_config(read_text(path, "ds_config_file"))
    except _job_files.DsConfigError as exc:
        raise JobInputError("ds_config_file %s: %s; fix the JSON" % (path, exc)) from None
    if duplicates:
        notes.append("ds_config %s repeats %s: Megatron-DeepSpeed keeps the last value"
                     % (path, ", ".join(sorted(set(duplicates)))))
    return ds_config, path


def _read_hostfile(given: Optional[str], path_dwim: Callable[[str], str]) -> Tuple[Optional[Dict[str, int]], Optional[str]]:
    if not given:
        return None, None
    path = resolve_path(given, "hostfile", path_dwim)
    try:
        return dict(_job_files.parse_hostfile(read_text(path, "hostfile"))), path
    except _job_files.HostfileError as exc:
        raise JobInputError("hostfile %s: DeepSpeed would refuse it: %s" % (path, exc)) from None


def _gpu_shape(args: Mapping[str, Any], variables: Mapping[str, Any], template: Template,
               hosts: Optional[Dict[str, int]], notes: List[str]) -> Tuple[Optional[int], Optional[int]]:
    """(GPUs per node, GPU memory in MiB): the arguments, else the nodes' facts, else (memory)
    the inventory's megatron_gpu_model, as the planner reads it."""
    from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import plan as _job_plan

    fact_gpus, fact_memory = gpu_facts(variables)
    if args["gpu_memory_mib"] is None and fact_memory:
        notes.append("GPU memory from gpu_stack_facts: %s MiB (the smallest GPU)" % fact_memory)
    elif args["gpu_memory_mib"] is None:
        model, model_from = gpu_model(variables, template)
        if model:
            fact_memory = int(_job_plan.GPUS[model]["memory_mib"])
            notes.append("GPU memory from %s %s: %s MiB" % (model_from, model, fact_memory))
    if args["gpus_per_node"] is None and not hosts and fact_gpus:
        notes.append("GPUs per node from gpu_stack_facts: %s (the smallest node)" % fact_gpus)
    return args["gpus_per_node"] or (None if hosts else fact_gpus), args["gpu_memory_mib"] or fact_memory


def validate_input(args: Mapping[str, Any], variables: Mapping[str, Any], template: Template,
                   path_dwim: Callable[[str], str]) -> ValidateInput:
    """validate_job's arguments (its ARGUMENT_SPEC, validated) and the task's variables read into
    one ValidateInput. The job files to judge instead of the spec are the arguments, else the
    inventory's (or -e) megatron_job_script / _ds_config_file / _hostfile."""
    notes: List[str] = []
    profile_name = args["stack_profile"] or template_var(variables, template, "megatron_stack_profile")
    deepspeed_version = args["deepspeed_version"] or profile_deepspeed(profile_name)
    era = _era(deepspeed_version)
    given_script = args["script"] or template_var(variables, template, "megatron_job_script")
    ds_config_file = args["ds_config_file"] or template_var(variables, template, "megatron_job_ds_config_file")
    hostfile = args["hostfile"] or template_var(variables, template, "megatron_job_hostfile")
    script, script_path, raw = None, None, {}  # type: Tuple[Optional[Dict[str, Any]], Optional[str], Dict[str, Any]]
    if given_script:
        script_path = resolve_path(given_script, "script", path_dwim)
        script = _job_script.parse_train_script(read_text(script_path, "script"), era=era)
        spec = script["spec"]
        # train.sh does not name its stack profile: the profile's rules (flash attention
        # required on cu130) come from stack_profile / megatron_stack_profile.
        spec["stack_profile"] = profile_name or _stack_profiles.DEFAULT_PROFILE
        ds_config_file = _beside_script(script_path, ds_config_file, script.get("deepspeed_config"),
                                        "ds_config from the script's --deepspeed_config", notes)
        hostfile = _beside_script(script_path, hostfile, (script.get("launcher") or {}).get("hostfile"),
                                  "hostfile from the script's --hostfile", notes)
    else:
        raw, spec = spec_from_vars(args["spec"], variables, template, profile_name)
        if not args["deepspeed_version"] and spec["stack_profile"] != profile_name:
            # The spec names its own profile (megatron_job_stack_profile): its pin and its
            # Megatron-DeepSpeed era are what the job files are rendered for.
            deepspeed_version = profile_deepspeed(spec["stack_profile"])
            era = _era(deepspeed_version)
    ds_config, ds_config_file = _read_ds_config(ds_config_file, path_dwim, notes)
    hosts, hostfile = _read_hostfile(hostfile, path_dwim)
    nodes, nodes_from = node_count(args["nodes"], hosts, variables, script)
    gpus, memory = _gpu_shape(args, variables, template, hosts, notes)
    try:
        model = gpu_model(variables, template)[0]
    except JobInputError:
        model = None  # an unknown megatron_gpu_model: the planner names it; the memory check does without
    resume = None
    if args["resume_tp"] is not None:
        resume = {"tp": args["resume_tp"], "pp": args["resume_pp"]}
        if args["resume_no_pipeline_parallel"] is not None:
            resume["no_pipeline_parallel"] = args["resume_no_pipeline_parallel"]
    return ValidateInput(
        spec=spec, spec_vars=raw, script=script, script_path=script_path, ds_config=ds_config,
        ds_config_file=ds_config_file, hostfile=hostfile, hosts=hosts,
        cluster={"nodes": nodes, "gpus_per_node": gpus, "gpu_memory_mib": memory, "hosts": hosts, "gpu_model": model},
        resume=resume, deepspeed_version=deepspeed_version, era=era, nodes_from=nodes_from, notes=notes)
