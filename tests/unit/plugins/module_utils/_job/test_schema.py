# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The job spec's schema is written once: _job_schema.FIELDS, roles/megatron_job/defaults/main.yml
and roles/megatron_job/meta/argument_specs.yml carry the same names (in the same order), types,
defaults and choices. Any difference fails here, naming the variable."""
from __future__ import annotations

import pathlib
import re
from typing import Any, Dict

import pytest
import yaml

from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import schema as _job_schema
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import spec as _job_spec
from ansible_collections.megatron_ds.cluster.plugins.module_utils._stack import profiles as _stack_profiles

ROLE = pathlib.Path(__file__).resolve().parents[5] / "roles" / "megatron_job"
PREFIX = _job_schema.PREFIX


def _load(path: pathlib.Path) -> Any:
    return yaml.safe_load(path.read_text())


DEFAULTS: Dict[str, Any] = _load(ROLE / "defaults" / "main.yml")
OPTIONS: Dict[str, Any] = _load(ROLE / "meta" / "argument_specs.yml")["argument_specs"]["main"]["options"]
# argument_specs.yml also documents the per-host address, which is not part of the spec.
SPEC_OPTIONS = [name for name in OPTIONS if name[len(PREFIX):] not in _job_schema.NON_SPEC_KEYS]
FIELD_NAMES = [PREFIX + field.name for field in _job_schema.FIELDS]
# How each schema coercion kind is typed in argument_specs.yml.
ARGSPEC_TYPES = {"int": "int", "float": "float", "bool": "bool", "dict": "dict", "extra_args": "list",
                 "auto_bool": "raw", "data_path": "raw", "choice": "str"}


def test_same_names_in_the_same_order():
    assert list(DEFAULTS) == FIELD_NAMES, "roles/megatron_job/defaults/main.yml and _job_schema.FIELDS differ"
    assert SPEC_OPTIONS == FIELD_NAMES, "meta/argument_specs.yml and _job_schema.FIELDS differ"


@pytest.mark.parametrize("field", _job_schema.FIELDS, ids=[f.name for f in _job_schema.FIELDS])
def test_role_default_is_the_schema_default(field):
    value = DEFAULTS[PREFIX + field.name]
    if field.name in _job_schema.INHERITED:
        assert value == _job_schema.INHERITED[field.name]
    elif field.name in _job_schema.TEMPLATED_DEFAULTS:
        assert re.sub(r"\{\{ megatron_job_(\w+) \}\}", r"{\1}", value) == field.default
    else:
        assert value == field.default
        assert type(value) is type(field.default)


@pytest.mark.parametrize("field", _job_schema.FIELDS, ids=[f.name for f in _job_schema.FIELDS])
def test_argument_spec_is_the_schema(field):
    option = OPTIONS[PREFIX + field.name]
    assert option["type"] == field.type
    assert field.type == ARGSPEC_TYPES.get(field.kind, option["type"]) or field.kind == "str"
    templated = field.name in _job_schema.TEMPLATED_DEFAULTS or field.name in _job_schema.INHERITED
    if field.default is None or templated:
        assert "default" not in option, "argument_specs gives a default the role computes"
    else:
        assert option.get("default") == field.default
    assert tuple(option.get("choices") or ()) == tuple(field.choices or ())
    if field.type == "list":
        assert option.get("elements") == "str"


@pytest.mark.parametrize("field", _job_schema.FIELDS, ids=[f.name for f in _job_schema.FIELDS])
def test_every_default_passes_its_own_coercion(field):
    """The schema's own default is a valid value (templated ones once formatted)."""
    spec = _job_spec.normalize({})
    expected = field.default
    if field.name in _job_schema.TEMPLATED_DEFAULTS:
        expected = field.default.format(**spec)
    elif field.kind == "auto_bool":
        expected = _job_spec.resolve_auto(field.name, field.default, _stack_profiles.DEFAULT_PROFILE)
    assert spec[field.name] == expected


def test_inherited_profile_default_is_the_lookups():
    """megatron_stack_profile unset: the role asks the stack_profile lookup for '' and gets the
    collection's default profile, the value the schema (and validate_job) use."""
    assert _stack_profiles.get("")["name"] == _job_schema.DEFAULTS["stack_profile"] == _stack_profiles.DEFAULT_PROFILE


@pytest.mark.parametrize("field", [f for f in _job_schema.FIELDS if f.why], ids=lambda f: f.name)
def test_argument_spec_states_the_bounds(field):
    """The bounds coerce() enforces are written in the argument spec's description too."""
    description = OPTIONS[PREFIX + field.name]["description"]
    text = " ".join(description) if isinstance(description, list) else description
    expected = "No whitespace" if field.words else "Range %s." % _job_schema.bounds_text(field)
    assert expected in text, "%s: argument_specs.yml should say %r" % (field.name, expected)
