"""``python -m server.sim``: see :mod:`server.sim.cli`."""

import sys

from server.sim.cli import main

sys.exit(main())
