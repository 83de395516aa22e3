/**
 * The SQLite schema, as the list of migrations that build it. Migrations are versioned by
 * `PRAGMA user_version`: each entry runs once, in order, inside a transaction (database.ts), so a
 * crash mid-migration leaves the previous version intact.
 */

/**
 * The trigger that writes an event's webhook deliveries in the transaction that appends it
 * (migration 9, and again in 10, which rebuilds the table it is on): storage/webhooks.ts's
 * sees(), in SQL.
 */
const EVENTS_DELIVERED = `CREATE TRIGGER events_delivered AFTER INSERT ON events BEGIN
    INSERT INTO webhook_deliveries (webhook_id, event_id, due_at)
      SELECT w.id, NEW.id, 0 FROM webhooks w
       WHERE w.status = 'enabled' AND instr(' ' || w.types || ' ', ' ' || NEW.type || ' ') > 0
         AND (NEW.account IS NULL OR w.orders = 'all' OR w.account = NEW.account);
  END;`;

/**
 * Each migration's index + 1 is the schema version it produces. Append only; never edit a shipped
 * one (the one exception, a security fix, is decision 0017).
 */
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
  // 5: accounts and scopes of keys. Every key belongs to an account (orders belong to accounts)
  // and has scopes. A key made before keeps working as it did: an account of its own, named after
  // its id, and the pet scopes, all that a key could do then; never an order scope. (As first
  // shipped, this gave every scope: changed since, the one migration edited after shipping, see
  // docs/decisions/0020-migrated-keys-get-pet-scopes-only.md.) The table is rebuilt (SQLite
  // cannot add NOT NULL or a foreign key to a column), keeping each row's rowid, which orders keys
  // made in the same millisecond.
  `
  CREATE TABLE accounts (
    id         TEXT    PRIMARY KEY CHECK (id GLOB 'acct_*'),
    created_at INTEGER NOT NULL
  ) STRICT;
  INSERT INTO accounts (id, created_at) SELECT 'acct_' || substr(id, 5), created_at FROM api_keys;

  CREATE TABLE api_keys_v5 (
    id          TEXT    PRIMARY KEY,
    key_hash    TEXT    NOT NULL UNIQUE,
    account     TEXT    NOT NULL REFERENCES accounts (id),
    scopes      TEXT    NOT NULL CHECK (scopes <> ''),  -- space-separated, in the order of the scopes table
    label       TEXT    NOT NULL DEFAULT '',
    plan        TEXT    NOT NULL CHECK (plan IN ('free', 'pro', 'business', 'enterprise')),
    per_minute  INTEGER CHECK (per_minute IS NULL OR per_minute >= 1),
    per_day     INTEGER CHECK (per_day IS NULL OR per_day >= 1),
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER,
    revoked_at  INTEGER,
    CHECK ((plan = 'enterprise') = (per_minute IS NOT NULL AND per_day IS NOT NULL))
  ) STRICT;
  INSERT INTO api_keys_v5 (rowid, id, key_hash, account, scopes, label, plan, per_minute, per_day, created_at, expires_at, revoked_at)
    SELECT rowid, id, key_hash, 'acct_' || substr(id, 5), 'pets:read pets:write',
           label, plan, per_minute, per_day, created_at, expires_at, revoked_at
      FROM api_keys;
  DROP TABLE api_keys;
  ALTER TABLE api_keys_v5 RENAME TO api_keys;
  CREATE INDEX api_keys_account ON api_keys (account);
  `,
  // 6: orders, the pets' counts by status, and placeOrder's Idempotency-Key records.
  // - At most one open (placed or approved) order per pet: the unique index says so, whatever the
  //   code does. Orders outlive their pet: pet_id is not a foreign key.
  // - pet_counts holds how many pets have each status, kept by triggers in the transaction of
  //   every change, so that the inventory costs one read however many pets there are.
  // - The same Idempotency-Key on createPet and on placeOrder names two requests: placeOrder's
  //   records have a table of their own, and idempotency_keys stays as the previous version
  //   wrote it, so that the previous version still runs on this file if it has to be restarted.
  `
  CREATE TABLE orders (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    pet_id     INTEGER NOT NULL CHECK (pet_id >= 1),
    account    TEXT    NOT NULL REFERENCES accounts (id),
    status     TEXT    NOT NULL CHECK (status IN ('placed', 'approved', 'completed', 'cancelled')),
    placed_at  INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    version    INTEGER NOT NULL DEFAULT 1 CHECK (version >= 1)
  ) STRICT;
  CREATE UNIQUE INDEX orders_open_pet ON orders (pet_id) WHERE status IN ('placed', 'approved');
  -- Keyset pagination: an account's orders, with or without a status, and every order by status.
  CREATE INDEX orders_account_id ON orders (account, id);
  CREATE INDEX orders_account_status_id ON orders (account, status, id);
  CREATE INDEX orders_status_id ON orders (status, id);

  CREATE TABLE pet_counts (
    status TEXT    PRIMARY KEY CHECK (status IN ('available', 'pending', 'sold')),
    pets   INTEGER NOT NULL CHECK (pets >= 0)
  ) STRICT, WITHOUT ROWID;
  INSERT INTO pet_counts (status, pets)
    SELECT status, (SELECT count(*) FROM pets WHERE pets.status = statuses.status)
      FROM (SELECT 'available' AS status UNION ALL SELECT 'pending' UNION ALL SELECT 'sold') AS statuses;
  CREATE TRIGGER pets_counted_on_insert AFTER INSERT ON pets BEGIN
    UPDATE pet_counts SET pets = pets + 1 WHERE status = NEW.status;
  END;
  CREATE TRIGGER pets_counted_on_delete AFTER DELETE ON pets BEGIN
    UPDATE pet_counts SET pets = pets - 1 WHERE status = OLD.status;
  END;
  CREATE TRIGGER pets_counted_on_status AFTER UPDATE OF status ON pets WHEN OLD.status <> NEW.status BEGIN
    UPDATE pet_counts SET pets = pets - 1 WHERE status = OLD.status;
    UPDATE pet_counts SET pets = pets + 1 WHERE status = NEW.status;
  END;

  CREATE TABLE order_idempotency_keys (
    id               INTEGER PRIMARY KEY,
    api_key_id       TEXT    NOT NULL,
    idempotency_key  TEXT    NOT NULL CHECK (length(idempotency_key) BETWEEN 1 AND 255),
    fingerprint      TEXT    NOT NULL,
    response_status  INTEGER NOT NULL,
    response_headers TEXT    NOT NULL,
    response_body    TEXT    NOT NULL,
    created_at       INTEGER NOT NULL,
    UNIQUE (api_key_id, idempotency_key)
  ) STRICT;
  CREATE INDEX order_idempotency_keys_created_at ON order_idempotency_keys (created_at);
  `,
  // 7: holds that expire. A placed order holds its pet until expires_at (ms since the epoch),
  // null in every other status. An order placed before has no hold time of its own: it gets the
  // migration's time plus 48 h (ORDER_HOLD_SECONDS's default; docs/upgrading.md says so), so
  // that an upgrade frees no animal at once. The sweep finds due orders by this partial index.
  `
  ALTER TABLE orders ADD COLUMN expires_at INTEGER;
  UPDATE orders SET expires_at = CAST(unixepoch('subsec') * 1000 AS INTEGER) + 172800000 WHERE status = 'placed';
  CREATE INDEX orders_placed_expires_at ON orders (expires_at) WHERE status = 'placed';
  `,
  // 8: the event log (storage/events.ts). It starts empty: nothing is backfilled. `account` is
  // the order's account of an order event (who may read it), null for a pet event; `data` the
  // pet or the order after the change. AUTOINCREMENT: an id is never handed out again, even once
  // retention deleted every event; event_log keeps the highest id it deleted (for 410).
  `
  CREATE TABLE events (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    type          TEXT    NOT NULL CHECK (type IN ('pet.created', 'pet.updated', 'pet.deleted', 'order.placed', 'order.approved', 'order.completed', 'order.cancelled')),
    occurred_at   INTEGER NOT NULL,
    actor_account TEXT,
    actor_key_id  TEXT,
    account       TEXT,
    data          TEXT    NOT NULL
  ) STRICT;
  CREATE TABLE event_log (
    one             INTEGER PRIMARY KEY CHECK (one = 1),
    deleted_through INTEGER NOT NULL CHECK (deleted_through >= 0)
  ) STRICT;
  INSERT INTO event_log (one, deleted_through) VALUES (1, 0);
  `,
  // 9: webhooks (storage/webhooks.ts). `types` is the webhook's event types, space-separated in
  // the order given; `failing_since` the time of its first failed attempt after its last success.
  // A delivery is one row per webhook and event, written by the trigger on events in the very
  // transaction that appends the event, so that an event is never committed without its
  // deliveries; a new one is due at once (due_at 0). `holder` and `lease_until` are the claim of
  // the delivery worker that attempts it (docs/decisions/0027). The attempts log keeps the newest
  // 100 per webhook (trimmed as each is added). createWebhook's Idempotency-Key records have a
  // table of their own, like placeOrder's.
  `
  CREATE TABLE webhooks (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    account       TEXT    NOT NULL REFERENCES accounts (id),
    url           TEXT    NOT NULL,
    types         TEXT    NOT NULL,
    orders        TEXT    NOT NULL CHECK (orders IN ('own', 'all')),
    status        TEXT    NOT NULL CHECK (status IN ('enabled', 'disabled')),
    secret        TEXT    NOT NULL,
    created_at    INTEGER NOT NULL,
    failing_since INTEGER
  ) STRICT;
  CREATE INDEX webhooks_account_id ON webhooks (account, id);

  CREATE TABLE webhook_deliveries (
    webhook_id  INTEGER NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    event_id    INTEGER NOT NULL REFERENCES events (id) ON DELETE CASCADE,
    attempt     INTEGER NOT NULL DEFAULT 1 CHECK (attempt >= 1),
    due_at      INTEGER NOT NULL,
    holder      TEXT,
    lease_until INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (webhook_id, event_id)
  ) STRICT, WITHOUT ROWID;
  CREATE INDEX webhook_deliveries_due_at ON webhook_deliveries (due_at);
  CREATE INDEX webhook_deliveries_event_id ON webhook_deliveries (event_id);

  CREATE TABLE webhook_attempts (
    id           INTEGER PRIMARY KEY,
    webhook_id   INTEGER NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    event_id     INTEGER NOT NULL,
    attempt      INTEGER NOT NULL,
    attempted_at INTEGER NOT NULL,
    status       INTEGER,
    error        TEXT,
    duration_ms  INTEGER NOT NULL
  ) STRICT;
  CREATE INDEX webhook_attempts_webhook_id ON webhook_attempts (webhook_id, id);

  CREATE TABLE webhook_idempotency_keys (
    id               INTEGER PRIMARY KEY,
    api_key_id       TEXT    NOT NULL,
    idempotency_key  TEXT    NOT NULL CHECK (length(idempotency_key) BETWEEN 1 AND 255),
    fingerprint      TEXT    NOT NULL,
    response_status  INTEGER NOT NULL,
    response_headers TEXT    NOT NULL,
    response_body    TEXT    NOT NULL,
    created_at       INTEGER NOT NULL,
    UNIQUE (api_key_id, idempotency_key)
  ) STRICT;
  CREATE INDEX webhook_idempotency_keys_created_at ON webhook_idempotency_keys (created_at);

  -- storage/webhooks.ts's sees(), in SQL: the type listed; a pet event (no account), or an order
  -- event of the webhook's account, or any with orders 'all'. With no webhook this is one probe of
  -- an empty table per event.
  ${EVENTS_DELIVERED}
  `,
  // 10: the event log again, rebuilt for what each event costs a write (docs/decisions/0028-sqlite-event-ids-given-by-the-appender.md):
  // - no AUTOINCREMENT: it read and rewrote the table's row in sqlite_sequence on every insert,
  //   and a group's commit wrote that page to the WAL as well. event-log.ts gives the ids itself,
  //   one above both the highest id left and event_log.deleted_through (the highest retention
  //   deleted), so that an id is still never handed out again; a log emptied by retention keeps
  //   its sequence in deleted_through, which this sets from sqlite_sequence for such a log.
  // - the type checked by comparisons: a CHECK with IN and a list of three values or more builds
  //   a temporary table of the list each time the statement runs (1.6 us an insert, against
  //   0.07 for the same rule written with OR), the same rule.
  // Dropping the old table deletes its rows first, and with them (ON DELETE CASCADE) their
  // waiting deliveries: those are kept aside and put back. The trigger goes with its table and is
  // made again, unchanged.
  `
  CREATE TABLE events_rebuilt (
    id            INTEGER PRIMARY KEY,
    type          TEXT    NOT NULL CHECK (type = 'pet.created' OR type = 'pet.updated' OR type = 'pet.deleted' OR type = 'order.placed'
                                          OR type = 'order.approved' OR type = 'order.completed' OR type = 'order.cancelled'),
    occurred_at   INTEGER NOT NULL,
    actor_account TEXT,
    actor_key_id  TEXT,
    account       TEXT,
    data          TEXT    NOT NULL
  ) STRICT;
  INSERT INTO events_rebuilt (id, type, occurred_at, actor_account, actor_key_id, account, data)
    SELECT id, type, occurred_at, actor_account, actor_key_id, account, data FROM events ORDER BY id;
  UPDATE event_log SET deleted_through = max(deleted_through, coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0))
   WHERE NOT EXISTS (SELECT 1 FROM events);

  CREATE TABLE webhook_deliveries_kept AS SELECT * FROM webhook_deliveries;
  DROP TABLE events;
  ALTER TABLE events_rebuilt RENAME TO events;
  INSERT INTO webhook_deliveries SELECT * FROM webhook_deliveries_kept;
  DROP TABLE webhook_deliveries_kept;

  ${EVENTS_DELIVERED}
  `,
];
