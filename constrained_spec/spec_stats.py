"""Per-request speculation statistics and the adaptive draft-length policy.

Speedup model. With per-token acceptance a (a draft token is accepted with probability a, given
the ones before it were), a draft of g tokens emits on average (1 - a^(g+1)) / (1 - a) tokens per
target forward. A step costs `verify_cost(g + 1)` (scoring g + 1 tokens in one forward, relative
to scoring 1) plus `g * draft_cost` (drafting, relative to one target forward). So

    S(g) = (1 - a^(g+1)) / ((1 - a) * (verify_cost(g + 1) + g * draft_cost))

With a linear verify_cost(n) = 1 + (n - 1) c this is the textbook (1 - a^(g+1)) / ((1 - a)(g c + 1)).
Our proposers are mostly one-hot (draft_cost ~ 0), so verification growth dominates; the default
`verify_cost` interpolates what was measured for the default model on CPU (ENVIRONMENT.md):
n = 2: 1.15x, 4: 1.45x, 8: 1.8x, 16: 2.2x. The policy picks the g maximizing S(g) and drafts
nothing when no g >= 1 beats S(0) = 1, probing now and then so a changed acceptance is noticed.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

__all__ = ["SpecStats", "DraftLengthPolicy", "interpolated_cost", "CPU_VERIFY_COST", "speedup"]

# (tokens scored in one forward, cost relative to 1 token): SmolLM2-135M, 2 CPU threads.
CPU_VERIFY_COST: tuple[tuple[int, float], ...] = ((1, 1.0), (2, 1.15), (4, 1.45), (8, 1.8), (16, 2.2), (32, 3.0))


def interpolated_cost(table: Sequence[tuple[int, float]] = CPU_VERIFY_COST) -> Callable[[int], float]:
    """Piecewise-linear cost(n) through `table` (sorted by n), extrapolated linearly at the end."""
    xs = [float(n) for n, _ in table]
    ys = [float(c) for _, c in table]

    def cost(n: int) -> float:
        i = min(max(bisect.bisect_right(xs, n) - 1, 0), len(xs) - 2)
        return ys[i] + (ys[i + 1] - ys[i]) * (n - xs[i]) / (xs[i + 1] - xs[i])

    return cost


_CPU_COST = interpolated_cost()
_BEST: dict[tuple, int] = {}  # (bucketed a, max_draft, verify_cost, draft_cost) -> best g


def speedup(g: int, a: float, verify_cost: Callable[[int], float], draft_cost: float = 0.0) -> float:
    """S(g): expected tokens per unit of time relative to plain decoding (see module docstring)."""
    emitted = g + 1 if a >= 1.0 else (1 - a ** (g + 1)) / (1 - a)
    return emitted / (verify_cost(g + 1) + g * draft_cost)


@dataclass
class SpecStats:
    """One request's speculation counters. Position lists are indexed by draft position (0 = first)."""

    drafted: int = 0
    accepted: int = 0
    drafted_per_position: list[int] = field(default_factory=list)
    accepted_per_position: list[int] = field(default_factory=list)
    forced_tokens: int = 0
    steps: int = 0
    generated_tokens: int = 0
    elapsed_s: float = 0.0

    def record(self, num_drafted: int, num_accepted: int, num_forced: int, num_emitted: int) -> None:
        """One verification step: `num_drafted` drafts, the first `num_accepted` kept."""
        grow = num_drafted - len(self.drafted_per_position)
        if grow > 0:
            self.drafted_per_position.extend([0] * grow)
            self.accepted_per_position.extend([0] * grow)
        for j in range(num_drafted):
            self.drafted_per_position[j] += 1
            self.accepted_per_position[j] += int(j < num_accepted)
        self.drafted += num_drafted
        self.accepted += num_accepted
        self.forced_tokens += num_forced
        self.steps += 1
        self.generated_tokens += num_emitted

    @property
    def acceptance_rate(self) -> float:
        return self.accepted / self.drafted if self.drafted else 0.0

    @property
    def acceptance_per_position(self) -> list[float]:
        return [a / d if d else 0.0 for a, d in zip(self.accepted_per_position, self.drafted_per_position)]

    @property
    def mean_accepted_length(self) -> float:
        """Tokens emitted per target forward (1.0 = no gain from speculation)."""
        return self.generated_tokens / self.steps if self.steps else 0.0

    @property
    def tokens_per_second(self) -> float:
        return self.generated_tokens / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def to_dict(self) -> dict:
        out = asdict(self)
        out.update(
            acceptance_rate=self.acceptance_rate,
            acceptance_per_position=self.acceptance_per_position,
            mean_accepted_length=self.mean_accepted_length,
            tokens_per_second=self.tokens_per_second,
        )
        return out


class DraftLengthPolicy:
    """Chooses each step's draft length from a decayed estimate of the per-token acceptance rate.

    The estimate is the geometric-model MLE: accepted tokens / positions that were tried (a draft
    of k with m accepted tried m + 1 positions if m < k, else k), with counts decayed by `decay`
    per step and started from `prior_rate` at weight `prior_weight`.
    """

    def __init__(
        self,
        max_draft: int,
        verify_cost: Callable[[int], float] | None = None,
        draft_cost: float = 0.0,
        prior_rate: float = 0.7,
        prior_weight: float = 4.0,
        decay: float = 0.9,
        probe_every: int = 8,
        probe_length: int = 2,
    ) -> None:
        if max_draft < 0:
            raise ValueError(f"max_draft must be >= 0, got {max_draft}")
        self.max_draft = max_draft
        self.verify_cost = verify_cost or _CPU_COST
        self.draft_cost = draft_cost
        self.decay = decay
        self.probe_every = probe_every
        self.probe_length = probe_length
        self._hits = prior_rate * prior_weight
        self._tries = prior_weight
        self._idle_steps = 0

    @property
    def acceptance(self) -> float:
        return self._hits / self._tries if self._tries > 0 else 0.0

    def best_length(self, a: float) -> int:
        """argmax_g S(g) over 0..max_draft (0 when no g >= 1 beats plain decoding)."""
        best_g, best = 0, 1.0
        for g in range(1, self.max_draft + 1):
            s = speedup(g, a, self.verify_cost, self.draft_cost)
            if s > best:
                best_g, best = g, s
        return best_g

    def choose(self) -> int:
        a = round(min(self.acceptance, 1.0), 3)  # bucketed so the argmax is cached
        key = (a, self.max_draft, self.verify_cost, self.draft_cost)
        best_g = _BEST.get(key)
        if best_g is None:
            best_g = _BEST[key] = self.best_length(a)
        if best_g == 0 and self.max_draft > 0:
            self._idle_steps += 1
            if self._idle_steps >= self.probe_every:  # re-measure now and then
                self._idle_steps = 0
                return min(self.probe_length, self.max_draft)
        return best_g

    def observe(self, num_drafted: int, num_accepted: int) -> None:
        if num_drafted <= 0:
            return
        tried = num_accepted + (1 if num_accepted < num_drafted else 0)
        self._hits = self._hits * self.decay + num_accepted
        self._tries = self._tries * self.decay + tried
