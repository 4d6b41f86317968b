#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: converge_stamp
short_description: Record on a node that a provisioning role finished there, with the inputs it ran with
version_added: 1.0.0
author: megatron_ds.cluster developers (@megatron-ds)
description:
  - The last task of every provisioning role. Writes C(<dir>/<role>.json) on the node, holding the
    digest of the role's inputs, the digest of each input, the signature of each file the role
    manages (sha256 up to 1 MiB, size and modification time above) and the services it keeps running.
  - The action plugin of the same name fills O(digest) and O(inputs) on the controller, from the plan
    M(megatron_ds.cluster.converge_plan) made for this host at the start of the run, or by computing
    them the same way when the role runs outside playbooks/provision.yml. Give only O(role), O(files)
    and O(services).
  - A re-run of playbooks/provision.yml reads the stamps back through M(megatron_ds.cluster.gpu_stack_facts)
    (O(megatron_ds.cluster.gpu_stack_facts#module:converge_dir)) and skips the role on nodes where the
    digest is the same, the files and services are as recorded and the role's preflight checks pass.
  - Writes only when the stamp differs from the one on the node, atomically. It never reports a
    change, as the stamp is the collection's record and not the node's configuration; RV(written)
    says whether it wrote.
options:
  role:
    description: The role's short name (C(os_base), C(python_env), ...).
    type: str
    required: true
  files:
    description: Node paths the role manages; a later change to any of them makes the role run again.
    type: list
    elements: path
    default: []
  services:
    description: systemd units the role keeps active; a later stop makes the role run again.
    type: list
    elements: str
    default: []
  dir:
    description: Where the stamps live on the node.
    type: path
    default: /var/lib/megatron_ds/converge
  digest:
    description: The digest of the role's inputs. Filled by the action plugin.
    type: str
  inputs:
    description: The digest of each of the role's inputs, by name. Filled by the action plugin.
    type: dict
    default: {}
attributes:
  check_mode:
    description: Writes nothing; RV(written) is false.
    support: full
  diff_mode:
    description: No diff is shown.
    support: none
  platform:
    description: Any POSIX host with systemd or without.
    platforms: posix
    support: full
notes:
  - The stamp holds digests only, never a variable's value, so a secret in a role variable does not
    reach the node's disk through it.
"""

EXAMPLES = r"""
- name: OS base | Record the converge stamp
  megatron_ds.cluster.converge_stamp:
    role: os_base
    files:
      - /etc/security/limits.d/90-megatron-memlock.conf
    services:
      - chrony
"""

RETURN = r"""
stamp:
  description: The stamp as written (or as it would be written, in check mode).
  returned: always
  type: dict
  sample: {"schema": 1, "role": "os_base", "digest": "3f2a9c01d4e5b6a7", "inputs": {}, "files": {}, "services": ["chrony"]}
written:
  description: Whether the stamp was (re)written in this run.
  returned: always
  type: bool
  sample: true
path:
  description: The stamp file on the node.
  returned: always
  type: str
  sample: /var/lib/megatron_ds/converge/os_base.json
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.megatron_ds.cluster.plugins.module_utils._converge import stamps as _stamps


ARGUMENT_SPEC = dict(
    role=dict(type="str", required=True),
    files=dict(type="list", elements="path", default=[]),
    services=dict(type="list", elements="str", default=[]),
    dir=dict(type="path", default=_stamps.DEFAULT_DIR),
    digest=dict(type="str"),
    inputs=dict(type="dict", default={}),
)


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    params = module.params
    if not params["digest"]:
        module.fail_json(msg="converge_stamp: role %s: no input digest; run the task through its action plugin "
                             "(megatron_ds.cluster.converge_stamp), which computes it" % params["role"])
    try:
        stamp = _stamps.build_stamp(params["role"], params["digest"], params["files"], params["services"],
                                    params["inputs"])
    except ValueError as exc:
        module.fail_json(msg="converge_stamp: %s" % exc)
    path = _stamps.stamp_path(params["dir"], params["role"])
    written = not _stamps.same_stamp(_stamps.read_json(path), stamp)
    if written and not module.check_mode:
        try:
            _stamps.write_stamp(params["dir"], stamp)
        except OSError as exc:
            module.fail_json(msg="converge_stamp: role %s: cannot write %s: %s; check that %s is writable by root"
                                 % (params["role"], path, exc, os.path.dirname(path)))
    # The stamp is the collection's own record, not the node's configuration: a run that only
    # rewrites stamps (a role run with other variables that changed nothing on the node, a plan
    # made in another context) still changed nothing, and says so.
    module.exit_json(changed=False, written=written and not module.check_mode, stamp=stamp, path=path)


if __name__ == "__main__":
    main()
