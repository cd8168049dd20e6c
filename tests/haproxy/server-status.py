#!/usr/bin/env python3
"""server-status.py SOCKET PROXY SERVER: prints the `show stat` status of
PROXY/SERVER read on HAProxy's stats socket (nothing when it is not there).
Used by deploy/quickstart.sh and tests/bench/overhead.sh."""
import socket
import sys

s = socket.socket(socket.AF_UNIX)
s.settimeout(2)
s.connect(sys.argv[1])
s.sendall(b"show stat\n")
data = b""
while True:
    d = s.recv(65536)
    if not d:
        break
    data += d
lines = data.decode().splitlines()
head = lines[0].lstrip("# ").split(",") if lines else []
for line in lines[1:]:
    r = dict(zip(head, line.split(",")))
    if r.get("pxname") == sys.argv[2] and r.get("svname") == sys.argv[3]:
        print(r["status"])
