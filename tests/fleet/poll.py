"""poll: bounded polling, shared by the fleet's tests and the e2e harness."""

import time


def wait_until(what, cond, timeout=10.0, interval=0.05):
    """Polls cond() until it returns a true value and returns that value;
    bounded in time and in count (a clock that stalls cannot make it spin).
    AssertionError naming `what` when the time runs out."""
    deadline = time.monotonic() + timeout
    for _ in range(int(timeout / interval) + 2):
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            break
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.1f}s waiting for {what}")
