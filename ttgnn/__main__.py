"""``python -m ttgnn``: the ``ttgnn`` command line."""
import sys

from .cli import main

sys.exit(main())
