"""Layer 6, training: self-play RL and what feeds it. The replay buffer
(``replay``), self-play games (``selfplay``), the train step (``train``), one
run's iterations (``run``) and the driver that owns a run directory
(``driver``, what it prints in ``report``), data parallelism over a device
mesh (``parallel``), supervised training and distillation (``supervised``,
``distill``, the teacher's games in ``teacher_games``) and what the training
command lines share (``cli``).

May import the layers below (``agz_jax.base`` up to ``agz_jax.match``); never
``agz_jax.play``, which stands beside it.
"""
