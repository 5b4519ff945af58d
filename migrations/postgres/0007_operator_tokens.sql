-- SQLite: 0011_operator_tokens.
-- People, not one shared token: besides the browser token (`default`, made by the server itself), operators get
-- tokens of their own (`leadline token create NAME`), each acting under its name in every audit. A revoked token
-- keeps its row (who had access, until when) and stops working at once.
ALTER TABLE api_token ADD COLUMN revoked_at BIGINT;
CREATE INDEX api_token_by_hash ON api_token (token_sha256);
