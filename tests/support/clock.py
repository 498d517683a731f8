"""Re-export of :mod:`gcite.testing.clock` for the tests."""

from gcite.testing.clock import ManualClock, until

__all__ = ["ManualClock", "until"]
