"""Layer 0, base: what every layer may use and that knows nothing of the game:
the declared checks of config values (``checks``), running time less stopped
time (``clock``), the XLA compilation cache (``cache``), a row-wise function
computed only on the rows that need it (``compaction``) and Elo ratings
(``rating``).

Imports no other ``agz_jax`` package.
"""
