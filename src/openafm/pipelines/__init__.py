"""Pipelines: the recipe runner, a training recipe's stages run in order (report §4.3); moved out of openafm.train.

Orchestration only: the stages call public functions of openafm.data, tokenizer, models, train, eval and rl.
The recipes themselves are YAML files in the repository's top-level `recipes` directory.

    kinds.py    StageKind: the kinds of stage a recipe names
    recipe.py   Recipe: a run directory and an ordered list of named stages, loaded from YAML and validated
    run.py      run a recipe: each stage into its own directory with a done-marker; finished stages are skipped
    stages.py   what each stage kind does (corpus, tokenizer, shards, train, upcycle, distill, eval)
    posttrain.py  the post-training stage kinds: synth, sft (LoRA, merged), rl (RLOO), tasks (evaluation)
    package.py    the package stage: an sft stage's adapter as a bundled model (bfloat16 adapter + sidecar JSON)
    vision.py     the vision stage: a vision tower trained against a frozen decoder, checkpointed, installable
    sft_data.py   what an sft stage trains on: synth outputs, JSONL files and the built-in sets, as conversations
    loader.py   the loader factory recipes give the trainer: packed rows over a shards stage's subset and a mixture
"""
