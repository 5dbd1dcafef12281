"""A receiver of HTTP targets' calls on loopback: it records each request and answers from a script (status,
headers, a delay, or no answer at all), over HTTP or HTTPS."""
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Receiver:
    """`script`: answers in order, each `(status, headers)`, `(status, headers, body)`, `"hang"` (read the request, never
    answer) or `"stall"` (a `200` whose headers promise a body that never comes); when it runs
    out, `answer()` decides (default: 200). `tls`: a `(cert, key)` pair of PEM paths to serve HTTPS with. Each call is
    recorded with its path, headers, body, the answer's status, and when it came (`at`, monotonic; `time`, the epoch)."""

    def __init__(self, script=(), tls=None, answer=lambda: (200, {})):
        self.script = list(script)
        self.answer = answer
        self.calls = []
        self.changed = threading.Condition()
        self.release = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with receiver.changed:
                    answer = receiver.script.pop(0) if receiver.script else receiver.answer()
                    receiver.calls.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()},
                                           "body": body, "at": time.monotonic(), "time": time.time(),
                                           "status": {"hang": None, "stall": 200}.get(answer) if isinstance(answer, str) else answer[0],
                                           "method": self.command})
                    receiver.changed.notify_all()
                if answer == "hang":
                    receiver.release.wait(120)
                    return
                if answer == "stall":
                    self.send_response(200)
                    self.send_header("Content-Length", "1000")
                    self.end_headers()
                    self.wfile.write(b"accepted; more follows")
                    self.wfile.flush()
                    receiver.release.wait(120)
                    return
                status, headers, *rest = answer
                body = rest[0] if rest else b"ok"
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except OSError:
                    pass  # the relay read what it keeps of an answer and closed the connection

            # A redirected call turned into a GET (301, 302, 303) is recorded too.
            do_GET = do_POST

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        scheme = "http"
        if tls:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
            scheme = "https"
        self.url = f"{scheme}://{'localhost' if tls else '127.0.0.1'}:{self.server.server_address[1]}/hooks/rc"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait_for_calls(self, count, timeout=30):
        """The first `count` calls, once they came (a failure if they did not within `timeout` seconds)."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while len(self.calls) < count:
                left = deadline - time.monotonic()
                assert left > 0, f"{len(self.calls)} calls came, not {count}"
                self.changed.wait(left)
            return list(self.calls[:count])

    def stop(self):
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
