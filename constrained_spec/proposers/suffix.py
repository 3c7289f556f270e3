"""Suffix-tree drafts over earlier outputs of the same engine. Agent and tool-call traffic
repeats its structure (the same keys, the same tool names, the model's own spelling of forced
text), so after a few requests the continuation of the current output's suffix is predictable.

The tree holds every suffix of the last `max_outputs` outputs, cut at depth `depth`, with counts
(each output starts with a sentinel, so the start of an output is matchable too). To propose, the
longest suffix of the current output (at most `max_match` tokens) found in the tree is followed
by its most frequent child, then that child's, while a child keeps at least `min_frequency` of
its parent's count. One-hot and deterministic: it depends only on earlier outputs and this
request's history, never on this step's random numbers.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from .base import Draft, ProposalContext

__all__ = ["SuffixProposer"]

_START = -1  # sentinel token marking the start of an output


class _Node:
    __slots__ = ("count", "children")

    def __init__(self) -> None:
        self.count = 0
        self.children: dict[int, _Node] = {}


class SuffixProposer:
    name = "suffix"

    def __init__(self, max_match: int = 12, depth: int = 32, max_outputs: int = 256, min_frequency: float = 0.1) -> None:
        if not 1 <= max_match < depth:
            raise ValueError(f"need 1 <= max_match < depth, got max_match={max_match}, depth={depth}")
        if max_outputs < 1:
            raise ValueError(f"max_outputs={max_outputs}: must be >= 1")
        if not 0 <= min_frequency <= 1:
            raise ValueError(f"min_frequency={min_frequency}: must be in [0, 1]")
        self.max_match, self.depth, self.min_frequency = max_match, depth, min_frequency
        self.root = _Node()
        self._outputs: deque[tuple[int, ...]] = deque(maxlen=max_outputs)

    def _update(self, seq: tuple[int, ...], delta: int) -> None:
        """Add (delta = 1) or remove (delta = -1) every suffix of seq, cut at `depth`."""
        for start in range(len(seq)):
            node = self.root
            for token in seq[start : start + self.depth]:
                child = node.children.get(token)
                if child is None:
                    child = node.children[token] = _Node()
                child.count += delta
                if child.count <= 0:
                    del node.children[token]  # its whole subtree counts zero too
                    break
                node = child

    def observe(self, prompt_ids: Sequence[int], output_ids: Sequence[int]) -> None:
        """Learn from a finished request's output (the prompt is not indexed)."""
        seq = (_START, *(int(t) for t in output_ids))
        if len(self._outputs) == self._outputs.maxlen:
            self._update(self._outputs[0], -1)  # the deque drops it on append
        self._outputs.append(seq)
        self._update(seq, +1)

    def _match(self, history: Sequence[int]) -> _Node | None:
        """The tree node of the longest suffix of `history` (<= max_match tokens) in the tree."""
        for m in range(min(self.max_match, len(history)), 0, -1):
            node = self.root
            for token in history[len(history) - m :]:
                node = node.children.get(token)
                if node is None:
                    break
            else:
                return node
        return None

    def propose(self, context: ProposalContext, max_tokens: int) -> Draft:
        if max_tokens <= 0 or not self.root.children:
            return Draft(source=self.name)
        output = context.output_ids
        history = [_START, *output] if len(output) < self.max_match else list(output[-self.max_match :])
        node = self._match(history)
        draft: list[int] = []
        while node is not None and node.children and len(draft) < max_tokens:
            # Most frequent child; ties go to the smaller token id, so the choice is deterministic.
            token, child = max(node.children.items(), key=lambda item: (item[1].count, -item[0]))
            if child.count < self.min_frequency * node.count:
                break
            draft.append(token)
            node = child
        if context.matcher is not None and draft:
            draft = draft[: context.matcher.validate_tokens(draft)]
        return Draft(token_ids=draft, source=self.name)
