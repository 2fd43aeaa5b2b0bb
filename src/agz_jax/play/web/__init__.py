"""Play the model in a browser: ``python -m agz_jax.play.web`` (see ``server``)."""

from agz_jax.play.web.server import main, make_server

__all__ = ["make_server", "main"]
