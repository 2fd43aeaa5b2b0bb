"""Layer 1, game: gomoku and renju on arrays (``gomoku``, ``renju``,
``renju_check``, over the line tables of ``lines``), the board's symmetries
(``symmetry``), tactics read from the stones and victory by continuous fours
(``tactics``, ``vcf``), the opening sets (``openings``, over ``agz_jax/data``),
game records in ``.psq`` (``records``) and the rule-based mentor (``mentor``).

May import ``agz_jax.base``.
"""
