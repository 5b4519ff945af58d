-- SQLite: 0010_alert_channels.
-- Alert channels beyond the desktop (Slack, e-mail, webhooks: monitor.channels): each channel announces an alert
-- on its own, so the announcement state is kept per (alert, channel). `alert.notified_at`/`digest_pending` stay
-- the desktop's.
-- state: due (to be sent on its own now), digest (waits for this channel's digest), quiet_hours (waits for this
-- channel's quiet hours to end), sent. A send that fails leaves the state as it was and records the failure;
-- a later pass retries it. lease_until: a pass is sending it (another process on the same database leaves it).
CREATE TABLE alert_channel (
    alert_id        BIGINT NOT NULL REFERENCES alert (id),
    channel         TEXT   NOT NULL,
    state           TEXT   NOT NULL CHECK (state IN ('due', 'digest', 'quiet_hours', 'sent')),
    notified_at     BIGINT,
    notifications   BIGINT NOT NULL DEFAULT 0,
    failures        BIGINT NOT NULL DEFAULT 0,
    last_error      TEXT,
    last_attempt_at BIGINT,
    lease_until     BIGINT,
    PRIMARY KEY (alert_id, channel)
);
CREATE INDEX alert_channel_waiting ON alert_channel (channel) WHERE state <> 'sent';
