"""Network helpers of the distributed tests."""
import random
import socket


def _ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (what a bind to port 0 draws from)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now.

    It is bound later, by a process that first imports torch (seconds on a loaded machine). A port the
    kernel hands out for port 0 comes back to the next bind to port 0 (gloo's listeners, torchrun's
    store, the other test worker's) within that window, so the port is drawn at random below the
    kernel's ephemeral range, where no bind to port 0 lands; port 0's own where there is no room below.
    """
    low = _ephemeral_low()
    for _ in range(100):
        port = random.randrange(10_000, low) if low > 11_000 else 0
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:  # in use (or in TIME_WAIT): another draw
                continue
            return sock.getsockname()[1]
    raise RuntimeError("no free TCP port on 127.0.0.1 in 100 draws")
