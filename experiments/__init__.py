"""The commands: thin argparse front ends over ``agz_jax``, each run as
``python -m experiments.NAME`` from the repository root. The main job
(``selfplay``), the benchmark (``bench``) and the GPU window script stay at the
top; the rest are grouped by what they do: ``training`` (runs that make nets),
``play`` (matches, ratings, players and the engine's readings), ``studies``
(experiments over the library) and ``go`` (Go move prediction). No command
imports another: what they share lives in ``agz_jax``.
"""
