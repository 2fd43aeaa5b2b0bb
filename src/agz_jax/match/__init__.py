"""Layer 5, match: games between two players and their score (``arena``).

May import the layers below: ``agz_jax.base``, ``agz_jax.game``,
``agz_jax.config``, ``agz_jax.nets`` and ``agz_jax.search``.
"""
