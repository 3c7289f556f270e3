"""Draft proposers: the protocol (`base`) and grammar-aware implementations, combinable in a chain.

Importing this package loads no model code: the draft model's runner (and transformers) load
only when a `DraftModelProposer` is built.
"""

from .base import Draft, ProposalContext, Proposer
from .chain import ChainProposer, auto_proposer
from .draft_model import DraftModelProposer
from .forced import ForcedProposer
from .ngram import NgramProposer
from .suffix import SuffixProposer

__all__ = [
    "Draft",
    "ProposalContext",
    "Proposer",
    "ChainProposer",
    "auto_proposer",
    "DraftModelProposer",
    "ForcedProposer",
    "NgramProposer",
    "SuffixProposer",
]
