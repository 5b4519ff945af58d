-- "Reported" is a final state of its own (issue #36): a conversion step that ends without sending (too old for the
-- platform's window, a stage the target does not map) is neither delivered nor a dead letter, and is never tried
-- again. SQLite cannot change a CHECK constraint in place, so `delivery` (and `attempt`, whose outcome gains
-- `reported`) is rebuilt as SQLite's documented procedure does it (https://sqlite.org/lang_altertable.html,
-- "making other kinds of table schema changes"): with foreign keys off (`store::sqlite` turns them off around the
-- migrations: a transaction cannot), copy into a new table with every id, drop the old one, rename, then recreate
-- every index and trigger exactly as the earlier migrations left them. `legacy_alter_table` keeps the rename from
-- re-checking triggers of other tables that name `delivery` while it is briefly missing. PostgreSQL's 0016 swaps
-- the constraints in place. The same rebuild adds `lead_key` (a lead's steps to one target go out in order).
PRAGMA legacy_alter_table = ON;

CREATE TABLE delivery_new (
    id                INTEGER PRIMARY KEY,
    event_id          INTEGER NOT NULL REFERENCES inbound_event (id),
    step_index        INTEGER NOT NULL,
    target            TEXT    NOT NULL,
    state             TEXT    NOT NULL CHECK (state IN ('waiting', 'pending', 'running', 'delivered', 'dead', 'reported')),
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
    dead_cause        TEXT,
    resolved_at       INTEGER,
    resolved_by       TEXT,
    resolution_note   TEXT,
    fallback_of       TEXT,
    key_revision      INTEGER NOT NULL DEFAULT 1,
    dropped_fields    TEXT,
    missing_task      TEXT
    CHECK (missing_task IN ('open', 'follow_up', 'done', 'corrected')),
    -- The lead the step's event belongs to (`{source}:{source_ref}`; a stage change names its lead): a step is not
    -- claimed while a step of an earlier event of the same lead to the same target is unfinished, so a lead's
    -- stages reach a conversion step in order across retries.
    lead_key          TEXT,
    UNIQUE (event_id, step_index)
);

INSERT INTO delivery_new (id, event_id, step_index, target, state, attempts, created_at, pending_since, next_attempt_at, lease_owner, lease_until, lease_token, in_doubt, trigger, replay_generation, result, delivered_at, dead_at, dead_class, dead_status, dead_reason, dead_field, resolution, dead_cause, resolved_at, resolved_by, resolution_note, fallback_of, key_revision, dropped_fields, missing_task)
SELECT id, event_id, step_index, target, state, attempts, created_at, pending_since, next_attempt_at, lease_owner, lease_until, lease_token, in_doubt, trigger, replay_generation, result, delivered_at, dead_at, dead_class, dead_status, dead_reason, dead_field, resolution, dead_cause, resolved_at, resolved_by, resolution_note, fallback_of, key_revision, dropped_fields, missing_task FROM delivery;
DROP TABLE delivery;
ALTER TABLE delivery_new RENAME TO delivery;

CREATE INDEX delivery_due ON delivery (target, next_attempt_at) WHERE state = 'pending';
CREATE INDEX delivery_oldest ON delivery (target, pending_since) WHERE state IN ('pending', 'running');
CREATE INDEX delivery_lease ON delivery (lease_until) WHERE state = 'running';
CREATE INDEX delivery_dead ON delivery (dead_at) WHERE state = 'dead';
CREATE INDEX delivery_delivered ON delivery (delivered_at) WHERE state = 'delivered';
CREATE INDEX delivery_dead_cause ON delivery (dead_class, target, dead_cause, resolution, dead_at, dead_status)
    WHERE state = 'dead';
CREATE INDEX delivery_dead_cause_only ON delivery (dead_cause) WHERE state = 'dead';
CREATE INDEX delivery_resolved ON delivery (resolved_at) WHERE resolved_at IS NOT NULL;
CREATE INDEX delivery_target_delivered ON delivery (target, delivered_at) WHERE state = 'delivered';
CREATE INDEX delivery_dead_group ON delivery (dead_class, target, dead_cause, resolution) WHERE state = 'dead';
CREATE INDEX delivery_oldest_lead ON delivery (target, created_at) WHERE state IN ('pending', 'running');
CREATE INDEX delivery_missing ON delivery (target, delivered_at) WHERE dropped_fields IS NOT NULL;

CREATE TRIGGER delivery_tally_insert AFTER INSERT ON delivery
BEGIN
    INSERT INTO delivery_tally (target, bucket, n)
    VALUES (NEW.target,
            CASE WHEN NEW.state = 'dead' AND NEW.resolution = 'open' THEN 'dead:' || NEW.dead_class
                 WHEN NEW.state = 'dead' THEN 'dead_resolved' ELSE NEW.state END,
            1)
    ON CONFLICT (target, bucket) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER delivery_tally_update AFTER UPDATE OF state, dead_class, resolution, target ON delivery
WHEN OLD.target IS NOT NEW.target
     OR (CASE WHEN OLD.state = 'dead' AND OLD.resolution = 'open' THEN 'dead:' || OLD.dead_class
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

CREATE TRIGGER dead_letter_tally_insert AFTER INSERT ON delivery WHEN NEW.state = 'dead'
BEGIN
    INSERT INTO dead_letter_tally (target, class, cause, cause_null, resolution, status, source, purged, n)
    SELECT NEW.target, COALESCE(NEW.dead_class, ''), COALESCE(NEW.dead_cause, ''), NEW.dead_cause IS NULL,
           COALESCE(NEW.resolution, ''), COALESCE(NEW.dead_status, -1), e.source, e.purged_at IS NOT NULL, 1
      FROM inbound_event e WHERE e.id = NEW.event_id
    ON CONFLICT DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER dead_letter_tally_update
AFTER UPDATE OF state, target, event_id, dead_class, dead_cause, dead_status, resolution ON delivery
WHEN OLD.state = 'dead' OR NEW.state = 'dead'
BEGIN
    UPDATE dead_letter_tally SET n = n - 1
     WHERE OLD.state = 'dead'
       AND target = OLD.target AND class = COALESCE(OLD.dead_class, '') AND cause = COALESCE(OLD.dead_cause, '')
       AND cause_null = (OLD.dead_cause IS NULL) AND resolution = COALESCE(OLD.resolution, '')
       AND status = COALESCE(OLD.dead_status, -1)
       AND (source, purged) = (SELECT e.source, e.purged_at IS NOT NULL FROM inbound_event e WHERE e.id = OLD.event_id);
    INSERT INTO dead_letter_tally (target, class, cause, cause_null, resolution, status, source, purged, n)
    SELECT NEW.target, COALESCE(NEW.dead_class, ''), COALESCE(NEW.dead_cause, ''), NEW.dead_cause IS NULL,
           COALESCE(NEW.resolution, ''), COALESCE(NEW.dead_status, -1), e.source, e.purged_at IS NOT NULL, 1
      FROM inbound_event e WHERE e.id = NEW.event_id AND NEW.state = 'dead'
    ON CONFLICT DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER dead_letter_tally_delete AFTER DELETE ON delivery WHEN OLD.state = 'dead'
BEGIN
    UPDATE dead_letter_tally SET n = n - 1
     WHERE target = OLD.target AND class = COALESCE(OLD.dead_class, '') AND cause = COALESCE(OLD.dead_cause, '')
       AND cause_null = (OLD.dead_cause IS NULL) AND resolution = COALESCE(OLD.resolution, '')
       AND status = COALESCE(OLD.dead_status, -1)
       AND (source, purged) = (SELECT e.source, e.purged_at IS NOT NULL FROM inbound_event e WHERE e.id = OLD.event_id);
END;

CREATE TRIGGER dead_letter_episode_insert AFTER INSERT ON delivery WHEN NEW.state = 'dead'
BEGIN
    INSERT INTO dead_letter_episode (delivery_id, target, died_at, class, http_status, reason, cause, field,
                                     resolution, resolved_at, resolved_by, resolution_note)
    VALUES (NEW.id, NEW.target, COALESCE(NEW.dead_at, NEW.created_at), NEW.dead_class, NEW.dead_status,
            NEW.dead_reason, NEW.dead_cause, NEW.dead_field, COALESCE(NEW.resolution, 'open'), NEW.resolved_at,
            NEW.resolved_by, NEW.resolution_note);
END;

CREATE TRIGGER dead_letter_episode_death AFTER UPDATE OF state, dead_at ON delivery
WHEN NEW.state = 'dead' AND (OLD.state IS NOT 'dead' OR OLD.dead_at IS NOT NEW.dead_at)
BEGIN
    INSERT INTO dead_letter_episode (delivery_id, target, died_at, class, http_status, reason, cause, field,
                                     resolution, resolved_at, resolved_by, resolution_note)
    VALUES (NEW.id, NEW.target, COALESCE(NEW.dead_at, 0), NEW.dead_class, NEW.dead_status, NEW.dead_reason,
            NEW.dead_cause, NEW.dead_field, COALESCE(NEW.resolution, 'open'),
            CASE WHEN NEW.resolution = 'open' THEN NULL ELSE NEW.resolved_at END,
            CASE WHEN NEW.resolution = 'open' THEN NULL ELSE NEW.resolved_by END,
            CASE WHEN NEW.resolution = 'open' THEN NULL ELSE NEW.resolution_note END);
END;

CREATE TRIGGER dead_letter_episode_resolve
AFTER UPDATE OF state, resolution, resolved_at, resolved_by, resolution_note ON delivery
WHEN OLD.state = 'dead'
     AND (OLD.resolution IS NOT NEW.resolution OR OLD.resolved_at IS NOT NEW.resolved_at
          OR OLD.resolved_by IS NOT NEW.resolved_by OR OLD.resolution_note IS NOT NEW.resolution_note
          OR NEW.state != 'dead')
BEGIN
    UPDATE dead_letter_episode
       SET resolution = COALESCE(NEW.resolution, resolution),
           resolved_at = CASE WHEN NEW.state != 'dead' AND NEW.trigger = 'manual' THEN NEW.pending_since
                              ELSE NEW.resolved_at END,
           resolved_by = CASE WHEN NEW.state != 'dead' AND NEW.trigger = 'manual'
                              THEN (SELECT p.actor FROM replay p
                                     WHERE p.id = (SELECT MAX(r.replay_id) FROM replay_item r WHERE r.delivery_id = NEW.id))
                              ELSE NEW.resolved_by END,
           resolution_note = CASE WHEN NEW.state != 'dead' AND NEW.trigger = 'manual'
                                  THEN (SELECT p.reason FROM replay p
                                         WHERE p.id = (SELECT MAX(r.replay_id) FROM replay_item r WHERE r.delivery_id = NEW.id))
                                  ELSE NEW.resolution_note END,
           replay_id = CASE WHEN NEW.state != 'dead' AND NEW.trigger = 'manual'
                            THEN (SELECT MAX(r.replay_id) FROM replay_item r WHERE r.delivery_id = NEW.id) END
     WHERE id = (SELECT MAX(e.id) FROM dead_letter_episode e WHERE e.delivery_id = NEW.id);
END;

-- The attempt that ended such a step is recorded as `reported` too (not counted as a delivery).
CREATE TABLE attempt_new (
    id               INTEGER PRIMARY KEY,
    delivery_id      INTEGER NOT NULL REFERENCES delivery (id),
    started_at       INTEGER NOT NULL,
    duration_ms      INTEGER NOT NULL,
    http_status      INTEGER,
    outcome          TEXT    NOT NULL CHECK (outcome IN ('delivered', 'retry', 'dead', 'released', 'rescued', 'reported')),
    class            TEXT,
    reason           TEXT    NOT NULL,
    response_excerpt TEXT,
    trigger          TEXT    NOT NULL
);
INSERT INTO attempt_new (id, delivery_id, started_at, duration_ms, http_status, outcome, class, reason,
                         response_excerpt, trigger)
SELECT id, delivery_id, started_at, duration_ms, http_status, outcome, class, reason, response_excerpt, trigger
  FROM attempt;
DROP TABLE attempt;
ALTER TABLE attempt_new RENAME TO attempt;
CREATE INDEX attempt_delivery ON attempt (delivery_id);
CREATE INDEX attempt_started ON attempt (started_at);

-- Steps that ended as reported before this state existed were stored as delivered with the words in their result:
-- they become reported (the tally trigger moves their counts), and so does the attempt that ended them.
UPDATE delivery SET state = 'reported'
 WHERE state = 'delivered' AND json_valid(result) AND json_extract(result, '$.reported') IS NOT NULL;
UPDATE attempt SET outcome = 'reported'
 WHERE outcome = 'delivered'
   AND id = (SELECT MAX(a.id) FROM attempt a WHERE a.delivery_id = attempt.delivery_id)
   AND delivery_id IN (SELECT id FROM delivery WHERE state = 'reported');

-- Unfinished steps get their lead's key (finished ones never hold another step back).
UPDATE delivery SET lead_key = (
    SELECT CASE WHEN json_valid(e.payload) AND json_type(e.payload, '$.stage') = 'text'
                     AND json_type(e.payload, '$.lead') IS NOT NULL
                     AND json_type(e.payload, '$.lead_source') = 'text' AND json_type(e.payload, '$.lead_ref') = 'text'
                THEN json_extract(e.payload, '$.lead_source') || ':' || json_extract(e.payload, '$.lead_ref')
                ELSE e.source || ':' || e.source_ref END
      FROM inbound_event e WHERE e.id = delivery.event_id)
 WHERE state IN ('waiting', 'pending', 'running');
CREATE INDEX delivery_lead_order ON delivery (target, lead_key, event_id) WHERE state IN ('waiting', 'pending', 'running');

PRAGMA legacy_alter_table = OFF;
