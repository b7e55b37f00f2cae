"""Record a program's output as a terminal receives it: run it in a pseudo-terminal and save the raw bytes.

    python tests/data/terminal/record.py OUT.raw ROWS COLS -- PROGRAM [ARGS...]

The child sees a real tty of ROWS x COLS (so progress bars, colour and cursor movement are on, as in a user's
terminal); every byte it writes is saved unchanged, with the pty's own newline translation (`\\r\\n`).
"""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import sys
import termios


def main() -> int:
    out, rows, cols, sep, *argv = sys.argv[1:]
    assert sep == "--", "usage: record.py OUT ROWS COLS -- PROGRAM [ARGS...]"
    pid, fd = pty.fork()
    if pid == 0:
        fcntl.ioctl(sys.stdout.fileno(), termios.TIOCSWINSZ, struct.pack("HHHH", int(rows), int(cols), 0, 0))
        os.environ.update(COLUMNS=cols, LINES=rows, TERM="xterm-256color")
        os.execvp(argv[0], argv)
    data = bytearray()
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        data += chunk
    _, status = os.waitpid(pid, 0)
    with open(out, "wb") as handle:
        handle.write(data)
    print(f"{out}: {len(data):,} bytes, exit status {os.waitstatus_to_exitcode(status)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
