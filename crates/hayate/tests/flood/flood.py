"""A local client flooding a switch's OpenFlow listener (netns_flood.rs): keeps up to N
connections to 127.0.0.1:PORT open for SECONDS, each sending HELLO and then three bytes of a
next message's header (an ECHO_REQUEST of 65,280 bytes or more), then one more byte a second
(a partial message trickled for ever).
Connections the switch closes are replaced, at most 5 * N connections in all. Prints
"flooding" once the first N were attempted, and at the end: attempts=A opened=O closed=C."""

import resource
import socket
import sys
import time

port, n, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
_, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
HELLO = bytes([4, 0, 0, 8, 0, 0, 0, 1])
conns = []
attempts = opened = closed = 0


def top_up():
    global attempts, opened
    while len(conns) < n and attempts < 5 * n:
        attempts += 1
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=1)
            s.sendall(HELLO + bytes([4, 2, 0xFF]))
            s.setblocking(False)
            conns.append(s)
            opened += 1
        except OSError:
            pass


top_up()
print("flooding", flush=True)
end = time.time() + seconds
while time.time() < end:
    time.sleep(1)
    for s in list(conns):
        try:
            s.send(b"\x00")
            # A switch that closed the connection shows it on the next read.
            if s.recv(65536, socket.MSG_PEEK) == b"":
                raise OSError("closed")
        except BlockingIOError:
            pass
        except OSError:
            closed += 1
            conns.remove(s)
            s.close()
    top_up()
print(f"attempts={attempts} opened={opened} closed={closed}", flush=True)
