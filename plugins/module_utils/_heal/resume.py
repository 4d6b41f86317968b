# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The checked resume: after a relaunch, do the first logged iterations continue the run that
was interrupted?

A relaunch can come back "healthy" and still be wrong: the iteration counter restarts (the tag was
not loaded: DeepSpeed#6691 reports a universal-checkpoint resume that trains as if from
scratch), the job loads another tag than the one chosen, or the optimizer state is dropped and
the first updates throw the loss off its trend. ``judge`` compares the losses logged after the
resume with the losses the interrupted run logged at the same iterations (the data order is the
same: Megatron's sampler continues from the consumed samples), or, past the last one, with a
straight line fitted to the last ones before the tag (or, when the interrupted run logged
iterations past the tag, to its last ones before the first iteration it did not log). The
tolerance is the run's own noise: the root mean square of the residuals of that line, times
``resume_noise_factor``, and never below ``resume_loss_floor``.

Pure functions on (iteration, loss) pairs: the supervisor feeds them from the log
(Megatron-DeepSpeed's ``iteration N/ M | ... lm loss: X`` lines and the burn-in's
``BURNIN step=N loss=X``). No Ansible imports; Python 3.6+.
"""
import math

PENDING = "pending"
OK = "ok"
FAILED = "failed"

# How many logged points the trend line is fitted to. Enough to span several passes over a small
# data set: the burn-in's loss drops once per pass (every 8 steps in molecule/chaos), and a window
# of 8 could sit on one level, whose small noise then failed a healthy resume whose first
# iterations came after the next drop (28 of 200 resumes replayed from that scenario's log; none
# with 12 or more points, and a dropped optimizer state, +0.6, still failed all 200).
TREND_WINDOW = 20
# Fewer points than this before the tag give no trend to judge by: three points of a falling
# early-training loss put a line with almost no residual noise through a curve (a healthy resume
# at iteration 6 after a tag at 3 was 0.21 off such a line, against a tolerance of 0.05, in
# tests/chaos). Iterations the interrupted run logged are still compared one to one.
TREND_MIN_POINTS = 4


def _points(pairs):
    """{iteration: loss} from (iteration, loss) pairs or a mapping, finite losses only."""
    items = pairs.items() if hasattr(pairs, "items") else pairs
    out = {}
    for iteration, loss in items:
        try:
            iteration, loss = int(iteration), float(loss)
        except (TypeError, ValueError):
            continue
        if math.isfinite(loss):
            out[iteration] = loss
    return out


def fit_line(points):
    """Least-squares line through {x: y}: (slope, intercept, rms of the residuals); a single point
    gives slope 0 and rms 0."""
    xs = sorted(points)
    if not xs:
        raise ValueError("fit_line needs at least one point")
    n = float(len(xs))
    mean_x = sum(xs) / n
    mean_y = sum(points[x] for x in xs) / n
    sxx = sum((x - mean_x) ** 2 for x in xs)
    slope = sum((x - mean_x) * (points[x] - mean_y) for x in xs) / sxx if sxx else 0.0
    intercept = mean_y - slope * mean_x
    residuals = [points[x] - (slope * x + intercept) for x in xs]
    rms = math.sqrt(sum(r * r for r in residuals) / n)
    return slope, intercept, rms


def log_interval(points):
    """The spacing of the logged iterations (the smallest gap; 1 with fewer than two points)."""
    xs = sorted(points)
    gaps = [b - a for a, b in zip(xs, xs[1:]) if b > a]
    return min(gaps) if gaps else 1


def judge(before, after, resumed_step, pol, same_data=True):
    """The verdict on a resume from the tag of ``resumed_step``.

    ``before``: the (iteration, loss) pairs the interrupted run logged; ``after``: those logged
    since the relaunch; ``pol``: the supervisor policy (resume_check_points, resume_noise_factor,
    resume_loss_floor). Returns {verdict: pending|ok|failed, reason, first_iteration,
    expected_first (the range the first logged iteration must fall in), tolerance, noise,
    compared: [{iteration, expected, found, difference, source: same_iteration|trend}]}.
    """
    need = int(pol.get("resume_check_points", 3))
    before, after = _points(before), _points(after)
    out = {"verdict": PENDING, "reason": "", "first_iteration": None, "expected_first": None,
           "tolerance": None, "noise": None, "compared": []}
    if need <= 0:
        out.update(verdict=OK, reason="resume check off (resume_check_points 0)")
        return out
    if not after:
        out["reason"] = "no iteration logged since the relaunch yet"
        return out
    first = min(after)
    out["first_iteration"] = first
    interval = log_interval(before) if len(before) > 1 else log_interval(after)
    if resumed_step is not None:
        low, high = int(resumed_step) + 1, int(resumed_step) + max(1, interval)
        out["expected_first"] = [low, high]
        if first < low:
            out.update(verdict=FAILED, reason=(
                "the first iteration logged after the relaunch is %d, but the tag resumed from is global_step%d: "
                "the job did not load it (a run started from scratch counts from 1)" % (first, resumed_step)))
            return out
        if first > high:
            out.update(verdict=FAILED, reason=(
                "the first iteration logged after the relaunch is %d, expected %d-%d after global_step%d: the job "
                "loaded a later tag than the one chosen" % (first, low, high, resumed_step)))
            return out
    if len(after) < need:
        out["reason"] = "%d of %d iterations logged since the relaunch" % (len(after), need)
        return out
    anchor = int(resumed_step) if resumed_step is not None else first - 1
    if not same_data:
        # The relaunch reads other data at the same iteration than the interrupted run did past
        # the tag (the burn-in draws a pool per rank, so a DP change changes its batches): only
        # the losses up to the tag are a yardstick, through their trend.
        before = {i: loss for i, loss in before.items() if i <= anchor}
    window = {i: before[i] for i in sorted(i for i in before if i <= anchor)[-TREND_WINDOW:]}
    if len(window) < 2:
        out.update(verdict=OK, reason="too few iterations logged before global_step%s to judge the loss (%d): "
                   "only the iteration was checked" % (resumed_step, len(window)))
        return out
    at_tag = len(window)
    beyond = [i for i in sorted(after)[:need] if i not in before]
    if beyond and min(beyond) - 1 > anchor:
        # Past the iterations the interrupted run logged, the line goes through its last points
        # before there, those after the tag included: a loss that falls in steps (the burn-in's,
        # once per pass over its data) can sit on one level for the whole window up to the tag and
        # have dropped to the next just after it, where a line through the tag's level alone, with
        # that level's small noise, fails a healthy resume.
        window = {i: before[i] for i in sorted(i for i in before if i < min(beyond))[-TREND_WINDOW:]}
    slope, intercept, noise = fit_line(window)
    tolerance = max(float(pol.get("resume_loss_floor", 0.05)), float(pol.get("resume_noise_factor", 4.0)) * noise)
    out.update(noise=round(noise, 6), tolerance=round(tolerance, 6))
    worst = None
    for iteration in sorted(after)[:need]:
        if iteration in before:
            expected, source = before[iteration], "same_iteration"
        else:
            expected, source = slope * iteration + intercept, "trend"
        difference = after[iteration] - expected
        row = {"iteration": iteration, "expected": round(expected, 6), "found": round(after[iteration], 6),
               "difference": round(difference, 6), "source": source}
        if source == "trend" and at_tag < TREND_MIN_POINTS:
            row["judged"] = False  # recorded, not judged: too short a line (TREND_MIN_POINTS)
        out["compared"].append(row)
        if row.get("judged", True) and abs(difference) > tolerance and (
                worst is None or abs(difference) > abs(worst["difference"])):
            worst = row
    if worst is not None:
        out.update(verdict=FAILED, reason=(
            "the loss at iteration %d is %.4f, expected %.4f (%s) within %.4f (%.1f x the run's noise %.4f, at least "
            "%.4f): the resume from global_step%s does not continue the run (a dropped optimizer state or a "
            "wrong checkpoint)" % (
                worst["iteration"], worst["found"], worst["expected"],
                "the interrupted run at that iteration" if worst["source"] == "same_iteration" else "the trend before the tag",
                tolerance, float(pol.get("resume_noise_factor", 4.0)), noise, float(pol.get("resume_loss_floor", 0.05)),
                resumed_step)))
        return out
    judged = [r for r in out["compared"] if r.get("judged", True)]
    if not judged:
        out.update(verdict=OK, reason="too few iterations logged before global_step%s to judge the loss by its trend "
                   "(%d, fewer than %d): only the iteration was checked" % (resumed_step, at_tag, TREND_MIN_POINTS))
        return out
    out.update(verdict=OK, reason="iterations %s continue the run within %.4f%s" % (
        ", ".join(str(r["iteration"]) for r in judged), tolerance,
        "" if len(judged) == len(out["compared"]) else " (iterations past the interrupted run not judged: %d points "
        "before the tag, fewer than %d)" % (at_tag, TREND_MIN_POINTS)))
    return out
