"""Change-point detection of the results history on synthetic series with known steps.

Each series is a measured figure (a host latency) of ``LENGTH`` runs: Gaussian noise of a
given coefficient of variation around a level, with one step of ``STEP_PCT`` % at a random
run (at least ``MIN_SEGMENT`` runs from either end), or none. For each noise level it prints

* **recall**: the fraction of stepped series in which a change point is found within
  ``TOLERANCE`` runs of the true step (goal: >= 95 % for a 5 % step at 1 % noise, the noise
  of a quiet host series, i.e. a step of 5 sigmas);
* **false alarms per 100 runs**: change points found in step-free series, per 100 values
  (goal: <= 1), and for the stepped series, the change points found away from the step;
* how many of the series the history classes **unstable** (noise > 5 % of the median).

Deterministic (seeded). Run: ``python benchmarks/bench_changepoint.py [series]``.
"""

from __future__ import annotations

import random
import sys

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1] / "src"))

from aidge_deploy.history.changepoint import (
    MIN_SEGMENT,
    Stability,
    change_points,
    series_noise,
)

LENGTH = 40
STEP_PCT = 5.0
TOLERANCE = 2
NOISE_PCTS = (0.5, 1.0, 2.0, 8.0)
RECALL_GOAL = 0.95
FALSE_ALARM_GOAL = 1.0
LEVEL = 0.25  # ms


def _series(rng: random.Random, noise_pct: float, step_at: int | None) -> list[float]:
    out = []
    for i in range(LENGTH):
        level = LEVEL * (1 + STEP_PCT / 100) if step_at is not None and i >= step_at else LEVEL
        out.append(rng.gauss(level, LEVEL * noise_pct / 100))
    return out


def measure(count: int, noise_pct: float, seed: int = 7) -> dict[str, float]:
    rng = random.Random(seed)
    found = misplaced = flat_alarms = unstable = 0
    for _ in range(count):
        step_at = rng.randint(MIN_SEGMENT, LENGTH - MIN_SEGMENT)
        stepped = _series(rng, noise_pct, step_at)
        marks = change_points(stepped, "host")
        near = [m for m in marks if abs(m - step_at) <= TOLERANCE]
        found += bool(near)
        misplaced += len(marks) - (1 if near else 0)
        flat = _series(rng, noise_pct, None)
        flat_alarms += len(change_points(flat, "host"))
        unstable += series_noise(flat, "host").stability is Stability.UNSTABLE
    runs = count * LENGTH
    return {
        "recall": found / count,
        "false_alarms_per_100": 100.0 * flat_alarms / runs,
        "misplaced_per_100": 100.0 * misplaced / runs,
        "unstable": unstable / count,
    }


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    print(
        f"{count} series of {LENGTH} runs per noise level, one {STEP_PCT:g} % step each "
        f"(and {count} without): recall within {TOLERANCE} runs, false alarms per 100 runs"
    )
    print(f"{'noise':>7} {'recall':>8} {'false/100':>10} {'misplaced/100':>14} {'unstable':>9}")
    ok = True
    for noise in NOISE_PCTS:
        m = measure(count, noise)
        print(
            f"{noise:>6g}% {m['recall']:>8.1%} {m['false_alarms_per_100']:>10.2f} "
            f"{m['misplaced_per_100']:>14.2f} {m['unstable']:>9.0%}"
        )
        if noise == 1.0:
            ok = m["recall"] >= RECALL_GOAL and m["false_alarms_per_100"] <= FALSE_ALARM_GOAL
    print(
        f"goal at 1 % noise (a {STEP_PCT:g} sigma step): recall >= {RECALL_GOAL:.0%}, "
        f"<= {FALSE_ALARM_GOAL:g} false alarm per 100 runs: {'met' if ok else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
