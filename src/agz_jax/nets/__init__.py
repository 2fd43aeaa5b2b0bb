"""Layer 3, nets: the network's input planes (``features``), the policy-value
networks (``networks``), each position through its own colour's net (``routing``), the run
checkpoints (``checkpoint``) and the shipped models under ``models/``
(``models``).

May import ``agz_jax.base``, ``agz_jax.game`` and ``agz_jax.config``.
"""
