-- SQLite: 0008_oldest_lead_index.
-- The age of the oldest undelivered lead, per target, from one index seek: a step's created_at is its lead's
-- reception (steps are created in the commit that stores the lead, and neither retries, replays nor revisions
-- change it), so MIN(created_at) over the unfinished steps needs no join with inbound_event.
CREATE INDEX delivery_oldest_lead ON delivery (target, created_at) WHERE state IN ('pending', 'running');
