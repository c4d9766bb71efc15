"""Runs the package's pytest suite for meson test: exits 77 (skipped) without pytest or, in the
gpu mode, without a CUDA device (conftest.py); pytest's own status otherwise."""
import sys

try:
    import pytest
except ImportError:
    print("pytest is not installed: skipped (apt-get install python3-pytest)")
    sys.exit(77)

if __name__ == "__main__":  # not again in a child of multiprocessing's spawn
    status = pytest.main(["-p", "no:cacheprovider", "-q", "-rs"] + sys.argv[1:])
    sys.exit(77 if status == 5 else int(status))  # 5: no test collected
