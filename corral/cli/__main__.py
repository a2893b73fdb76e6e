"""``python -m corral.cli``: the ``corral`` command."""

import sys

from corral.cli import main

sys.exit(main())
