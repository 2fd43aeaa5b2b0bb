"""Go: the rules (``go.rules``, on the array primitives of ``go.board``), the
input planes of Maddison et al. (ICLR 2015), Table 1 (``go.features``, with the
ladder reader ``go.ladder``), and a cross-check against GnuGo over GTP
(``go.gtp``, ``go.referee``); SGF records (``go.sgf``), a data set of planes
(``go.dataset``), the paper's net and its training (``go.net``,
``go.movepred``), the net and other engines over GTP (``go.gtp_engine``,
``go.play``); human games imported (``go.tygem``, each game read and checked
by ``go.records``) into a store of move sequences (``go.games``), replayed on
the device (``go.replay``) into training batches (``go.sampling``, planes by
``go.planes``) for 19x19 training (``go.train19``). See docs/go.md."""

# The planes function stays ``go.features.features``: re-exporting it here as
# ``go.features`` would shadow the submodule (``from agz_jax.go import features``).
from agz_jax.go.features import channel, channel_names, num_channels
from agz_jax.go.rules import BLACK, WHITE, Rules, State, from_text, point, to_text, vertex

__all__ = ["BLACK", "WHITE", "Rules", "State", "channel", "channel_names", "from_text",
           "num_channels", "point", "to_text", "vertex"]
