"""``python -m corral.cli``: the ``corral`` command."""

import sys

from corral.cli import main

if __name__ == "__main__":  # importing the module (pkgutil walks, doc tools) runs nothing
    sys.exit(main())
