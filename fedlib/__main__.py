"""``python -m fedlib``: see ``fedlib.cli``."""

import sys

from fedlib.cli import main

if __name__ == "__main__":
    sys.exit(main())
