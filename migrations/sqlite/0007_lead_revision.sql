-- A lead that changes: the same source and id sent again with different content (a form resubmitted with a
-- corrected phone) is a new revision of the lead, not a duplicate. The stored payload is always the latest
-- revision; `revision` counts them (1 = as first received).
ALTER TABLE inbound_event ADD COLUMN revision INTEGER NOT NULL DEFAULT 1;
ALTER TABLE inbound_event ADD COLUMN revised_at INTEGER;
-- When the lead came into being: its own `created_time` when that is earlier than its reception (a lead
-- recovered by reconciliation hours later), else NULL (= received_at). Time-sensitive steps age leads from it.
ALTER TABLE inbound_event ADD COLUMN lead_at INTEGER;
-- The lead revision a step's Idempotency-Key names (`…:rev-2`): a step that goes again with new content for certain
-- gets a new key, so a CRM that stored an answer for the old body does not refuse the new one; a step whose
-- earlier attempt may have reached the CRM keeps its key, so a repeat can never create a second record.
ALTER TABLE delivery ADD COLUMN key_revision INTEGER NOT NULL DEFAULT 1;
