import sys

from sweeper.cli import main

if __name__ == "__main__":  # not when a process of a pool imports this as __mp_main__
    sys.exit(main())
