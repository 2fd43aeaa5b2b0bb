"""Layer 6, play: the model as a player. The engine behind the brains
(``engine``), the Piskvork brain protocol (``brain``, ``brain_commands``,
``brain_text``; the ``pbrain-agz`` command), Piskvork engines and their games
(``piskvork``, ``piskvork_games``), the player SPEC language of matches (``players``) and the
browser board (``web``).

May import the layers below (``agz_jax.base`` up to ``agz_jax.match``); never
``agz_jax.training``, which stands beside it.
"""
