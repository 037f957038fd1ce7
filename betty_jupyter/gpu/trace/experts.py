"""A mixture of experts on ``meta``: transformers' own expert loop, with the tokens spread evenly.

Which expert a token goes to depends on the router's values, which ``meta`` tensors do not
have (transformers' loop asks ``nonzero()`` and ``torch.where`` which experts were hit and
by which tokens). :func:`evenly_routed_experts` runs the same loop as transformers' eager
experts (``MixtralExperts.forward``), allocation for allocation, with one assumption
(:data:`EVEN_ROUTING`): every expert receives ``ceil(tokens × top-k / experts)`` tokens,
the balanced load the router's auxiliary loss trains towards.

What this assumption moves is small: what the layer keeps for backward is summed over
its experts and adds up to ``tokens × top-k`` rows however they are split; only the
largest single expert's temporaries (its gate/up product, one at a time) depend on how
unevenly the router loads them — up to every token in one expert, ``experts / top-k``
times the even share.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

EVEN_ROUTING = "betty_even"
EVEN_ROUTING_NOTE = (
    "mixture of experts: the router's choices depend on values meta tensors do not have, so every expert is "
    "given an even share of the tokens (tokens × top-k / experts); what is kept for backward does not depend "
    "on the split, one expert's temporaries do (up to experts / top-k times more if one expert took every token)"
)


def evenly_routed_experts(self: Any, hidden_states: torch.Tensor, top_k_index: torch.Tensor,
                          top_k_weights: torch.Tensor) -> torch.Tensor:
    """transformers' eager expert loop (``MixtralExperts.forward``) with each expert given an even share of tokens."""
    tokens, top_k = top_k_index.shape
    experts = self.num_experts
    share = -(-tokens * top_k // experts)
    device = hidden_states.device
    final_hidden_states = torch.zeros_like(hidden_states)
    with torch.no_grad():
        expert_mask = torch.zeros((experts + 1, top_k, tokens), dtype=torch.long, device=device)  # one_hot, permuted
        expert_hit = torch.zeros((experts, 1), dtype=torch.long, device=device)  # every expert is hit
    for expert in range(experts):
        where = torch.zeros((share, 2), dtype=torch.long, device=device)  # torch.where(expert_mask[expert])
        top_k_pos, token_idx = where.unbind(1)
        current_state = hidden_states[token_idx]
        gate, up = F.linear(current_state, self.gate_up_proj[expert]).chunk(2, dim=-1)
        current_hidden_states = self.act_fn(gate) * up
        current_hidden_states = F.linear(current_hidden_states, self.down_proj[expert])
        current_hidden_states = current_hidden_states * top_k_weights[token_idx, top_k_pos, None]
        final_hidden_states.index_add_(0, token_idx, current_hidden_states.to(final_hidden_states.dtype))
    del expert_mask, expert_hit
    return final_hidden_states


def register_even_routing() -> None:
    """Make ``experts_implementation="betty_even"`` known to transformers."""
    # lazy: transformers is only needed once a model is built
    from transformers.integrations.moe import ExpertsInterface

    ExpertsInterface.register(EVEN_ROUTING, evenly_routed_experts)
