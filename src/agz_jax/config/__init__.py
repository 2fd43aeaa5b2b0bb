"""Layer 2, config: one run's settings. The sections (``sections``: frozen,
checked dataclasses), ``Config`` holding one of each (``schema``) and the named
presets (``presets``).

May import ``agz_jax.base`` and ``agz_jax.game``.
"""
