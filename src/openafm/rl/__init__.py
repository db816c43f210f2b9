"""Post-training (report §5): verifiable rewards, the RLOO objective, rejection-sampling synthesis.

    rewards.py   the reward registry: name -> reward function (math answers, instruction checkers, tool calls via
                 a checker, reasoning-gym scorers, a reward model), free of any scheduling concern
    rloo.py      RLOO: leave-one-out advantages, the clipped policy-gradient loss, KL to the reference as reward
                 shaping (pure tensor functions)
    synth.py     rejection sampling: k samples per prompt, kept when a verifier accepts them or by majority vote
    step.py      one synchronous RLOO step: k samples per prompt from the policy, rewarded, one update
    pairs.py     graded preference pairs from verified sources: levels from grades, a reason each, JSONL I/O
    pair_sources.py       the sources of graded prompt groups: math (reasoning-gym), instructions, tool-call (BFCL)
    pair_instructions.py  responses meeting all / some / none of an instruction prompt's constraints
    reward_model.py       training a reward model on graded pairs and judging it (held-out accuracy, verifiers)
"""
