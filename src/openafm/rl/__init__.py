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
    buffer.py    asynchronous RL's replay buffer: whole RLOO groups tagged with their policy version, max_staleness
                 drops counted, FIFO / freshest sampling, state saved with the updater's checkpoint
    tickets.py   which prompt batch a generator samples next (the synchronous run's draw and seed), and the
                 bounded-staleness gate; a dead generator's batch is issued again
    coordinator.py  the buffer and the tickets as one actor (atomic hand-out / write / take, one state snapshot)
    params.py    the parameter server: versioned weights in Ray's object store, full or trainable-only (LoRA)
    generator.py the trajectory generator actor: RLRun's sampling, rewards and behaviour / reference log-probs
    updater.py   the policy updater actor: RLRun's RLOO step on buffered groups (ratio to the behaviour policy,
                 clipped), publishing, checkpoints with the buffer
    actors.py    starting or joining Ray, the actors and their CPUs / threads
    async_run.py `openafm rl --async`: the driver, asynchronous and synchronous schedules on the same actors
    pairs.py     graded preference pairs from verified sources: levels from grades, a reason each, JSONL I/O
    pair_sources.py       the sources of graded prompt groups: math (reasoning-gym), instructions, tool-call (BFCL)
    pair_instructions.py  responses meeting all / some / none of an instruction prompt's constraints
    reward_model.py       training a reward model on graded pairs and judging it (held-out accuracy, verifiers)
    tool_data.py tool-use SFT data: BFCL's train split as chat examples (tools prompt, question, ground-truth calls
                 as the constrained grammar writes them), each verified by the grammar and the eval's AST match
    multilingual_prompts.py  UDHR translation / answer-in-a-language prompt records (reward chrf), split by article
"""
