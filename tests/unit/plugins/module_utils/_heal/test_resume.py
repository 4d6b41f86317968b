# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_heal.resume: the checked resume's verdict on the first iterations after a relaunch."""
from __future__ import annotations

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._heal import policy as _heal
from ansible_collections.megatron_ds.cluster.plugins.module_utils._heal import resume

POLICY = _heal.policy()


def trend(iterations, start=6.0, slope=-0.05, wobble=0.01):
    """A falling loss with a small alternating wobble (the run's noise)."""
    return {i: round(start + slope * i + (wobble if i % 2 else -wobble), 4) for i in iterations}


BEFORE = trend(range(1, 15))  # the interrupted run logged 1..14; the tag resumed from is 10


@pytest.mark.parametrize("case, after, step, verdict, words", [
    ("continues, same iterations", {i: BEFORE[i] for i in (11, 12, 13)}, 10, "ok", "continue the run"),
    ("continues, small drift", {i: BEFORE[i] + 0.02 for i in (11, 12, 13)}, 10, "ok", "within"),
    ("past the interrupted run: the trend", trend(range(15, 18)), 14, "ok", "continue the run"),
    ("from scratch", trend(range(1, 4), start=10.8), 10, "failed", "did not load it"),
    ("a later tag", {i: BEFORE[i] for i in (13, 14)}, 10, "failed", "a later tag"),
    ("dropped optimizer state", {11: BEFORE[11] + 0.6, 12: BEFORE[12] + 0.4, 13: BEFORE[13] + 0.2}, 10,
     "failed", "iteration 11 is"),
    ("one point so far", {11: BEFORE[11]}, 10, "pending", "1 of 3"),
    ("nothing yet", {}, 10, "pending", "no iteration"),
    ("too little before the tag", {2: 5.9, 3: 5.85, 4: 5.8}, 1, "ok", "only the iteration was checked"),
])
def test_judge(case, after, step, verdict, words):
    got = resume.judge(BEFORE, after, step, POLICY)
    assert got["verdict"] == verdict, (case, got)
    assert words in got["reason"], (case, got["reason"])


EARLY = {1: 6.2555, 2: 6.2478, 3: 6.0101, 4: 5.5656, 5: 5.2818}  # a fault at iteration 5, the tag at 3
AT_THE_TAG = {i: EARLY[i] for i in (1, 2, 3)}  # a fault right after the tag at 3


@pytest.mark.parametrize("before, after, verdict, words", [
    # tests/chaos: a healthy resume right after an early fault failed against a 3-point line.
    (EARLY, {4: 5.5656, 5: 5.2818, 6: 5.3068}, "ok", "iterations 4, 5 continue the run"),
    # The iterations the run logged still catch a dropped optimizer state.
    (EARLY, {4: 5.5656 + 0.6, 5: 5.2818 + 0.4, 6: 5.3068}, "failed", "iteration 4 is"),
    # Nothing the run logged after the tag to compare with: only the iteration.
    (AT_THE_TAG, {4: 5.6, 5: 5.3, 6: 5.3}, "ok", "fewer than 4): only the iteration was checked"),
])
def test_a_short_run_before_the_tag_is_judged_by_its_own_iterations_only(before, after, verdict, words):
    got = resume.judge(before, after, 3, POLICY)
    assert got["verdict"] == verdict and words in got["reason"], got
    assert all(row.get("judged", True) is (row["source"] == "same_iteration") for row in got["compared"])


# The burn-in's loss in molecule/chaos: a level per pass over its data (8 steps), dropping by about
# 0.17 at 33, 41, 49; the NaN at 43 leaves the run's 41 and 42 to compare one to one and 43 to the
# trend. Its window up to the tag (33-40) is one level, with a noise of 0.016.
STAIRS = {30: 5.063, 31: 5.1012, 32: 5.0987, 33: 4.9282, 34: 4.9232, 35: 4.8855, 36: 4.913, 37: 4.9408,
          38: 4.932, 39: 4.957, 40: 4.943, 41: 4.7738, 42: 4.7741}


@pytest.mark.parametrize("after, verdict, words", [
    # the healthy rollback resume measured there (failed against the level before the drop, 4.96)
    ({41: 4.7738, 42: 4.7741, 43: 4.7539}, "ok", "iterations 41, 42, 43 continue the run"),
    # still caught: the optimizer state dropped, the loss back above the level before the drop
    ({41: 5.3738, 42: 5.1741, 43: 4.9539}, "failed", "iteration 41 is"),
    ({41: 4.7738, 42: 4.7741, 43: 5.4}, "failed", "iteration 43 is"),
])
def test_the_trend_goes_through_what_the_run_logged_past_the_tag(after, verdict, words):
    got = resume.judge(STAIRS, after, 40, POLICY)
    assert got["verdict"] == verdict and words in got["reason"], got
    assert [r["source"] for r in got["compared"]] == ["same_iteration", "same_iteration", "trend"], got


# The same burn-in later on (molecule/chaos): a hang's resume saves at the step it stopped at
# (152), so nothing past the tag was logged, and 153 starts the next level.
LEVELS = {133: 3.3187, 134: 3.3961, 135: 3.434, 136: 3.4225, 137: 3.3003, 138: 3.2765, 139: 3.2579, 140: 3.2911,
          141: 3.1917, 142: 3.2305, 143: 3.2965, 144: 3.2586, 145: 3.1389, 146: 3.0903, 147: 3.1234, 148: 3.1565,
          149: 3.0386, 150: 3.1109, 151: 3.1568, 152: 3.1328}


@pytest.mark.parametrize("after, verdict", [
    ({153: 2.9672, 154: 2.963, 155: 3.0262}, "ok"),  # measured; a line through 145-152 alone failed it
    ({153: 3.5672, 154: 3.563, 155: 3.6262}, "failed"),  # the optimizer state dropped (+0.6)
])
def test_the_trend_spans_more_than_one_level_of_a_stepped_loss(after, verdict):
    got = resume.judge(LEVELS, after, 152, POLICY)
    assert got["verdict"] == verdict, got
    assert {r["source"] for r in got["compared"]} == {"trend"}, got


def test_judge_compares_like_with_like():
    got = resume.judge(BEFORE, {11: BEFORE[11], 12: BEFORE[12], 15: 5.25}, 10, POLICY)
    assert [(r["iteration"], r["source"]) for r in got["compared"]] == [
        (11, "same_iteration"), (12, "same_iteration"), (15, "trend")]
    assert got["tolerance"] == pytest.approx(max(0.05, 4.0 * got["noise"]))


@pytest.mark.parametrize("overrides, after, verdict", [
    ({"resume_check_points": 0}, {}, "ok"),                                     # off
    ({"resume_loss_floor": 1.0}, {11: BEFORE[11] + 0.6, 12: BEFORE[12], 13: BEFORE[13]}, "ok"),
    ({"resume_check_points": 1}, {11: BEFORE[11]}, "ok"),
])
def test_judge_follows_the_policy(overrides, after, verdict):
    assert resume.judge(BEFORE, after, 10, _heal.policy(overrides))["verdict"] == verdict


@pytest.mark.parametrize("points, slope, intercept, rms", [
    ({1: 1.0}, 0.0, 1.0, 0.0),
    ({1: 1.0, 2: 2.0, 3: 3.0}, 1.0, 0.0, 0.0),
    ({0: 0.0, 1: 2.0, 2: 0.0, 3: 2.0}, 0.4, 0.4, 0.8 ** 0.5),  # residuals -0.4, 1.2, -1.2, 0.4
])
def test_fit_line(points, slope, intercept, rms):
    got = resume.fit_line(points)
    assert got == pytest.approx((slope, intercept, rms), abs=1e-9)


@pytest.mark.parametrize("points, interval", [({}, 1), ({5: 1.0}, 1), ({10: 1, 20: 1, 30: 1}, 10), ({1: 1, 3: 1, 4: 1}, 1)])
def test_log_interval(points, interval):
    assert resume.log_interval(points) == interval


def test_non_finite_and_unreadable_points_are_left_out():
    assert resume._points([(1, "nan"), (2, 1.5), ("x", 2.0), (3, float("inf"))]) == {2: 1.5}


# The burn-in after DP 3 -> 2 (tests/chaos, 2026-12-06): its pool is drawn per rank, so the
# relaunch reads other batches at iterations 76-78 than the interrupted run did, and a healthy
# resume from global_step75 was 0.135 off that run's iteration 76 (tolerance 0.133) and fell back.
# The losses up to the tag, through their trend, are the yardstick then.
OTHER_BATCHES = {**trend(range(60, 76), start=3.35, slope=-0.002, wobble=0.03), 76: 3.3186, 77: 3.1857, 78: 3.2251}


@pytest.mark.parametrize("same_data, after, verdict, source", [
    (True, {76: 3.1832, 77: 3.2418, 78: 3.1766}, "failed", "same_iteration"),
    (False, {76: 3.1832, 77: 3.2418, 78: 3.1766}, "ok", "trend"),
    # a lost optimizer state is still caught by the trend
    (False, {76: 3.1832 + 0.6, 77: 3.2418 + 0.5, 78: 3.1766 + 0.4}, "failed", "trend"),
])
def test_other_batches_after_a_layout_change_are_judged_by_the_trend(same_data, after, verdict, source):
    got = resume.judge(OTHER_BATCHES, after, 75, POLICY, same_data)
    assert got["verdict"] == verdict, got
    assert {row["source"] for row in got["compared"]} == {source}
