# -*- coding: utf-8 -*-
from __future__ import annotations

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._stack import versions as v


@pytest.mark.parametrize(
    "text, expected",
    [
        ("515.65.01", (515, 65, 1)),
        ("1.13.1+cu117", (1, 13, 1)),
        ("8.6.0.163", (8, 6, 0, 163)),
        ("v13.0.88", (13, 0, 88)),
        ("2.28.9", (2, 28, 9)),
        ("0.19.6+abc", (0, 19, 6)),
    ],
)
def test_parse(text, expected):
    assert v.parse(text) == expected


@pytest.mark.parametrize("text", [None, "", "cuda", "+cu117"])
def test_parse_rejects_garbage(text):
    with pytest.raises(ValueError):
        v.parse(text)


@pytest.mark.parametrize(
    "left, right, expected",
    [
        ("11.7", "11.7.0", 0),
        ("515.65.01", "515.48.07", 1),
        ("515.43.04", "515.48.07", -1),
        ("580.159.04", "580.65.06", 1),
        ("2.28.3", "2.28.9", -1),
    ],
)
def test_compare(left, right, expected):
    assert v.compare(left, right) == expected


@pytest.mark.parametrize(
    "version, spec, expected",
    [
        ("13.0.88", "13.0", True),
        ("13.1.0", "13.0", False),
        ("2.28.9", "2.28", True),
        ("2.27.9", "2.28", False),
        ("8.6.0.163", "8.6.0.163", True),
        ("8.6.0", "8.6.0.163", False),
        ("9.19.0", "9.*", True),
        ("0.19.6", ">=0.16.1,<=0.19.6", True),
        ("0.19.7", ">=0.16.1,<=0.19.6", False),
        ("0.9.2", ">=0.16.1,<=0.19.6", False),
        ("1.13.1+cu117", "==1.13.1", True),
        ("1.13.0", "!=1.13.0", False),
        ("2.1.3", "~=2.1.2", True),
        ("2.2.0", "~=2.1.2", False),
        ("3.11.2", ">=3.8,<=3.11", True),
        ("3.12.3", ">=3.8,<=3.11", False),
        ("3.12.3", ">=3.8,<3.12", False),
        ("3.11.9", ">3.11", False),
        ("3.12.0", ">3.11", True),
        ("3.7.17", ">=3.8", False),
    ],
)
def test_satisfies(version, spec, expected):
    assert v.satisfies(version, spec) is expected


@pytest.mark.parametrize("spec", ["", ">>1", "=<2"])
def test_satisfies_rejects_bad_specs(spec):
    with pytest.raises(ValueError):
        v.satisfies("1.0", spec)


@pytest.mark.parametrize(
    "version, mm, major, label",
    [("11.7.99", "11.7", 11, ""), ("2.11.0+cu130", "2.11", 2, "cu130"), ("13", "13.0", 13, "")],
)
def test_parts(version, mm, major, label):
    assert v.major_minor(version) == mm
    assert v.major(version) == major
    assert v.local_label(version) == label
