-- Monitoring: metric history, alert notification bookkeeping, reconciliation runs.

-- Metric history: one row per (metric, key, resolution, bucket). Resolution 60 (per minute, kept
-- monitor.metrics.minute_retention_hours) or 3600 (hourly roll-up, kept monitor.metrics.hourly_retention_days).
-- Counters (events, delivered, failed, dead_lettered) are recomputed from the raw tables, so a restart or a late
-- commit never leaves a gap; gauges (pending, oldest_age_s, dead_open) keep the highest value seen in the bucket.
-- Keys: a source (events), a target (delivered, failed, dead_lettered, pending, oldest_age_s), a class
-- (dead_open) or '*' (overall).
CREATE TABLE metric_point (
    metric     TEXT    NOT NULL,
    key        TEXT    NOT NULL,
    resolution INTEGER NOT NULL CHECK (resolution IN (60, 3600)),
    at         INTEGER NOT NULL,   -- bucket start, Unix ms
    value      REAL    NOT NULL,
    PRIMARY KEY (metric, key, resolution, at)
) WITHOUT ROWID;
CREATE INDEX metric_point_time ON metric_point (resolution, at);

-- The 5-second queue samples are replaced by per-minute gauges.
DROP TABLE queue_sample;

-- Notification bookkeeping: when the alert was last announced, how often, and whether it waits for the digest.
ALTER TABLE alert ADD COLUMN notified_at INTEGER;
ALTER TABLE alert ADD COLUMN notifications INTEGER NOT NULL DEFAULT 0;
ALTER TABLE alert ADD COLUMN digest_pending INTEGER NOT NULL DEFAULT 0;

-- Reconciliation: each comparison with a source's own list of leads.
CREATE TABLE reconciliation_run (
    id          INTEGER PRIMARY KEY,
    source      TEXT    NOT NULL,
    started_at  INTEGER NOT NULL,
    finished_at INTEGER,
    since       INTEGER NOT NULL,   -- the watermark listed from, Unix ms
    listed      INTEGER NOT NULL DEFAULT 0,
    missing     INTEGER NOT NULL DEFAULT 0,   -- listed by the source but never received as a webhook
    ingested    INTEGER NOT NULL DEFAULT 0,
    missing_refs TEXT,                         -- JSON array of the source ids recovered (first 100)
    error       TEXT
);
CREATE INDEX reconciliation_run_source ON reconciliation_run (source, started_at);

-- Recovered events say so (the detail view and the figures tell them apart).
ALTER TABLE inbound_event ADD COLUMN via TEXT NOT NULL DEFAULT 'webhook' CHECK (via IN ('webhook', 'reconciliation'));

-- Delivery figures read delivered steps by time.
CREATE INDEX delivery_delivered ON delivery (delivered_at) WHERE state = 'delivered';

-- Volume checks read a source's last event and its count in a rolling window.
CREATE INDEX inbound_event_source_received ON inbound_event (source, received_at);
