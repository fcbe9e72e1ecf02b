"""What the Python server tests share about the server process."""
import signal
import subprocess


def stop(p):
    """SIGTERM (drain, then exit), and the exit status; "killed" when the
    server had not exited after 120 s (a hang guard: draining waits for
    nothing in these tests)."""
    p.send_signal(signal.SIGTERM)
    try:
        return p.wait(120)
    except subprocess.TimeoutExpired:
        p.kill()
        return "killed"
