#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: source_manifest
author: megatron_ds.cluster developers (@megatron-ds)
version_added: 1.0.0
short_description: Record the files of a source tree unpacked from an archive, for the preflight's damage check
description:
  - A Megatron-DeepSpeed tree checked out with git is checked by the preflight against git's
    index. A tree unpacked from an archive has no index, so this module writes a manifest into it
    (C(.megatron-ds-manifest)) with the sha256, size and mtime of every regular file.
  - C(gpu_stack_facts) then reports a file that is missing, of another type, of another size, or
    with other content where its mtime moved, as it does for a git checkout.
  - Files whose names start with C(.megatron-ds-) (the archive marker, the manifest) are left out;
    symbolic links are not followed.
  - The C(python_env) role runs it right after it unpacks an archive, with O(force=true), and on
    every run without it, so that a tree unpacked before manifests existed gets one.
options:
  path:
    description: The unpacked tree.
    type: path
    required: true
  force:
    description: Write the manifest even when one exists (the tree was just unpacked).
    type: bool
    default: false
attributes:
  check_mode:
    description: Reports whether it would write the manifest, writes nothing.
    support: full
  diff_mode:
    description: No diff is shown.
    support: none
  platform:
    description: Any POSIX host.
    platforms: posix
    support: full
notes:
  - The manifest records the tree as it is when the module runs; run it on a tree known to be whole.
seealso:
  - module: megatron_ds.cluster.gpu_stack_facts
"""

EXAMPLES = r"""
- name: Sources | Record the files of the unpacked tree
  megatron_ds.cluster.source_manifest:
    path: /opt/Megatron-DeepSpeed
    force: "{{ unpacked is changed }}"
  become: true
"""

RETURN = r"""
manifest:
  description: The manifest file.
  returned: always
  type: str
  sample: /opt/Megatron-DeepSpeed/.megatron-ds-manifest
files:
  description: The number of files the manifest lists (written now, or read from the one kept).
  returned: always
  type: int
  sample: 1243
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.megatron_ds.cluster.plugins.module_utils._facts import integrity as _integrity

ARGUMENT_SPEC = dict(
    path=dict(type="path", required=True),
    force=dict(type="bool", default=False),
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    root = module.params["path"]
    manifest = os.path.join(root, _integrity.MANIFEST_NAME)
    if not os.path.isdir(root):
        module.fail_json(msg="source_manifest: %s is not a directory; expected the unpacked source tree" % root,
                         manifest=manifest, files=0)
    if os.path.isfile(manifest) and not module.params["force"]:
        try:
            with open(manifest, "r", encoding="utf-8", errors="replace") as handle:
                files = len(_integrity.parse_manifest(handle.read()))
            module.exit_json(changed=False, manifest=manifest, files=files)
        except ValueError:
            pass  # not a manifest: written anew below
    if module.check_mode:
        module.exit_json(changed=True, manifest=manifest, files=len(_integrity.manifest_entries(root)))
    try:
        files = _integrity.write_manifest(root)
    except OSError as exc:
        module.fail_json(msg="source_manifest: cannot write %s: %s" % (manifest, exc), manifest=manifest, files=0)
    module.exit_json(changed=True, manifest=manifest, files=files)


if __name__ == "__main__":
    main()
