"""Post-training (report §5): the RLOO algorithm and its runs, with rewards, preferences, synthesis and the Ray system
in rooms of their own.

The rooms import one way: rewards ◀ preference, synthesis ◀ this package's own modules (the algorithm) ◀ system.

    rloo.py      RLOO: leave-one-out advantages (or REINFORCE's moving-average baseline, or none), the clipped
                 policy-gradient loss, KL to the reference as reward shaping (pure tensor functions)
    step.py      one synchronous RLOO step: k samples per prompt from the policy, rewarded, one update
    prompts.py   RL prompt sets (reasoning-gym, instruction constraints, a file) with a disjoint held-out slice
    multilingual_prompts.py  UDHR translation / answer-in-a-language prompt records (reward chrf), split by article
    config.py    the RL run's config: policy, prompt-set mixture with a reward per set, RLOO and sampling settings
    set_rewards.py  a prompt set's reward from its config (registry rewards, the BFCL checker, a reward model)
    rollout.py   batched rollouts (P * k rows) and per-token log-probabilities in micro-batches (longest rows first)
    adapter_policy.py  the policy as a LoRA adapter on a frozen model: continued from an SFT adapter, saved as one
    run.py       `openafm rl`: the synchronous RLOO run: mixture, metrics, held-out reward, checkpoints, resume
    plot.py      an RL run's curves (reward per set, held-out reward, KL, length, entropy) for `openafm plot`
    rewards/     the reward registry: name -> reward function, free of any scheduling concern
    preference/  graded preference pairs from verified sources, and the reward model trained and judged on them
    synthesis/   SFT data made with verifiers: rejection sampling, BFCL tool-use examples
    system/      asynchronous RL on Ray: replay buffer, tickets, coordinator, parameter server, generator and
                 updater actors, the `--async` driver
"""
