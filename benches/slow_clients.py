#!/usr/bin/env python3
"""The slow-client attack, measured: 1,000 connections to a signed source of `leadline serve --demo` that announce a
body and send it a few bytes every two seconds. Prints the server's resident memory before, at its peak and after,
how long the server keeps such connections, and whether it still answers.

    python3 benches/slow_clients.py target/debug/leadline

Before the limits (header and body timeouts, a connection cap, a cap on bodies read at once) the same attack took
the server from 29 MB to 1.07 GB and held it.
"""
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

bin_, port = sys.argv[1], 8799
db = os.path.join(tempfile.mkdtemp(prefix="leadline-slow-"), "attack.db")
for f in [db, db + "-wal", db + "-shm"]:
    if os.path.exists(f): os.remove(f)
p = subprocess.Popen([bin_, "serve", "--demo", "--demo-rate", "5", "--listen", f"127.0.0.1:{port}", "--database", db],
                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
time.sleep(4)
def rss():
    for line in open(f"/proc/{p.pid}/status"):
        if line.startswith("VmRSS"): return int(line.split()[1]) // 1024
base = rss()
head = (f"POST /ingest/webform HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        "X-Signature-256: sha256=00\r\nContent-Length: 60000\r\n\r\n{\"id\": \"slow").encode()
socks, refused = [], 0
for i in range(1000):
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=2); s.sendall(head); socks.append(s)
    except OSError: refused += 1
peak = rss()
t0 = time.time()
samples = []
while time.time() - t0 < 40:
    alive = 0
    for s in socks:
        try: s.send(b"a" * 50); alive += 1
        except OSError: pass
    samples.append((round(time.time() - t0), rss(), alive)); peak = max(peak, samples[-1][1])
    time.sleep(2)
for s in socks:
    try: s.close()
    except OSError: pass
time.sleep(3)
after = rss()
try:
    ok = urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5).status
except urllib.error.HTTPError as e:
    ok = e.code
except OSError as e:
    ok = f"no answer ({e})"
print(f"rss_mib_before={base} peak={peak} after={after} connections_opened={len(socks)} refused={refused} readyz_after={ok}")
print("seconds:rss_mib:slow_connections_still_open")
print("", " ".join(f"{t}:{r}:{a}" for t, r, a in samples[::3]))
p.terminate(); p.wait()
