"""Post-training (report §5): verifiable rewards, the RLOO objective, rejection-sampling synthesis.

    rewards.py   the reward registry: name -> reward function (math answers, instruction checkers, tool calls via
                 a checker, reasoning-gym scorers, a reward model), free of any scheduling concern
    rloo.py      RLOO: leave-one-out advantages (or REINFORCE's moving-average baseline, or none), the clipped
                 policy-gradient loss, KL to the reference as reward shaping (pure tensor functions)
    synth.py     rejection sampling: k samples per prompt, kept when a verifier accepts them or by majority vote
    step.py      one synchronous RLOO step: k samples per prompt from the policy, rewarded, one update
    prompts.py   RL prompt sets (reasoning-gym, instruction constraints, a file) with a disjoint held-out slice
    config.py    the RL run's config: policy, prompt-set mixture with a reward per set, RLOO and sampling settings
    set_rewards.py  a prompt set's reward from its config (registry rewards, the BFCL checker, a reward model)
    rollout.py   batched rollouts (P * k rows) and per-token log-probabilities in micro-batches
    plot.py      an RL run's curves (reward per set, held-out reward, KL, length, entropy) for `openafm plot`
    run.py       `openafm rl`: the synchronous RLOO run: mixture, metrics, held-out reward, checkpoints, resume
    pairs.py     graded preference pairs from verified sources: levels from grades, a reason each, JSONL I/O
    pair_sources.py       the sources of graded prompt groups: math (reasoning-gym), instructions, tool-call (BFCL)
    pair_instructions.py  responses meeting all / some / none of an instruction prompt's constraints
    reward_model.py       training a reward model on graded pairs and judging it (held-out accuracy, verifiers)
    tool_data.py tool-use SFT data: BFCL's train split as chat examples (tools prompt, question, ground-truth calls
                 as the constrained grammar writes them), each verified by the grammar and the eval's AST match
    multilingual_prompts.py  UDHR translation / answer-in-a-language prompt records (reward chrf), split by article
"""
