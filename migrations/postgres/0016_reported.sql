-- SQLite: 0016_reported.
-- "Reported" is a final state of its own (issue #36): a conversion step that ends without sending (too old for the
-- platform's window, a stage the target does not map) is neither delivered nor a dead letter, and is never tried
-- again. The state's CHECK gains the value; the tally's bucket is the state itself (`delivery_bucket`).
ALTER TABLE delivery DROP CONSTRAINT delivery_state_check;
ALTER TABLE delivery ADD CONSTRAINT delivery_state_check
    CHECK (state IN ('waiting', 'pending', 'running', 'delivered', 'dead', 'reported'));
-- The attempt that ends such a step is recorded as `reported` (not counted as a delivery).
ALTER TABLE attempt DROP CONSTRAINT attempt_outcome_check;
ALTER TABLE attempt ADD CONSTRAINT attempt_outcome_check
    CHECK (outcome IN ('delivered', 'retry', 'dead', 'released', 'rescued', 'reported'));

-- Steps that ended as reported before this state existed were stored as delivered with the words in their result:
-- they become reported (the tally trigger moves their counts), and so does the attempt that ended them.
UPDATE delivery SET state = 'reported'
 WHERE state = 'delivered'
   AND CASE WHEN result LIKE '%"reported"%' THEN (result::jsonb) ? 'reported' ELSE false END;
UPDATE attempt SET outcome = 'reported'
 WHERE outcome = 'delivered'
   AND id = (SELECT MAX(a.id) FROM attempt a WHERE a.delivery_id = attempt.delivery_id)
   AND delivery_id IN (SELECT id FROM delivery WHERE state = 'reported');

-- The lead the step's event belongs to (`{source}:{source_ref}`; a stage change names its lead): a step is not
-- claimed while a step of an earlier event of the same lead to the same target is unfinished, so a lead's stages
-- reach a conversion step in order across retries. Unfinished steps get it now; finished ones never hold another.
ALTER TABLE delivery ADD COLUMN lead_key TEXT;
UPDATE delivery d SET lead_key = (
    SELECT CASE WHEN e.payload LIKE '%"stage"%' AND jsonb_typeof(e.payload::jsonb -> 'stage') = 'string'
                     AND (e.payload::jsonb) ? 'lead'
                     AND jsonb_typeof(e.payload::jsonb -> 'lead_source') = 'string'
                     AND jsonb_typeof(e.payload::jsonb -> 'lead_ref') = 'string'
                THEN (e.payload::jsonb ->> 'lead_source') || ':' || (e.payload::jsonb ->> 'lead_ref')
                ELSE e.source || ':' || e.source_ref END
      FROM inbound_event e WHERE e.id = d.event_id)
 WHERE d.state IN ('waiting', 'pending', 'running');
CREATE INDEX delivery_lead_order ON delivery (target, lead_key, event_id) WHERE state IN ('waiting', 'pending', 'running');
