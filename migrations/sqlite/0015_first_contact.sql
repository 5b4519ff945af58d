-- First contacts (issue #37): the message each first-contact step (`whatsapp`, `sms`) sent, the receipts the
-- providers posted about it, and the numbers that opted out. Times are Unix milliseconds (UTC).

-- One row per step: written (status 'sending') before the request leaves, so a lost answer leaves a message in
-- doubt that the step finds on its next try instead of sending a second one.
CREATE TABLE contact_message (
    step_key    TEXT    PRIMARY KEY,           -- source:source_ref:target, carried with the message
    delivery_id INTEGER NOT NULL,
    target      TEXT    NOT NULL,
    channel     TEXT    NOT NULL,              -- whatsapp | sms
    recipient   TEXT    NOT NULL,              -- E.164
    status      TEXT    NOT NULL,              -- sending, refused, accepted, sent, delivered, read, failed, opted_out
    provider_id TEXT,                          -- wamid… / SM…
    error_code  TEXT,
    sent_at     INTEGER NOT NULL,
    generation  INTEGER NOT NULL DEFAULT 0,    -- the step's replay generation when it was sent
    accepted_at INTEGER,
    delivered_at INTEGER,
    updated_at  INTEGER NOT NULL
);
CREATE INDEX contact_message_provider ON contact_message (provider_id);
CREATE INDEX contact_message_delivery ON contact_message (delivery_id);

-- Every receipt, kept: the lead's story shows them.
CREATE TABLE contact_receipt (
    id          INTEGER PRIMARY KEY,
    step_key    TEXT,
    delivery_id INTEGER,
    provider_id TEXT    NOT NULL,
    status      TEXT    NOT NULL,
    error_code  TEXT,
    error_title TEXT,
    at          INTEGER NOT NULL,               -- when the provider says it happened
    received_at INTEGER NOT NULL
);
CREATE INDEX contact_receipt_delivery ON contact_receipt (delivery_id);

-- Numbers that must not be texted: a provider said they unsubscribed (Twilio 21610, a STOP reply).
CREATE TABLE contact_opt_out (
    recipient TEXT    PRIMARY KEY,
    at        INTEGER NOT NULL,
    reason    TEXT    NOT NULL
);
