#!/usr/bin/env python3
"""capture_haplog.py - real HAProxy log datagrams for the haplog seed corpus.

Usage: capture_haplog.py HAPROXY_BINARY OUTDIR

Runs the given HAProxy (2.6, 3.0, 3.2...) on loopback with warmlane's log
format (the one of haproxy/haproxy-2.6.cfg, read from there) sent to two unix
datagram sockets, one framed RFC 3164 and one RFC 5424, in front of a small
HTTP server and a port nobody listens on. It sends one request per case
(complete, 404, streamed, cut mid-stream, refused connection, server
timeout, client abort, a hostile `stream` value) and writes every datagram
received, byte for byte, to OUTDIR/<major.minor>-<case>-<framing>. Nothing is
left running; the temporary directory is removed. Every wait is bounded.

The corpus of tests/fuzz/corpus/haplog was written by this script against
HAProxy 2.6.12, 3.0.11 and 3.2.26 (tests/haproxy/fetch-haproxy.sh).
"""

import http.client
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def warmlane_format():
    """The log-format line of the 2.6 example, as written there."""
    with open(os.path.join(TOP, "haproxy", "haproxy-2.6.cfg")) as f:
        for line in f:
            m = re.match(r'^    log-format (".*")$', line.rstrip("\n"))
            if m:
                return m.group(1)
    raise SystemExit("haproxy/haproxy-2.6.cfg has no log-format line")


def backend(port, stop):
    """A raw HTTP/1.1 server: /ok, /404, /stream, /cut, /slow."""
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", port))
    ls.listen(16)
    ls.settimeout(0.2)

    def serve(c):
        c.settimeout(5)
        try:
            data = b""
            while b"\r\n\r\n" not in data and len(data) < 65536:
                d = c.recv(4096)
                if not d:
                    return
                data += d
            path = data.split(b" ", 2)[1].decode()
            if path == "/ok":
                body = b'{"choices":[]}'
                c.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                          b"content-length: %d\r\n\r\n%s" % (len(body), body))
            elif path == "/404":
                c.sendall(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
            elif path in ("/stream", "/cut", "/slowstream"):
                c.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                          b"transfer-encoding: chunked\r\n\r\n")
                for i in range(4):
                    ev = b"data: {\"t\":%d}\n\n" % i
                    c.sendall(b"%x\r\n%s\r\n" % (len(ev), ev))
                    time.sleep(0.3 if path == "/slowstream" else 0.01)
                    if path == "/cut" and i == 1:
                        return  # FIN without the last chunk
                c.sendall(b"0\r\n\r\n")
            elif path == "/slow":
                time.sleep(1.5)  # past `timeout server`
        except OSError:
            pass
        finally:
            c.close()

    while not stop.is_set():
        try:
            c, _ = ls.accept()
        except socket.timeout:
            continue
        threading.Thread(target=serve, args=(c,), daemon=True).start()
    ls.close()


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    binary, outdir = sys.argv[1], sys.argv[2]
    out = subprocess.run([binary, "-v"], capture_output=True, text=True, timeout=10).stdout
    version = ".".join(re.search(r"HAProxy version (\d+)\.(\d+)", out).groups())
    os.makedirs(outdir, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="capture-haplog-")
    stop = threading.Event()
    proc = None
    socks = {}
    try:
        for framing in ("rfc3164", "rfc5424"):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            s.bind(os.path.join(tmp, framing + ".sock"))
            s.settimeout(0.1)
            socks[framing] = s
        fe, be_port, dead = free_port(), free_port(), free_port()
        threading.Thread(target=backend, args=(be_port, stop), daemon=True).start()
        cfg = f"""
global
    log stderr format raw local0 info
defaults
    mode http
    log global
    option httplog
    option dontlognull
    timeout connect 1s
    timeout client 5s
    timeout server 1s
frontend llm_in
    bind 127.0.0.1:{fe}
    option http-buffer-request
    unique-id-format %{{+X}}o\\ %ci:%cp_%fi:%fp_%Ts_%rt:%pid
    log-format {warmlane_format()}
    log unix@{tmp}/rfc3164.sock len 4096 format rfc3164 local0 info
    log unix@{tmp}/rfc5424.sock len 4096 format rfc5424 local0 info
    # what the agent would have set
    http-request set-var(txn.warmlane.stream) req.body,json_query('$.stream')
    http-request set-var(txn.warmlane.backend) str(llm) if {{ req.hdr(x-decided) -m found }}
    http-request set-var(txn.warmlane.server) req.hdr(x-decided) if {{ req.hdr(x-decided) -m found }}
    http-request set-var(txn.warmlane.key) str(k1) if {{ req.hdr(x-decided) -m found }}
    http-request set-var(txn.warmlane.akey) str(9f86d081884c7d65) if {{ req.hdr(x-decided) -m found }}
    http-request set-var(txn.warmlane.reason) str(affinity) if {{ req.hdr(x-decided) -m found }}
    http-response set-var(txn.warmlane.ack) bool(true) if {{ var(txn.warmlane.server) -m found }}
    default_backend llm
backend llm
    use-server %[var(txn.warmlane.server)] if {{ var(txn.warmlane.server) -m found }}
    server s1 127.0.0.1:{be_port}
    server s2 127.0.0.1:{dead}
"""
        path = os.path.join(tmp, "haproxy.cfg")
        with open(path, "w") as f:
            f.write(cfg)
        chk = subprocess.run([binary, "-c", "-f", path], capture_output=True, text=True,
                             timeout=20)
        if chk.returncode != 0:
            raise SystemExit(f"haproxy -c:\n{chk.stdout}{chk.stderr}")
        proc = subprocess.Popen([binary, "-db", "-f", path], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", fe), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)

        def drain():
            got = {}
            deadline = time.monotonic() + 3
            while time.monotonic() < deadline and len(got) < 2:
                for framing, s in socks.items():
                    if framing in got:
                        continue
                    try:
                        got[framing] = s.recv(65536)
                    except socket.timeout:
                        pass
            return got

        def request(path, decided="s1", body=b'{"model":"m1","stream":true}', abort=False):
            hdrs = {"content-type": "application/json"}
            if decided:
                hdrs["x-decided"] = decided
            if abort:
                s = socket.create_connection(("127.0.0.1", fe), timeout=3)
                head = "".join(f"{k}: {v}\r\n" for k, v in hdrs.items())
                s.sendall(f"POST {path} HTTP/1.1\r\nhost: x\r\n{head}content-length: "
                          f"{len(body)}\r\n\r\n".encode() + body)
                s.recv(100)  # the headers, then go away mid-stream
                s.close()
                return
            c = http.client.HTTPConnection("127.0.0.1", fe, timeout=5)
            try:
                c.request("POST", path, body=body, headers=hdrs)
                r = c.getresponse()
                try:
                    r.read()
                except (http.client.HTTPException, OSError):
                    pass
            except (http.client.HTTPException, OSError):
                pass
            finally:
                c.close()

        cases = [
            ("complete", dict(path="/ok", body=b'{"model":"m1"}')),
            ("notfound", dict(path="/404")),
            ("stream", dict(path="/stream")),
            ("cut", dict(path="/cut")),
            ("refused", dict(path="/ok", decided="s2")),
            ("timeout", dict(path="/slow")),
            ("abort", dict(path="/slowstream", abort=True)),
            ("failopen", dict(path="/ok", decided=None)),
            ("hostile", dict(path="/ok",
                             body=b'{"stream":"a\\" st=500 ts=SC-- x\\u0001"}')),
        ]
        for name, kw in cases:
            for s in socks.values():  # nothing left from the previous case
                try:
                    while s.recv(65536):
                        pass
                except socket.timeout:
                    pass
            request(**kw)
            for framing, data in drain().items():
                with open(os.path.join(outdir, f"{version}-{name}-{framing}"), "wb") as f:
                    f.write(data)
                print(f"{version}-{name}-{framing}: {data!r}")
    finally:
        stop.set()
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        for s in socks.values():
            s.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
