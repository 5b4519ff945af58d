-- Operations on top of the delivery model: replays, alerts, paused targets, chart samples, API tokens.

-- A replay batch: who asked, when, why, for what; replay_item links it to each requeued delivery.
CREATE TABLE replay (
    id          INTEGER PRIMARY KEY,
    created_at  INTEGER NOT NULL,
    actor       TEXT    NOT NULL,
    reason      TEXT    NOT NULL,
    selection   TEXT    NOT NULL,   -- JSON: the filter or the ids chosen
    requested   INTEGER NOT NULL,   -- what the preview promised
    requeued    INTEGER NOT NULL    -- what was actually requeued
);
CREATE TABLE replay_item (
    replay_id   INTEGER NOT NULL REFERENCES replay (id),
    delivery_id INTEGER NOT NULL REFERENCES delivery (id),
    prior_class  TEXT,
    prior_reason TEXT,
    PRIMARY KEY (replay_id, delivery_id)
) WITHOUT ROWID;
CREATE INDEX replay_item_delivery ON replay_item (delivery_id);

-- Alerts: open → acknowledged → resolved. At most one unresolved alert per (kind, key).
CREATE TABLE alert (
    id              INTEGER PRIMARY KEY,
    kind            TEXT    NOT NULL,
    key             TEXT    NOT NULL,
    severity        TEXT    NOT NULL CHECK (severity IN ('critical', 'warning', 'info')),
    title           TEXT    NOT NULL,
    detail          TEXT    NOT NULL,
    opened_at       INTEGER NOT NULL,
    last_seen_at    INTEGER NOT NULL,
    occurrences     INTEGER NOT NULL DEFAULT 1,
    acknowledged_at INTEGER,
    acknowledged_by TEXT,
    resolved_at     INTEGER,
    resolution_note TEXT
);
CREATE UNIQUE INDEX alert_unresolved ON alert (kind, key) WHERE resolved_at IS NULL;
CREATE INDEX alert_opened ON alert (opened_at);

-- Targets an operator paused: the worker sends nothing to them until resumed.
CREATE TABLE target_pause (
    target    TEXT    PRIMARY KEY,
    paused_at INTEGER NOT NULL,
    paused_by TEXT    NOT NULL
) WITHOUT ROWID;

-- Queue samples for the charts (overall), one every few seconds.
CREATE TABLE queue_sample (
    at            INTEGER PRIMARY KEY,
    pending       INTEGER NOT NULL,
    running       INTEGER NOT NULL,
    oldest_age_s  REAL,
    dead_by_class TEXT    NOT NULL   -- JSON object: class → open dead letters
);

CREATE INDEX attempt_started ON attempt (started_at);

-- Browser-mode API tokens: only a SHA-256 of the token is kept; the token itself is shown once.
CREATE TABLE api_token (
    name         TEXT    PRIMARY KEY,
    token_sha256 TEXT    NOT NULL,
    created_at   INTEGER NOT NULL
) WITHOUT ROWID;
