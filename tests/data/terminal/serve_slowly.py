"""A one-package index served slowly, so pip's progress bar draws many frames while it downloads (a fast mirror
draws two or three).

    python tests/data/terminal/serve_slowly.py WHEEL PORT BYTES_PER_SECOND
    pip download --isolated --no-deps --no-cache-dir --progress-bar on \
        --index-url http://127.0.0.1:PORT/simple -d TMPDIR NAME==VERSION
"""

from __future__ import annotations

import http.server
import os
import sys
import time


def main() -> int:
    wheel, port, rate = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    name = os.path.basename(wheel)
    project = name.split("-")[0].lower()
    size = os.path.getsize(wheel)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.rstrip("/") in ("/simple", f"/simple/{project}"):
                body = f'<html><body><a href="/files/{name}">{name}</a></body></html>'.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(size))
            self.end_headers()
            with open(wheel, "rb") as handle:
                while chunk := handle.read(rate // 20):
                    self.wfile.write(chunk)
                    time.sleep(0.05)

    http.server.HTTPServer(("127.0.0.1", port), Handler).serve_forever()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
