#!/usr/bin/python3
"""A small CRM for the tray test, speaking the `http` target's protocol: POST /leads with Leadline's envelope.
It keeps every record it accepted, by lead, in a file (one external id per line), and answers by the lead's name:
- a name containing "reject": 422 with a validation error (a data problem: the lead becomes a dead letter);
- a name containing "slow": it writes `<records>.started` at once, then answers 200 after 8 seconds (a delivery
  in flight while the app is told to quit);
- anything else: 200.
    mock_crm.py PORT RECORDS_FILE
"""
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT, RECORDS = int(sys.argv[1]), sys.argv[2]


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        envelope = json.loads(body)
        text = json.dumps(envelope)
        external = envelope.get("external_id", "?")
        if "reject" in text:
            self.answer(422, {"error": "email: not a valid address"})
            return
        if "slow" in text:
            open(RECORDS + ".started", "a").write(external + "\n")
            time.sleep(8)
        with open(RECORDS, "a", encoding="utf-8") as f:
            f.write(external + "\n")
        self.answer(200, {"id": external})

    def answer(self, status, doc):
        data = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


open(RECORDS, "a").close()
server = ThreadingHTTPServer(("127.0.0.1", PORT), Handler)
print("mock CRM ready", flush=True)
server.serve_forever()
