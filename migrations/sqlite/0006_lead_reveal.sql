-- The audit of personal data shown unmasked: every "reveal" of a lead, by whom, when and why. Personal data
-- leaves the store masked by default; revealing it is an explicit request that leaves this trace.
CREATE TABLE lead_reveal (
    id          INTEGER PRIMARY KEY,
    event_id    INTEGER NOT NULL REFERENCES inbound_event (id),
    delivery_id INTEGER NOT NULL REFERENCES delivery (id),
    at          INTEGER NOT NULL,
    actor       TEXT    NOT NULL,
    reason      TEXT    NOT NULL
);
CREATE INDEX lead_reveal_event ON lead_reveal (event_id, at);
