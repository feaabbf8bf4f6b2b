"""Waiting for another thread to reach a point, without assuming how fast the machine is."""
import threading
import time


def wait_for_log(caplog, text: str, thread: threading.Thread, seconds: float = 120) -> None:
    """Return once a captured log record contains ``text``; fail if ``thread`` ends first or after
    ``seconds`` (a bound on a hang only: on a loaded machine the thread's imports alone take seconds)."""
    deadline = time.monotonic() + seconds
    while not any(text in record.getMessage() for record in caplog.records):
        assert thread.is_alive(), f"the thread ended without logging {text!r}"
        assert time.monotonic() < deadline, f"nothing logged {text!r} in {seconds} s"
        time.sleep(0.05)
