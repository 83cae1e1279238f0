"""Runs `kiln trace` around a command that waits on a FIFO, so a test can
talk to the trace server directly, then lets the command end and collects
the report."""
import os
import pathlib
import subprocess
import itertools
import time

_seq = itertools.count()


class TracedWait:
    def __init__(self, kiln_bin, workdir, args=(), env=None):
        self.dir = pathlib.Path(workdir)
        n = next(_seq)
        self.fifo = self.dir / f"release-{n}.fifo"
        self.sockfile = self.dir / f"socket-{n}.txt"
        os.mkfifo(self.fifo)
        script = 'echo "$KILN_SOCKET" > "$1.tmp" && mv "$1.tmp" "$1"; read status < "$2"; exit "$status"'
        self.proc = subprocess.Popen(
            [str(kiln_bin), "trace", *map(str, args), "--", "sh", "-c", script, "sh",
             str(self.sockfile), str(self.fifo)],
            cwd=self.dir, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=env)
        deadline = time.monotonic() + 30
        while not self.sockfile.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                out, err = self.proc.communicate(timeout=30)
                raise AssertionError(f"kiln trace did not start the command: rc={self.proc.returncode}\n{err}")
            time.sleep(0.01)
        self.socket = self.sockfile.read_text().strip()

    def finish(self, status=0):
        """Lets the command exit with `status`; returns (returncode, stderr)."""
        with open(self.fifo, "w") as f:
            f.write(f"{status}\n")
        out, err = self.proc.communicate(timeout=60)
        return self.proc.returncode, err

    def kill(self):
        """Ends a run a failed test left behind: release the command, else
        kill kiln (its server and the command then end on their own)."""
        if self.proc.poll() is not None:
            return
        try:
            fd = os.open(self.fifo, os.O_WRONLY | os.O_NONBLOCK)
            os.write(fd, b"1\n")
            os.close(fd)
            self.proc.communicate(timeout=30)
        except OSError:
            self.proc.kill()
            self.proc.communicate(timeout=30)
