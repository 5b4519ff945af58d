-- Leadline's delivery model (DESIGN.md, "The delivery model"). Times are Unix milliseconds (UTC).

-- The raw event as received, written before the HTTP reply. UNIQUE(source, source_ref) makes duplicate
-- webhooks harmless. Nothing here is ever deleted by the worker.
CREATE TABLE inbound_event (
    id          INTEGER PRIMARY KEY,
    source      TEXT    NOT NULL,
    source_ref  TEXT    NOT NULL,
    received_at INTEGER NOT NULL,
    payload     TEXT    NOT NULL,            -- JSON
    UNIQUE (source, source_ref)
);
CREATE INDEX inbound_event_received ON inbound_event (received_at);

-- One row per step of an event's route (a delivery to one target), in order.
-- States: waiting (an earlier step is not delivered yet), pending (due at next_attempt_at),
-- running (leased until lease_until), delivered, dead (in the DLQ; resolution says what became of it).
CREATE TABLE delivery (
    id                INTEGER PRIMARY KEY,
    event_id          INTEGER NOT NULL REFERENCES inbound_event (id),
    step_index        INTEGER NOT NULL,
    target            TEXT    NOT NULL,
    state             TEXT    NOT NULL CHECK (state IN ('waiting', 'pending', 'running', 'delivered', 'dead')),
    attempts          INTEGER NOT NULL DEFAULT 0,   -- counted attempts; rate-limited answers do not count
    created_at        INTEGER NOT NULL,
    pending_since     INTEGER,                      -- when the step last became due; the time budget runs from here
    next_attempt_at   INTEGER,
    lease_owner       TEXT,
    lease_until       INTEGER,
    lease_token       INTEGER NOT NULL DEFAULT 0,   -- bumped by every claim; a completion must present it
    in_doubt          INTEGER NOT NULL DEFAULT 0,   -- a lease expired mid-attempt: the CRM may have the lead
    trigger           TEXT    NOT NULL DEFAULT 'scheduled' CHECK (trigger IN ('scheduled', 'manual')),
    replay_generation INTEGER NOT NULL DEFAULT 0,
    result            TEXT,                          -- JSON: what the target answered, e.g. {"crm_id": "..."}
    delivered_at      INTEGER,
    dead_at           INTEGER,
    dead_class        TEXT CHECK (dead_class IN ('transient', 'rate_limited', 'permanent_data', 'permanent_config', 'ambiguous')),
    dead_status       INTEGER,
    dead_reason       TEXT,
    dead_field        TEXT,
    resolution        TEXT CHECK (resolution IN ('open', 'replayed', 'fixed_manually', 'discarded')),
    UNIQUE (event_id, step_index)
);
CREATE INDEX delivery_due ON delivery (target, next_attempt_at) WHERE state = 'pending';
CREATE INDEX delivery_oldest ON delivery (target, pending_since) WHERE state IN ('pending', 'running');
CREATE INDEX delivery_lease ON delivery (lease_until) WHERE state = 'running';
CREATE INDEX delivery_dead ON delivery (dead_at) WHERE state = 'dead';

-- Every attempt, kept: when, how long, what came back and how it was classified.
CREATE TABLE attempt (
    id               INTEGER PRIMARY KEY,
    delivery_id      INTEGER NOT NULL REFERENCES delivery (id),
    started_at       INTEGER NOT NULL,
    duration_ms      INTEGER NOT NULL,
    http_status      INTEGER,
    outcome          TEXT    NOT NULL CHECK (outcome IN ('delivered', 'retry', 'dead', 'released', 'rescued')),
    class            TEXT,
    reason           TEXT    NOT NULL,
    response_excerpt TEXT,
    trigger          TEXT    NOT NULL
);
CREATE INDEX attempt_delivery ON attempt (delivery_id);

-- search_then_create: which CRM record holds a given external id, so a repeat never creates twice.
CREATE TABLE crm_link (
    target      TEXT    NOT NULL,
    external_id TEXT    NOT NULL,
    crm_id      TEXT    NOT NULL,
    linked_at   INTEGER NOT NULL,
    PRIMARY KEY (target, external_id)
) WITHOUT ROWID;

CREATE TABLE breaker_transition (
    id         INTEGER PRIMARY KEY,
    target     TEXT    NOT NULL,
    at         INTEGER NOT NULL,
    from_state TEXT    NOT NULL,
    to_state   TEXT    NOT NULL,
    reason     TEXT    NOT NULL
);
CREATE INDEX breaker_transition_target ON breaker_transition (target, at);

-- Counts per target and bucket, kept exact by the triggers below, so queue health never scans deliveries.
-- Buckets: waiting, pending, running, delivered, dead:<class> (open dead letters), dead_resolved.
CREATE TABLE delivery_tally (
    target TEXT    NOT NULL,
    bucket TEXT    NOT NULL,
    n      INTEGER NOT NULL,
    PRIMARY KEY (target, bucket)
) WITHOUT ROWID;

CREATE TRIGGER delivery_tally_insert AFTER INSERT ON delivery
BEGIN
    INSERT INTO delivery_tally (target, bucket, n)
    VALUES (NEW.target,
            CASE WHEN NEW.state = 'dead' AND NEW.resolution = 'open' THEN 'dead:' || NEW.dead_class
                 WHEN NEW.state = 'dead' THEN 'dead_resolved' ELSE NEW.state END,
            1)
    ON CONFLICT (target, bucket) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER delivery_tally_update AFTER UPDATE OF state, dead_class, resolution ON delivery
WHEN (CASE WHEN OLD.state = 'dead' AND OLD.resolution = 'open' THEN 'dead:' || OLD.dead_class
           WHEN OLD.state = 'dead' THEN 'dead_resolved' ELSE OLD.state END)
     IS NOT
     (CASE WHEN NEW.state = 'dead' AND NEW.resolution = 'open' THEN 'dead:' || NEW.dead_class
           WHEN NEW.state = 'dead' THEN 'dead_resolved' ELSE NEW.state END)
BEGIN
    UPDATE delivery_tally SET n = n - 1
    WHERE target = OLD.target
      AND bucket = CASE WHEN OLD.state = 'dead' AND OLD.resolution = 'open' THEN 'dead:' || OLD.dead_class
                        WHEN OLD.state = 'dead' THEN 'dead_resolved' ELSE OLD.state END;
    INSERT INTO delivery_tally (target, bucket, n)
    VALUES (NEW.target,
            CASE WHEN NEW.state = 'dead' AND NEW.resolution = 'open' THEN 'dead:' || NEW.dead_class
                 WHEN NEW.state = 'dead' THEN 'dead_resolved' ELSE NEW.state END,
            1)
    ON CONFLICT (target, bucket) DO UPDATE SET n = n + 1;
END;
