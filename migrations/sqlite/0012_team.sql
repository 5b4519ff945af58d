-- PostgreSQL: 0008_team.
-- Team mode: several `leadline serve` processes on one database make one decision per target and one per duty.
--
-- `target_control` is a target's state that must be one for the team: its circuit breaker (opened once for the
-- team, probed by one process), its hold ("send nothing before": a Retry-After, a refused credential), and its
-- shared request budget (`pace_next_us`: the next free request slot, in microseconds, for targets with a rate).
-- Pauses stay in `target_pause`.
CREATE TABLE target_control (
    target             TEXT   PRIMARY KEY,
    breaker_state      TEXT   NOT NULL DEFAULT 'closed',
    breaker_opened_at  INTEGER,
    breaker_changed_at INTEGER NOT NULL DEFAULT 0,
    hold_until         INTEGER,
    hold_credential    TEXT,
    pace_next_us       INTEGER
);

-- `lease` names which process does a duty that must be done once for the team (the monitor's judgements and
-- announcements, replays, reconciliation and polling): the owner renews it; when it stops renewing (a crash),
-- another process takes the duty once `until_at` has passed.
CREATE TABLE lease (
    role     TEXT   PRIMARY KEY,
    owner    TEXT   NOT NULL,
    until_at INTEGER NOT NULL
);
