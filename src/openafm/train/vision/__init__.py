"""Training the vision stack (report §4.2, §5.1): CLIP pretraining of the encoder, the vision-language adapter
against a frozen decoder, and the joint stage — built on the trainer's pieces beside them in openafm.train.

    flip.py   FLIP masking: the patches each image keeps, the same number in every attention window
    clip.py   CLIP contrastive pretraining of the vision encoder (symmetric InfoNCE), zero-shot accuracy
    mix.py    the report's multimodal mixes: example kinds (60/10/28.5/1.5) and resolution modes
    tasks.py  image questions with exact answers: name the emoji, read the word (train / held-out splits)
    read.py   the encoder taught the tasks' labels on fresh renderings, before the adapter learns to say them
    questions.py  where an answer stage's questions come from: pools rendered once, or fresh renderings
    vlm.py    a vision tower trained against a frozen decoder (stage 3); answers through the session path
    joint.py  the joint stage on a compact decoder: text perplexity before and after (stage 2)
"""
