-- SQLite: 0009_poll.
-- Poll mode: sources whose leads Leadline asks for instead of waiting for webhooks (a laptop has no public address).

-- Where each polled list stands, per source and lead form ('' for a generic source's one list). `since` is the
-- committed watermark (Unix ms): for a Meta form the newest creation time among the leads stored from it, for a
-- generic list the start of the last complete pass. A pass that reads several pages keeps its place in `pass_*`
-- after each page's leads are committed, so a restart goes on from the next page instead of starting over;
-- `since` moves only when a pass is complete, so no page is ever skipped whatever order the source lists in.
CREATE TABLE poll_cursor (
    source        TEXT   NOT NULL,
    form          TEXT   NOT NULL,
    since         BIGINT NOT NULL,
    pass_since    BIGINT,            -- the watermark the pass under way lists from
    pass_after    TEXT,              -- its next page: Graph's `after` cursor, or a generic list's next URL
    pass_newest   BIGINT,            -- the newest creation time it has stored so far
    last_poll_at  BIGINT,
    last_found    BIGINT NOT NULL DEFAULT 0,   -- leads new to Leadline in the last poll
    last_error    TEXT,
    failing_since BIGINT,            -- the first failed poll since the last good one
    next_poll_at  BIGINT,
    PRIMARY KEY (source, form)
);

-- Polled leads say so.
ALTER TABLE inbound_event DROP CONSTRAINT inbound_event_via_check;
ALTER TABLE inbound_event ADD CONSTRAINT inbound_event_via_check CHECK (via IN ('webhook', 'reconciliation', 'poll'));
