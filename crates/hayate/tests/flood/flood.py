"""A local client flooding a switch's OpenFlow listener (netns_flood.rs): keeps up to N
connections to 127.0.0.1:PORT open for SECONDS, each sending HELLO and then, as an idle
service connection does, a whole ECHO_REQUEST every second (the replies are read and
dropped), so no timeout of the switch ever closes them — only a connection cap does. (A
client that trickles a partial message instead is closed by the switch's message timeout,
and the descriptors such clients free together let a waiting `hayate ctl` in: a flood of
them does not lock out even a switch without caps for long.)
Connections are opened on a thread of their own, so a connect that waits (a full accept
queue) never holds up the echoes, sent from the start. Connections the switch closed are
replaced together once a second, at most 5 * N in all. Prints "flooding" once the first N
were attempted, and at the end: attempts=A opened=O closed=C."""

import resource
import socket
import sys
import threading
import time

port, n, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
_, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
HELLO = bytes([4, 0, 0, 8, 0, 0, 0, 1])
ECHO = bytes([4, 2, 0, 8, 0, 0, 0, 2])
lock = threading.Lock()
conns = []
attempts = opened = closed = 0
first_round = threading.Event()
# Set by the echo loop once a second: the closed connections are replaced then, together.
tick = threading.Event()
end = time.time() + seconds


def top_up():
    global attempts, opened
    while time.time() < end:
        with lock:
            want = len(conns) < n and attempts < 5 * n
            if want:
                attempts += 1
            if attempts >= n:
                first_round.set()
        if not want:
            tick.wait(0.5)
            tick.clear()
            continue
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=0.2)
            s.sendall(HELLO)
            s.setblocking(False)
            with lock:
                conns.append(s)
                opened += 1
        except OSError:
            pass
    first_round.set()


threading.Thread(target=top_up, daemon=True).start()
told = False
while time.time() < end:
    if not told and first_round.wait(1):
        print("flooding", flush=True)
        told = True
    elif told:
        time.sleep(1)
    with lock:
        now = list(conns)
    for s in now:
        try:
            s.send(ECHO)
            # Replies are dropped; a switch that closed the connection shows it here.
            if s.recv(65536) == b"":
                raise OSError("closed")
        except BlockingIOError:
            pass
        except OSError:
            with lock:
                closed += 1
                conns.remove(s)
            s.close()
    tick.set()
with lock:
    print(f"attempts={attempts} opened={opened} closed={closed}", flush=True)
