import sys

from agz_jax.play.web.server import main

sys.exit(main())
