"""Makes the in-place built package (python/jag, see `make test-python`)
importable without installing it."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
