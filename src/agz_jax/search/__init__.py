"""Layer 4, search: tree search on mctx (``searcher``: PUCT and Gumbel, Winning
Value Decay, the move policies), the search loop on mctx's private API (``mctx_loop``) and the
slow Python reference MCTS (``baseline``).

May import ``agz_jax.base``, ``agz_jax.game``, ``agz_jax.config`` and
``agz_jax.nets``.
"""
