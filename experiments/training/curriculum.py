"""The AlphaGomoku curriculum (paper Section IV): basic rules -> imitate the
mentor -> self-play RL, each stage checkpointed, the whole resumable.

    python -m experiments.training.curriculum --preset curriculum --out runs/curriculum
    python -m experiments.training.curriculum --out runs/curriculum --resume

The command is ``agz_jax.curriculum.command`` (its ``--help`` says the rest),
there so that the ablation sweep (``agz_jax.studies.ablation_train``) runs it too.
"""

from __future__ import annotations

import sys

from agz_jax.curriculum.command import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
