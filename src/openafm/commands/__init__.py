"""CLI subcommands that live beside the spine; each module exposes ``register(subparsers)``.

They are listed in ``openafm.cli.COMMAND_MODULES``. A module imports its heavy dependencies inside the
command function, so ``openafm --help`` stays fast.
"""
