"""Go: the rules (``go.rules``) and the input features of Maddison et al.
(ICLR 2015), Table 1 (``go.features``, with the ladder reader ``go.ladder``)."""

from agz_jax.go.rules import BLACK, WHITE, Rules, State, from_text, point, to_text, vertex

__all__ = ["BLACK", "WHITE", "Rules", "State", "from_text", "point", "to_text", "vertex"]
