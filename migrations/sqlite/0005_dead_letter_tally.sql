-- Dead letters counted by everything the replay preview and the grouping by cause filter on, kept exact by the
-- triggers below in the same transaction as every change: a preview or a grouping over a million dead letters
-- reads a few hundred tally rows (and a few index seeks per group) instead of the million rows.
-- Keys: cause is COALESCE(dead_cause, '') with cause_null telling a NULL cause apart; status is
-- COALESCE(dead_status, -1); class is COALESCE(dead_class, ''); purged: the lead's data was purged. Rows whose
-- count fell to 0 are kept (readers ignore them).
CREATE TABLE dead_letter_tally (
    target     TEXT    NOT NULL,
    class      TEXT    NOT NULL,
    cause      TEXT    NOT NULL,
    cause_null INTEGER NOT NULL,
    resolution TEXT    NOT NULL,
    status     INTEGER NOT NULL,
    source     TEXT    NOT NULL,
    purged     INTEGER NOT NULL,
    n          INTEGER NOT NULL,
    PRIMARY KEY (target, class, cause, cause_null, resolution, status, source, purged)
) WITHOUT ROWID;

INSERT INTO dead_letter_tally (target, class, cause, cause_null, resolution, status, source, purged, n)
SELECT d.target, COALESCE(d.dead_class, ''), COALESCE(d.dead_cause, ''), d.dead_cause IS NULL,
       COALESCE(d.resolution, ''), COALESCE(d.dead_status, -1), e.source, e.purged_at IS NOT NULL, COUNT(*)
  FROM delivery d JOIN inbound_event e ON e.id = d.event_id
 WHERE d.state = 'dead'
 GROUP BY 1, 2, 3, 4, 5, 6, 7, 8;

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

-- A lead's source or purge changes the key of each of its dead letters.
CREATE TRIGGER dead_letter_tally_event AFTER UPDATE OF source, purged_at ON inbound_event
WHEN OLD.source IS NOT NEW.source OR (OLD.purged_at IS NULL) IS NOT (NEW.purged_at IS NULL)
BEGIN
    INSERT INTO dead_letter_tally (target, class, cause, cause_null, resolution, status, source, purged, n)
    SELECT d.target, COALESCE(d.dead_class, ''), COALESCE(d.dead_cause, ''), d.dead_cause IS NULL,
           COALESCE(d.resolution, ''), COALESCE(d.dead_status, -1), OLD.source, OLD.purged_at IS NOT NULL, -1
      FROM delivery d WHERE d.event_id = OLD.id AND d.state = 'dead'
    ON CONFLICT DO UPDATE SET n = n + excluded.n;
    INSERT INTO dead_letter_tally (target, class, cause, cause_null, resolution, status, source, purged, n)
    SELECT d.target, COALESCE(d.dead_class, ''), COALESCE(d.dead_cause, ''), d.dead_cause IS NULL,
           COALESCE(d.resolution, ''), COALESCE(d.dead_status, -1), NEW.source, NEW.purged_at IS NOT NULL, 1
      FROM delivery d WHERE d.event_id = NEW.id AND d.state = 'dead'
    ON CONFLICT DO UPDATE SET n = n + excluded.n;
END;

-- A group's newest member (its example) is one seek: the rowid follows the group's columns.
CREATE INDEX delivery_dead_group ON delivery (dead_class, target, dead_cause, resolution) WHERE state = 'dead';
