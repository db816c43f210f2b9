"""Asynchronous RL on Ray (report §5.2.1): trajectory generators and a policy updater overlapped, with bounded
staleness. It drives the algorithm of openafm.rl (RLRun's sampling and RLOO step) from actors.

    buffer.py       the replay buffer: whole RLOO groups tagged with their policy version, max_staleness drops
                    counted, FIFO / freshest sampling, state saved with the updater's checkpoint
    tickets.py      which prompt batch a generator samples next (the synchronous run's draw and seed), and the
                    bounded-staleness gate; a dead generator's batch is issued again
    coordinator.py  the buffer and the tickets as one actor (atomic hand-out / write / take, one state snapshot)
    params.py       the parameter server: versioned weights in Ray's object store, full or trainable-only (LoRA)
    generator.py    the trajectory generator actor: RLRun's sampling, rewards and behaviour / reference log-probs
    updater.py      the policy updater actor: RLRun's RLOO step on buffered groups (ratio to the behaviour policy,
                    clipped), publishing, checkpoints with the buffer
    actors.py       starting or joining Ray, the actors and their CPUs / threads
    async_run.py    `openafm rl --async`: the driver, asynchronous and synchronous schedules on the same actors
"""
