"""Play the model in a browser: ``python -m agz_jax.web`` (see ``server``)."""

from agz_jax.web.server import main, make_server

__all__ = ["make_server", "main"]
