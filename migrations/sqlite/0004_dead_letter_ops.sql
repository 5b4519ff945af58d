-- Dead-letter operations at scale: causes, resolution, staged replays, payload fixes, fallbacks, purging.

-- The cause of a dead letter: its reason with lead-specific values masked, so 2,000 failures that are really
-- 3 problems group as 3 (computed by dlq::cause_of when the step dies; older rows keep their reason).
ALTER TABLE delivery ADD COLUMN dead_cause TEXT;
UPDATE delivery SET dead_cause = dead_reason WHERE state = 'dead';
-- Grouping reads only this index (it covers what the groups show); a group's replay seeks it.
CREATE INDEX delivery_dead_cause ON delivery (dead_class, target, dead_cause, resolution, dead_at, dead_status)
    WHERE state = 'dead';
CREATE INDEX delivery_dead_cause_only ON delivery (dead_cause) WHERE state = 'dead';

-- Who resolved a dead letter by hand (discarded, fixed in the CRM), when and why.
ALTER TABLE delivery ADD COLUMN resolved_at INTEGER;
ALTER TABLE delivery ADD COLUMN resolved_by TEXT;
ALTER TABLE delivery ADD COLUMN resolution_note TEXT;
CREATE INDEX delivery_resolved ON delivery (resolved_at) WHERE resolved_at IS NOT NULL;
-- The step's own target when a replay ran its fallback instead (the lead was too old for it).
ALTER TABLE delivery ADD COLUMN fallback_of TEXT;

-- Payloads: the original before the first fix, and when it was purged (statistics stay).
ALTER TABLE inbound_event ADD COLUMN original_payload TEXT;
ALTER TABLE inbound_event ADD COLUMN purged_at INTEGER;

-- Replays run in the background: a canary first, then paced; they pause by themselves and can be cancelled.
-- status: running, paused (by a person, or because the canary failed), cancelled, finished.
ALTER TABLE replay ADD COLUMN status TEXT NOT NULL DEFAULT 'finished';
ALTER TABLE replay ADD COLUMN phase TEXT NOT NULL DEFAULT 'rest';   -- canary, rest
ALTER TABLE replay ADD COLUMN canary_size INTEGER NOT NULL DEFAULT 0;
ALTER TABLE replay ADD COLUMN rate_per_second REAL NOT NULL DEFAULT 0;
ALTER TABLE replay ADD COLUMN finished_at INTEGER;
-- Why it is not sending right now (target breaker open, rate-limited, paused), while status is running.
ALTER TABLE replay ADD COLUMN waiting_for TEXT;
ALTER TABLE replay ADD COLUMN auto INTEGER NOT NULL DEFAULT 0;
ALTER TABLE replay_item ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE replay_item ADD COLUMN requeued_at INTEGER;   -- NULL: not sent back yet
ALTER TABLE replay_item ADD COLUMN fallback_to TEXT;      -- the step runs this target instead
UPDATE replay_item SET requeued_at = (SELECT created_at FROM replay WHERE replay.id = replay_item.replay_id);
CREATE INDEX replay_item_queue ON replay_item (replay_id, requeued_at, seq);

-- What happened to a replay, in order: started, canary passed, paused (and why), resumed, cancelled, finished.
CREATE TABLE replay_event (
    id        INTEGER PRIMARY KEY,
    replay_id INTEGER NOT NULL REFERENCES replay (id),
    at        INTEGER NOT NULL,
    kind      TEXT    NOT NULL,
    detail    TEXT    NOT NULL
);
CREATE INDEX replay_event_replay ON replay_event (replay_id, id);

-- Fixes to a lead's data before a replay: one row per changed lead, with the value before and after.
CREATE TABLE payload_fix (
    id        INTEGER PRIMARY KEY,
    event_id  INTEGER NOT NULL REFERENCES inbound_event (id),
    at        INTEGER NOT NULL,
    actor     TEXT    NOT NULL,
    reason    TEXT    NOT NULL,
    operation TEXT    NOT NULL,   -- JSON: the edit or the field fix applied
    before    TEXT    NOT NULL,   -- JSON
    after     TEXT    NOT NULL    -- JSON
);
CREATE INDEX payload_fix_event ON payload_fix (event_id);

-- A fallback moves a step to another target: the tallies must follow target changes too.
DROP TRIGGER delivery_tally_update;
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

-- Auto-replay asks when a target last delivered.
CREATE INDEX delivery_target_delivered ON delivery (target, delivered_at) WHERE state = 'delivered';
