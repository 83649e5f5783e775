# Copyright 2026 muscle_mem_ros maintainers
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.

"""
Booking replays: how each replay of a trajectory ended, and the branch that keeps failing.

Every replay that reached a learned step is booked against the trajectory it was on
(:func:`outcome_of`): completed; a false hit (a step, or its post-check, failed after
its pre-check passed: the cache thought the world was the one recorded, and it was
not); canceled by a check during a step; handed back (a later pre-check failed and the
agent took over: the cache saw the change before moving). A miss at the first step is
not a replay and is not booked.

A trajectory whose recent replays fail steps back (:class:`StepBack`, ``step_back`` on
the node): ``R%/N`` (default ``30%/10``) means failed replays (false hits and canceled
steps) make up R% or more of its last N booked replays. It does not wait for N replays:
once R% of N have failed (rounded up to whole replays: K = 3 for 30% of 10), the share
over those N can no longer end below R%, so the third failure steps it back whether it
came at the third replay or the tenth. A branch failing 40% of the time (fail, fail, ok,
ok, ok, again and again) steps back at its sixth replay; one failing once in five never
gathers three failures in ten. The older form ``K/N`` (K failed replays among the last
N) is the same rule at 100·K/N %, and is still accepted.

A knock (a check during a step canceled it: :attr:`.FailureKind.DURING_CHECK`, booked
CANCELED) counts against the branch, as a false hit does. The cache cannot tell a
person's bump from a branch whose motion goes wrong in a world its pre-check passed
(what moved is the same: the world left the recorded path after the cache chose to
move), and the ledger must not depend on whether the watch is on: without it the same
knock is a failed post-check, a false hit. A rare knock stays far below the threshold; a
branch knocked off its path in a third of its replays runs in a world that is not the
one it learned, and should earn its trust again. A cancel by the caller is not booked. A
step the cache stopped whose robot did not stop (:attr:`.FailureKind.NOT_STOPPED`) is
booked CANCELED too: the cache stopped it because the world or the time left what the
branch explains.

It is then not replayed (:func:`held`, asked by :func:`.gates.gate_tree` on every path)
until it has earned trust again: as many agreeing shadow runs since it stepped back as
``replay_requires`` asks (``shadow:N``), and at least :data:`RETURN_RUNS`, or an
approval made after it stepped back. While it is held the agent does what it would
have done, and that run is learned as any other. Nothing is deleted; its window starts
afresh when it steps back, so a trajectory let back in is judged on what it does next.

The rule is applied in one place, :func:`booked`, which every store calls inside its
write (one row per trajectory, read and written in one transaction): a fleet's robots
book into the same rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
import datetime
import math

from ..errors import ConfigError
from ..records import Approval, ReplayBook, ReplayOutcome
from ..resume import FailureKind

__all__ = ['booked', 'held', 'outcome_of', 'RETURN_RUNS', 'StepBack']

RETURN_RUNS = 2
"""Agreeing shadow runs a stepped-back trajectory needs at least, to replay again."""

_FALSE_HIT = frozenset({FailureKind.STEP_FAILED, FailureKind.TIMEOUT, FailureKind.SERVER_LOST,
                        FailureKind.POST_CHECK})


@dataclass(frozen=True)
class StepBack:
    """
    When a trajectory steps back: ``failures`` failed replays among its last ``window``.

    Written ``R%/N`` (the share of failed replays among the last N at which it steps
    back; ``failures`` is R% of N rounded up), or ``K/N`` (the same rule at 100·K/N %).

    :ivar failures: Failed replays (false hits, canceled steps) among the last ``window``
        that make it step back; 0: never.
    :ivar window: How many of its latest replays are looked at.
    """

    failures: int = 3
    window: int = 10

    @classmethod
    def parse(cls, text: str, *, parameter: str = 'step_back') -> StepBack:
        """
        Parse ``R%/N`` (0 < R <= 100, 1 <= N <= 100), ``K/N`` (1 <= K <= N <= 100) or ``off``.

        :raises ConfigError: anything else, naming ``parameter``.
        """
        value = str(text).strip().lower()
        if value in ('off', 'none', 'never'):
            return cls(0, 0)
        share, _, n = (part.strip() for part in value.partition('/'))
        if n.isdigit() and 1 <= int(n) <= 100:
            if share.isdigit() and 1 <= int(share) <= int(n):
                return cls(int(share), int(n))
            percent = _percent(share)
            if percent is not None:
                return cls(max(1, math.ceil(percent * int(n) / 100 - 1e-9)), int(n))
        raise ConfigError(
            f'{parameter}: {text!r} is not R%/N (a trajectory steps back when R% or more of its '
            'last N replays failed; 0 < R <= 100, 1 <= N <= 100, e.g. 30%/10), K/N (K failed '
            'among the last N, 1 <= K <= N) or off')

    @property
    def enabled(self) -> bool:
        """Return True unless it is ``off``."""
        return self.failures > 0

    @property
    def percent(self) -> float:
        """Return the share of the window, in percent, whose failure steps it back."""
        return 100.0 * self.failures / self.window if self.enabled else 0.0

    def __str__(self) -> str:
        if not self.enabled:
            return 'off'
        if (100 * self.failures) % self.window:
            return f'{self.failures}/{self.window}'
        return f'{100 * self.failures // self.window}%/{self.window}'


def _percent(text: str) -> float | None:
    """Return ``text`` as a percentage in (0, 100] if it is one (``30%``), else None."""
    if not text.endswith('%'):
        return None
    try:
        percent = float(text[:-1])
    except ValueError:
        return None
    return percent if 0 < percent <= 100 else None


def outcome_of(*, complete: bool, trajectory_id: int, on_trajectory: int,
               kind: FailureKind | None) -> tuple[int, ReplayOutcome] | None:
    """
    Return the trajectory a walk is booked against and how it ended, or None.

    :param complete: The walk replayed to the end.
    :param trajectory_id: The trajectory it completed (complete walks).
    :param on_trajectory: The trajectory it was on when it stopped (0: it never executed
        a step).
    :param kind: Why it stopped (None for a complete walk).
    :return: None for a walk not worth booking: a miss before any step, a cancel by the
        caller, or a trajectory unknown.
    """
    if complete:
        return (trajectory_id, ReplayOutcome.COMPLETED) if trajectory_id else None
    if not on_trajectory or kind is None or kind is FailureKind.CANCELED:
        return None
    if kind in (FailureKind.DURING_CHECK, FailureKind.NOT_STOPPED):
        return on_trajectory, ReplayOutcome.CANCELED
    if kind in _FALSE_HIT:
        return on_trajectory, ReplayOutcome.FALSE_HIT
    return on_trajectory, ReplayOutcome.HANDED_BACK


def booked(book: ReplayBook, outcome: ReplayOutcome, rule: StepBack, *, now: float,
           agreed: int) -> ReplayBook:
    """
    Return ``book`` with one more replay booked: the one place the step-back rule runs.

    :param book: The trajectory's book so far (a fresh one for its first replay).
    :param outcome: How this replay ended.
    :param rule: When it steps back.
    :param now: Wall time (stamped when it steps back).
    :param agreed: Its agreeing shadow runs now (trust earned later counts from there).
    """
    counts = {
        ReplayOutcome.COMPLETED: 'completed', ReplayOutcome.FALSE_HIT: 'false_hits',
        ReplayOutcome.CANCELED: 'canceled', ReplayOutcome.HANDED_BACK: 'handed_back',
    }
    field = counts[outcome]
    book = replace(book, **{field: getattr(book, field) + 1})
    if not rule.enabled:
        return book
    recent = (book.recent + outcome.value)[-rule.window:]
    failed = [ReplayOutcome(c) for c in recent if ReplayOutcome(c).failed]
    if len(failed) < rule.failures:
        return replace(book, recent=recent)
    false_hits = sum(1 for o in failed if o is ReplayOutcome.FALSE_HIT)
    canceled = len(failed) - false_hits
    parts = [f'{n} {what}{"s" if n > 1 else ""}' for n, what in (
        (false_hits, 'false hit'), (canceled, 'canceled step')) if n]
    why = (f'{len(failed)} of its last {len(recent)} replays failed ({", ".join(parts)}): '
           f'{rule.percent:.3g}% or more of its last {rule.window} (step_back {rule})')
    return replace(book, recent='', stepped_back=now, agreed_then=agreed, why=why)


def held(book: ReplayBook | None, *, agreed: int, runs: int,
         approvals: Sequence[Approval]) -> str:
    """
    Return why a stepped-back trajectory may not replay yet ('' when it may).

    :param book: Its book (None: never replayed).
    :param agreed: Its agreeing shadow runs now.
    :param runs: Agreeing shadow runs it needs since it stepped back (``shadow:N``'s N, at
        least :data:`RETURN_RUNS`).
    :param approvals: Its task's approvals (one of it or of the task made after it
        stepped back lets it back in).
    """
    if book is None or not book.stepped_back:
        return ''
    if any(a.at > book.stepped_back and a.trajectory_id in (0, book.trajectory_id)
           for a in approvals):
        return ''
    earned = agreed - book.agreed_then
    needed = max(runs, RETURN_RUNS)
    if earned >= needed:
        return ''
    when = datetime.datetime.fromtimestamp(book.stepped_back).strftime('%Y-%m-%d %H:%M')
    more = needed - earned
    return (f'trajectory {book.trajectory_id} stepped back ({when}): {book.why}; it replays '
            f'again after {more} more agreeing shadow run{"s" if more > 1 else ""} or an '
            'approval')
