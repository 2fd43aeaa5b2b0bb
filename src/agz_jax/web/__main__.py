import sys

from agz_jax.web.server import main

sys.exit(main())
