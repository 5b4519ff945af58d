-- PostgreSQL: 0013_missing_data_and_episodes.
-- No lead thrown away for one bad field, and a dead letter that remembers every death (issue #38).

-- ── Delivered with missing data ──
-- A target's `missing_data` lets a lead whose only refused fields are on its drop list go again without them.
-- dropped_fields: the CRM fields this step goes without (JSON list; NULL: the whole record), read by every claim;
-- the step's operation key names them, so the send without them is an operation of its own.
-- missing_task: the person's task: 'open' (Leadline's "Needs a person"), 'follow_up' (a follow-up step asks),
-- 'done' (checked by a person), 'corrected' (the corrected value was sent as an update).
ALTER TABLE delivery ADD COLUMN dropped_fields TEXT;
ALTER TABLE delivery ADD COLUMN missing_task TEXT
    CHECK (missing_task IN ('open', 'follow_up', 'done', 'corrected'));
-- "Delivered with missing data", overall and per target, read without scanning deliveries.
CREATE INDEX delivery_missing ON delivery (target, delivered_at) WHERE dropped_fields IS NOT NULL;
-- Which fields a step left out and why (the refusal that dropped each), kept after a correction.
CREATE TABLE missing_field (
    delivery_id INTEGER NOT NULL REFERENCES delivery (id),
    field       TEXT    NOT NULL,
    reason      TEXT    NOT NULL,
    at          INTEGER NOT NULL,
    PRIMARY KEY (delivery_id, field)
);

-- ── Dead-letter episodes ──
-- Each death of a step is its own row, never overwritten: when, its class, reason, cause and field, and what
-- became of it (resolution, who, when, how, and the replay that sent it again). The delivery row keeps the
-- current (last) episode in its dead_* columns, as before; the triggers below write this history in the same
-- transaction as every change to it, whichever code path makes it.
CREATE TABLE dead_letter_episode (
    id              INTEGER PRIMARY KEY,
    delivery_id     INTEGER NOT NULL REFERENCES delivery (id),
    target          TEXT    NOT NULL,
    died_at         INTEGER NOT NULL,
    class           TEXT,
    http_status     INTEGER,
    reason          TEXT,
    cause           TEXT,
    field           TEXT,
    resolution      TEXT    NOT NULL CHECK (resolution IN ('open', 'replayed', 'fixed_manually', 'discarded')),
    resolved_at     INTEGER,
    resolved_by     TEXT,
    resolution_note TEXT,
    replay_id       INTEGER
);
CREATE INDEX dead_letter_episode_delivery ON dead_letter_episode (delivery_id, died_at, id);
CREATE INDEX dead_letter_episode_open ON dead_letter_episode (class, cause) WHERE resolution = 'open';

-- Existing rows: every earlier death a delivery's attempts recorded (outcome 'dead', then sent again), and the
-- last death the delivery row holds, with its resolution.
INSERT INTO dead_letter_episode (delivery_id, target, died_at, class, http_status, reason, cause, field, resolution)
SELECT a.delivery_id, d.target, a.started_at + a.duration_ms, a.class, a.http_status, a.reason, a.reason, NULL,
       'replayed'
  FROM attempt a JOIN delivery d ON d.id = a.delivery_id
 WHERE a.outcome = 'dead' AND d.dead_at IS NOT NULL
   AND EXISTS (SELECT 1 FROM attempt b WHERE b.delivery_id = a.delivery_id AND b.outcome = 'dead' AND b.id > a.id)
 ORDER BY a.id;
INSERT INTO dead_letter_episode (delivery_id, target, died_at, class, http_status, reason, cause, field, resolution,
                                 resolved_at, resolved_by, resolution_note, replay_id)
SELECT d.id, d.target, d.dead_at, d.dead_class, d.dead_status, d.dead_reason, d.dead_cause, d.dead_field,
       CASE WHEN d.state = 'dead' THEN COALESCE(d.resolution, 'open') ELSE 'replayed' END,
       CASE WHEN d.state = 'dead' THEN d.resolved_at ELSE COALESCE(d.resolved_at, d.pending_since) END,
       d.resolved_by, d.resolution_note,
       CASE WHEN d.state != 'dead' THEN (SELECT MAX(r.replay_id) FROM replay_item r WHERE r.delivery_id = d.id) END
  FROM delivery d
 WHERE d.dead_at IS NOT NULL
 ORDER BY d.dead_at, d.id;

-- A step stored dead (fixtures, imports).
CREATE TRIGGER dead_letter_episode_insert AFTER INSERT ON delivery WHEN NEW.state = 'dead'
BEGIN
    INSERT INTO dead_letter_episode (delivery_id, target, died_at, class, http_status, reason, cause, field,
                                     resolution, resolved_at, resolved_by, resolution_note)
    VALUES (NEW.id, NEW.target, COALESCE(NEW.dead_at, NEW.created_at), NEW.dead_class, NEW.dead_status,
            NEW.dead_reason, NEW.dead_cause, NEW.dead_field, COALESCE(NEW.resolution, 'open'), NEW.resolved_at,
            NEW.resolved_by, NEW.resolution_note);
END;

-- A step dies (again): a new episode. The delivery row may still hold the previous episode's resolver: a new
-- death is open and resolved by no one.
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

-- A dead step is resolved, replayed or sent again by its source: its last episode says so. A replay (the step
-- goes back as `manual`) names itself, its actor and its reason; a resolution by hand or the source's new revision
-- names who and how as the delivery row does.
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
