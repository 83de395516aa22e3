/**
 * The SQLite schema, as the list of migrations that build it. Migrations are versioned by
 * `PRAGMA user_version`: each entry runs once, in order, inside a transaction (database.ts), so a
 * crash mid-migration leaves the previous version intact.
 */

/** Each migration's index + 1 is the schema version it produces. Append only; never edit. */
export const MIGRATIONS: readonly string[] = [
  // 1: pets and API keys.
  `
  CREATE TABLE pets (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    name        TEXT    NOT NULL,
    category_id INTEGER NOT NULL CHECK (category_id >= 1),
    status      TEXT    NOT NULL CHECK (status IN ('available', 'pending', 'sold'))
  ) STRICT;
  -- Keyset pagination of a status-filtered list walks this index in id order.
  CREATE INDEX pets_status_id ON pets (status, id);

  CREATE TABLE api_keys (
    id          TEXT    PRIMARY KEY,
    key_hash    TEXT    NOT NULL UNIQUE,
    label       TEXT    NOT NULL DEFAULT '',
    plan        TEXT    NOT NULL CHECK (plan IN ('free', 'pro', 'business', 'enterprise')),
    per_minute  INTEGER CHECK (per_minute IS NULL OR per_minute >= 1),
    per_day     INTEGER CHECK (per_day IS NULL OR per_day >= 1),
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER,
    revoked_at  INTEGER,
    -- Only enterprise keys carry their own numbers; the other plans use the published ones.
    CHECK ((plan = 'enterprise') = (per_minute IS NOT NULL AND per_day IS NOT NULL))
  ) STRICT;
  `,
  // 2: rate-limiter state, so that a restart never hands out a fresh daily quota or ends a ban.
  `
  CREATE TABLE rate_limit_callers (
    caller            TEXT    PRIMARY KEY,  -- opaque: 'key:<key id>' or 'ip:<address>'
    per_minute        INTEGER NOT NULL CHECK (per_minute >= 1),  -- limits of the last request
    per_day           INTEGER NOT NULL CHECK (per_day >= 1),
    minute_tokens     REAL    NOT NULL CHECK (minute_tokens >= 0),
    day_tokens        REAL    NOT NULL CHECK (day_tokens >= 0),
    updated_at        INTEGER NOT NULL,  -- ms since the epoch at which the tokens were counted
    banned_until      INTEGER NOT NULL DEFAULT 0,  -- ms; end of the last ban, 0 if never banned
    ban_count         INTEGER NOT NULL DEFAULT 0 CHECK (ban_count >= 0),
    recent_rejections TEXT    NOT NULL DEFAULT '[]'  -- JSON array of ms: 429s of the last 60 s
  ) STRICT, WITHOUT ROWID;
  `,
  // 3: Idempotency-Key records of POST /v1/pets, written in the same transaction as the pet.
  `
  CREATE TABLE idempotency_keys (
    id               INTEGER PRIMARY KEY,
    api_key_id       TEXT    NOT NULL,  -- keys are scoped by the API key that sent them
    idempotency_key  TEXT    NOT NULL CHECK (length(idempotency_key) BETWEEN 1 AND 255),
    fingerprint      TEXT    NOT NULL,  -- SHA-256 of the canonical request body
    response_status  INTEGER NOT NULL,
    response_headers TEXT    NOT NULL,  -- JSON object of the headers to replay (Location)
    response_body    TEXT    NOT NULL,  -- the exact body that was sent
    created_at       INTEGER NOT NULL,  -- ms since the epoch; the record expires 24 h later
    UNIQUE (api_key_id, idempotency_key)
  ) STRICT;
  -- The background purge deletes the oldest records first, in small chunks.
  CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);
  `,
  // 4: a version per pet (contract 1.1), bumped by the statement that changes the pet; the ETag
  // is made of the id and the version. A creation remembered before this migration replays with
  // the ETag its pet had then (version 1), in the format of src/api/pet-json.ts (petETag).
  `
  ALTER TABLE pets ADD COLUMN version INTEGER NOT NULL DEFAULT 1 CHECK (version >= 1);
  UPDATE idempotency_keys
  SET response_headers = json_set(response_headers, '$.ETag', '"' || json_extract(response_body, '$.id') || '.1"')
  WHERE response_status = 201;
  `,
];
