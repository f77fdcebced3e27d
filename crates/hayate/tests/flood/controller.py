"""A configured controller for netns_flood.rs: accepts the switch's connection on
127.0.0.1:PORT, exchanges HELLO, then for SECONDS sends an ECHO_REQUEST every 0.2 s and waits
for its reply (2 s at most), answering the switch's own echo requests on the way.
Prints "listening" once bound, and at the end: echoes=N failures=F max_ms=M."""

import socket
import struct
import sys
import time

port, seconds = int(sys.argv[1]), float(sys.argv[2])
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", port))
srv.listen(1)
srv.settimeout(30)
print("listening", flush=True)
conn, _ = srv.accept()
conn.settimeout(2)


def recvn(n):
    b = b""
    while len(b) < n:
        chunk = conn.recv(n - len(b))
        if not chunk:
            raise OSError("the switch closed the connection")
        b += chunk
    return b


def recv_msg():
    version, kind, length, xid = struct.unpack("!BBHI", recvn(8))
    return kind, xid, recvn(length - 8)


def send(kind, xid, body=b""):
    conn.sendall(struct.pack("!BBHI", 4, kind, 8 + len(body), xid) + body)


send(0, 1)  # HELLO
while recv_msg()[0] != 0:
    pass
echoes = failures = 0
max_ms = 0.0
end = time.time() + seconds
xid = 100
while time.time() < end:
    xid += 1
    t0 = time.time()
    try:
        send(2, xid, b"ping")
        while True:
            kind, got, body = recv_msg()
            if kind == 2:  # the switch's probe
                send(3, got, body)
            elif kind == 3 and got == xid:
                break
        echoes += 1
        max_ms = max(max_ms, (time.time() - t0) * 1000)
    except OSError as e:
        failures += 1
        print(f"echo {xid} failed: {e}", flush=True)
        if "closed" in str(e):
            break
    time.sleep(0.2)
print(f"echoes={echoes} failures={failures} max_ms={max_ms:.1f}", flush=True)
