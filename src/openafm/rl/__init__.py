"""Post-training (report §5): verifiable rewards, the RLOO objective, rejection-sampling synthesis.

    rewards.py   the reward registry: name -> reward function (math answers, instruction checkers, tool calls via
                 a checker, reasoning-gym scorers, a reward model), free of any scheduling concern
    rloo.py      RLOO: leave-one-out advantages, the clipped policy-gradient loss, KL to the reference as reward
                 shaping (pure tensor functions)
    synth.py     rejection sampling: k samples per prompt, kept when a verifier accepts them or by majority vote
    step.py      one synchronous RLOO step: k samples per prompt from the policy, rewarded, one update
    tool_data.py tool-use SFT data: BFCL's train split as chat examples (tools prompt, question, ground-truth calls
                 as the constrained grammar writes them), each verified by the grammar and the eval's AST match
    multilingual_prompts.py  UDHR translation / answer-in-a-language prompt records (reward chrf), split by article
"""
