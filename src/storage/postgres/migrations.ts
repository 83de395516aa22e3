/**
 * The PostgreSQL schema, as versioned SQL: entry n produces version n + 1 (table
 * `schema_migrations`). Append only; never edit an entry that has shipped (the one exception, a
 * security fix, is decision 0017).
 *
 * Times are milliseconds since the epoch (bigint), as in the SQLite engine, so both engines
 * take the service's injected clock and tests can move it.
 */
export const MIGRATIONS: readonly string[] = [
  // 1: pets, API keys, idempotency records and the shared rate limiter.
  `
  CREATE TABLE pets (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name        text   NOT NULL,
    category_id bigint NOT NULL CHECK (category_id >= 1),
    status      text   NOT NULL CHECK (status IN ('available', 'pending', 'sold')),
    -- 1 when created; every change adds 1 in the statement that makes it (the ETag).
    version     integer NOT NULL DEFAULT 1 CHECK (version >= 1)
  );
  -- Keyset pagination of a status-filtered list walks this index in id order.
  CREATE INDEX pets_status_id ON pets (status, id);

  CREATE TABLE api_keys (
    id          text    PRIMARY KEY,
    key_hash    text    NOT NULL UNIQUE,
    label       text    NOT NULL DEFAULT '',
    plan        text    NOT NULL CHECK (plan IN ('free', 'pro', 'business', 'enterprise')),
    per_minute  bigint  CHECK (per_minute IS NULL OR per_minute >= 1),
    per_day     bigint  CHECK (per_day IS NULL OR per_day >= 1),
    created_at  bigint  NOT NULL,
    expires_at  bigint,
    revoked_at  bigint,
    -- Keys made in the same millisecond are listed in the order they were made.
    seq         bigint  GENERATED ALWAYS AS IDENTITY,
    CHECK ((plan = 'enterprise') = (per_minute IS NOT NULL AND per_day IS NOT NULL))
  );

  CREATE TABLE idempotency_keys (
    api_key_id       text    NOT NULL,
    idempotency_key  text    NOT NULL CHECK (length(idempotency_key) BETWEEN 1 AND 255),
    fingerprint      text    NOT NULL,
    response_status  integer NOT NULL,
    response_headers text    NOT NULL,
    response_body    text    NOT NULL,
    created_at       bigint  NOT NULL,
    PRIMARY KEY (api_key_id, idempotency_key)
  );
  CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);

  -- One row per caller ('key:<id>' or 'ip:<address>'). Buckets are counted in token-milliseconds
  -- (a bucket of window W ms holds tokens * W units and gains its capacity per ms), the integer
  -- arithmetic of src/limits/limiter.ts, so both engines give the same headers.
  CREATE TABLE rate_limit_callers (
    caller            text     PRIMARY KEY,
    per_minute        bigint   NOT NULL CHECK (per_minute >= 1),
    per_day           bigint   NOT NULL CHECK (per_day >= 1),
    minute_units      bigint   NOT NULL CHECK (minute_units >= 0),
    day_units         bigint   NOT NULL CHECK (day_units >= 0),
    updated_at        bigint   NOT NULL,
    banned_until      bigint   NOT NULL DEFAULT 0,
    ban_count         integer  NOT NULL DEFAULT 0 CHECK (ban_count >= 0),
    recent_rejections bigint[] NOT NULL DEFAULT '{}'  -- the last RATE_LIMIT_BAN_THRESHOLD 429 times
  );
  CREATE INDEX rate_limit_callers_updated_at ON rate_limit_callers (updated_at);

  -- Writes back a caller's row that take_tokens locked and changed.
  CREATE FUNCTION store_caller(r rate_limit_callers) RETURNS void LANGUAGE sql AS $fn$
    UPDATE rate_limit_callers
       SET (per_minute, per_day, minute_units, day_units, updated_at, banned_until, ban_count, recent_rejections)
         = (r.per_minute, r.per_day, r.minute_units, r.day_units, r.updated_at, r.banned_until, r.ban_count, r.recent_rejections)
     WHERE caller = r.caller;
  $fn$;

  -- Takes one token for each entry of a batch (the requests of one event-loop turn of one
  -- instance), in the batch's order per caller, and returns each entry's state after it. Each
  -- caller's row is locked for the rest of the transaction, so concurrent batches of every
  -- instance take tokens one after the other; rows are locked in caller order, so two batches
  -- never wait for each other in a cycle. Mirrors take() in src/limits/limiter.ts.
  CREATE FUNCTION take_tokens(
    p_callers text[], p_per_minute bigint[], p_per_day bigint[],
    p_now bigint, p_ban_threshold integer, p_ban_ms bigint
  ) RETURNS TABLE (ord integer, minute_units bigint, day_units bigint, updated_at bigint, code text, retry_after integer)
  LANGUAGE plpgsql AS $fn$
  DECLARE
    minute_ms constant bigint := 60000;
    day_ms    constant bigint := 86400000;
    e record;
    r rate_limit_callers%ROWTYPE;
    current_caller text := NULL;
    elapsed bigint;
    wait_ms double precision;
    n integer;
  BEGIN
    FOR e IN
      SELECT i, p_callers[i] AS caller, p_per_minute[i] AS pm, p_per_day[i] AS pd
        FROM generate_subscripts(p_callers, 1) AS i
       ORDER BY p_callers[i], i
    LOOP
      IF current_caller IS DISTINCT FROM e.caller THEN
        IF current_caller IS NOT NULL THEN PERFORM store_caller(r); END IF;
        current_caller := e.caller;
        LOOP
          SELECT * INTO r FROM rate_limit_callers WHERE caller = e.caller FOR UPDATE;
          EXIT WHEN FOUND;
          -- A new caller starts with full buckets. Another instance may insert it first, or
          -- the idle purge delete it in between: then look again.
          INSERT INTO rate_limit_callers (caller, per_minute, per_day, minute_units, day_units, updated_at)
          VALUES (e.caller, e.pm, e.pd, e.pm * minute_ms, e.pd * day_ms, p_now)
          ON CONFLICT (caller) DO NOTHING;
        END LOOP;
      END IF;

      -- Refill to now under this request's limits (clamped to a lowered capacity).
      elapsed := p_now - r.updated_at;
      IF elapsed > 0 THEN
        r.minute_units := CASE WHEN elapsed >= minute_ms THEN e.pm * minute_ms ELSE least(e.pm * minute_ms, r.minute_units + elapsed * e.pm) END;
        r.day_units := CASE WHEN elapsed >= day_ms THEN e.pd * day_ms ELSE least(e.pd * day_ms, r.day_units + elapsed * e.pd) END;
        r.updated_at := p_now;
      ELSE
        r.minute_units := least(r.minute_units, e.pm * minute_ms);
        r.day_units := least(r.day_units, e.pd * day_ms);
      END IF;
      r.per_minute := e.pm;
      r.per_day := e.pd;

      ord := e.i;
      IF p_now < r.banned_until THEN
        code := 'temporarily_banned';
        retry_after := greatest(1, ceil((r.banned_until - p_now) / 1000.0))::integer;
      ELSIF r.minute_units < minute_ms OR r.day_units < day_ms THEN
        r.recent_rejections := r.recent_rejections || p_now;
        n := cardinality(r.recent_rejections);
        IF n > p_ban_threshold THEN
          r.recent_rejections := r.recent_rejections[n - p_ban_threshold + 1 : n];
          n := p_ban_threshold;
        END IF;
        IF n = p_ban_threshold AND p_now - r.recent_rejections[1] < minute_ms THEN
          IF p_now >= r.banned_until + day_ms THEN r.ban_count := 0; END IF;
          r.banned_until := p_now + least(p_ban_ms * power(2::numeric, least(r.ban_count, 32)), day_ms)::bigint;
          r.ban_count := r.ban_count + 1;
          r.recent_rejections := '{}';
          code := 'temporarily_banned';
          retry_after := greatest(1, ceil((r.banned_until - p_now) / 1000.0))::integer;
        ELSE
          wait_ms := greatest(
            CASE WHEN r.minute_units >= minute_ms THEN 0 ELSE (minute_ms - r.minute_units)::double precision / e.pm END,
            CASE WHEN r.day_units >= day_ms THEN 0 ELSE (day_ms - r.day_units)::double precision / e.pd END);
          code := 'rate_limited';
          retry_after := greatest(1, ceil((r.updated_at + wait_ms - p_now) / 1000.0))::integer;
        END IF;
      ELSE
        r.minute_units := r.minute_units - minute_ms;
        r.day_units := r.day_units - day_ms;
        code := NULL;
        retry_after := 0;
      END IF;
      minute_units := r.minute_units;
      day_units := r.day_units;
      updated_at := r.updated_at;
      RETURN NEXT;
    END LOOP;
    IF current_caller IS NOT NULL THEN PERFORM store_caller(r); END IF;
  END;
  $fn$;
  `,
  // 2: the addresses the limiter tracks are bounded, as the SQLite engine bounds them in memory:
  // each forged or fresh address used to add a row, with no cap. A count kept by triggers, and
  // take_tokens with the cap (a new function beside the old one, so that instances still running
  // the previous version keep working while instances are rolled).
  `
  CREATE TABLE rate_limit_address_count (
    only_row  boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    addresses bigint  NOT NULL CHECK (addresses >= 0)
  );
  INSERT INTO rate_limit_address_count (addresses) SELECT count(*) FROM rate_limit_callers WHERE caller LIKE 'ip:%';

  CREATE FUNCTION count_addresses() RETURNS trigger LANGUAGE plpgsql AS $fn$
  BEGIN
    UPDATE rate_limit_address_count SET addresses = addresses + CASE WHEN TG_OP = 'INSERT' THEN 1 ELSE -1 END;
    RETURN NULL;
  END;
  $fn$;
  CREATE TRIGGER rate_limit_address_added AFTER INSERT ON rate_limit_callers
    FOR EACH ROW WHEN (NEW.caller LIKE 'ip:%') EXECUTE FUNCTION count_addresses();
  CREATE TRIGGER rate_limit_address_removed AFTER DELETE ON rate_limit_callers
    FOR EACH ROW WHEN (OLD.caller LIKE 'ip:%') EXECUTE FUNCTION count_addresses();

  -- Room for one more address: true at once under the cap; at the cap, the least recently seen
  -- of the 32 oldest addresses that is neither banned nor being refused (a bucket under one token)
  -- is forgotten, as src/limits/limiter.ts does in memory; false when all 32 are protected. The
  -- caller holds the count's lock.
  CREATE FUNCTION make_room_for_address(p_now bigint, p_max bigint) RETURNS boolean LANGUAGE plpgsql AS $fn$
  DECLARE
    held bigint;
    victim text;
  BEGIN
    SELECT addresses INTO held FROM rate_limit_address_count FOR UPDATE;
    IF held < p_max THEN RETURN true; END IF;
    SELECT caller INTO victim FROM rate_limit_callers
     WHERE caller IN (SELECT caller FROM rate_limit_callers WHERE caller LIKE 'ip:%' ORDER BY updated_at LIMIT 32)
       AND p_now >= banned_until
       AND least(per_minute * 60000, minute_units + greatest(0, p_now - updated_at) * per_minute) >= 60000
       AND least(per_day * 86400000, day_units + greatest(0, p_now - updated_at) * per_day) >= 86400000
     ORDER BY updated_at
     LIMIT 1
     FOR UPDATE SKIP LOCKED;
    IF victim IS NULL THEN RETURN false; END IF;
    DELETE FROM rate_limit_callers WHERE caller = victim;
    RETURN true;
  END;
  $fn$;

  CREATE FUNCTION take_tokens(
    p_callers text[], p_per_minute bigint[], p_per_day bigint[],
    p_now bigint, p_ban_threshold integer, p_ban_ms bigint, p_max_addresses bigint
  ) RETURNS TABLE (ord integer, minute_units bigint, day_units bigint, updated_at bigint, code text, retry_after integer)
  LANGUAGE plpgsql AS $fn$
  DECLARE
    minute_ms constant bigint := 60000;
    day_ms    constant bigint := 86400000;
    e record;
    r rate_limit_callers%ROWTYPE;
    current_caller text := NULL;
    elapsed bigint;
    wait_ms double precision;
    n integer;
    untracked boolean := false;
  BEGIN
    -- A batch that brings a new address takes the count's lock before any caller's row, as the
    -- purge does, so that two batches never wait for each other in a cycle.
    IF EXISTS (SELECT 1 FROM unnest(p_callers) AS c(caller)
                WHERE c.caller LIKE 'ip:%' AND NOT EXISTS (SELECT 1 FROM rate_limit_callers WHERE caller = c.caller)) THEN
      PERFORM 1 FROM rate_limit_address_count FOR UPDATE;
    END IF;
    FOR e IN
      SELECT i, p_callers[i] AS caller, p_per_minute[i] AS pm, p_per_day[i] AS pd
        FROM generate_subscripts(p_callers, 1) AS i
       ORDER BY p_callers[i], i
    LOOP
      IF current_caller IS DISTINCT FROM e.caller THEN
        IF current_caller IS NOT NULL AND NOT untracked THEN PERFORM store_caller(r); END IF;
        current_caller := e.caller;
        untracked := false;
        LOOP
          SELECT * INTO r FROM rate_limit_callers WHERE caller = e.caller FOR UPDATE;
          EXIT WHEN FOUND;
          -- An address the limiter cannot track is refused, never let through unlimited.
          IF e.caller LIKE 'ip:%' AND NOT make_room_for_address(p_now, p_max_addresses) THEN
            untracked := true;
            EXIT;
          END IF;
          -- A new caller starts with full buckets. Another instance may insert it first, or
          -- the idle purge delete it in between: then look again.
          INSERT INTO rate_limit_callers (caller, per_minute, per_day, minute_units, day_units, updated_at)
          VALUES (e.caller, e.pm, e.pd, e.pm * minute_ms, e.pd * day_ms, p_now)
          ON CONFLICT (caller) DO NOTHING;
        END LOOP;
      END IF;

      IF untracked THEN
        ord := e.i;
        minute_units := 0;
        day_units := e.pd * day_ms;
        updated_at := p_now;
        code := 'rate_limited';
        retry_after := greatest(1, ceil(minute_ms::numeric / e.pm / 1000))::integer;
        RETURN NEXT;
        CONTINUE;
      END IF;

      -- Refill to now under this request's limits (clamped to a lowered capacity).
      elapsed := p_now - r.updated_at;
      IF elapsed > 0 THEN
        r.minute_units := CASE WHEN elapsed >= minute_ms THEN e.pm * minute_ms ELSE least(e.pm * minute_ms, r.minute_units + elapsed * e.pm) END;
        r.day_units := CASE WHEN elapsed >= day_ms THEN e.pd * day_ms ELSE least(e.pd * day_ms, r.day_units + elapsed * e.pd) END;
        r.updated_at := p_now;
      ELSE
        r.minute_units := least(r.minute_units, e.pm * minute_ms);
        r.day_units := least(r.day_units, e.pd * day_ms);
      END IF;
      r.per_minute := e.pm;
      r.per_day := e.pd;

      ord := e.i;
      IF p_now < r.banned_until THEN
        code := 'temporarily_banned';
        retry_after := greatest(1, ceil((r.banned_until - p_now) / 1000.0))::integer;
      ELSIF r.minute_units < minute_ms OR r.day_units < day_ms THEN
        r.recent_rejections := r.recent_rejections || p_now;
        n := cardinality(r.recent_rejections);
        IF n > p_ban_threshold THEN
          r.recent_rejections := r.recent_rejections[n - p_ban_threshold + 1 : n];
          n := p_ban_threshold;
        END IF;
        IF n = p_ban_threshold AND p_now - r.recent_rejections[1] < minute_ms THEN
          IF p_now >= r.banned_until + day_ms THEN r.ban_count := 0; END IF;
          r.banned_until := p_now + least(p_ban_ms * power(2::numeric, least(r.ban_count, 32)), day_ms)::bigint;
          r.ban_count := r.ban_count + 1;
          r.recent_rejections := '{}';
          code := 'temporarily_banned';
          retry_after := greatest(1, ceil((r.banned_until - p_now) / 1000.0))::integer;
        ELSE
          wait_ms := greatest(
            CASE WHEN r.minute_units >= minute_ms THEN 0 ELSE (minute_ms - r.minute_units)::double precision / e.pm END,
            CASE WHEN r.day_units >= day_ms THEN 0 ELSE (day_ms - r.day_units)::double precision / e.pd END);
          code := 'rate_limited';
          retry_after := greatest(1, ceil((r.updated_at + wait_ms - p_now) / 1000.0))::integer;
        END IF;
      ELSE
        r.minute_units := r.minute_units - minute_ms;
        r.day_units := r.day_units - day_ms;
        code := NULL;
        retry_after := 0;
      END IF;
      minute_units := r.minute_units;
      day_units := r.day_units;
      updated_at := r.updated_at;
      RETURN NEXT;
    END LOOP;
    IF current_caller IS NOT NULL AND NOT untracked THEN PERFORM store_caller(r); END IF;
  END;
  $fn$;
  `,
  // 3: accounts and scopes of keys. Every key belongs to an account (orders belong to accounts)
  // and has scopes. A key made before keeps working as it did: an account of its own, named after
  // its id, and the pet scopes, all that a key could do then; never an order scope. (As first
  // shipped, this gave every scope: changed since, the one migration edited after shipping, see
  // docs/decisions/0020-migrated-keys-get-pet-scopes-only.md.)
  `
  CREATE TABLE accounts (
    id         text   PRIMARY KEY CHECK (id LIKE 'acct\\_%'),
    created_at bigint NOT NULL
  );
  INSERT INTO accounts (id, created_at) SELECT 'acct_' || substr(id, 5), created_at FROM api_keys;
  ALTER TABLE api_keys
    ADD COLUMN account text REFERENCES accounts (id),
    ADD COLUMN scopes text NOT NULL DEFAULT 'pets:read pets:write' CHECK (scopes <> '');
  UPDATE api_keys SET account = 'acct_' || substr(id, 5);
  ALTER TABLE api_keys ALTER COLUMN account SET NOT NULL, ALTER COLUMN scopes DROP DEFAULT;
  CREATE INDEX api_keys_account ON api_keys (account);
  `,
  // 4: orders, the pets' counts by status, and Idempotency-Key records per operation.
  // - At most one open (placed or approved) order per pet: the unique index says so, on every
  //   instance. Orders outlive their pet: pet_id is not a foreign key.
  // - The inventory must cost the same however many pets there are, exactly, while many
  //   instances write: one row per status updated by every write would serialise them and could
  //   deadlock two batches that change statuses in opposite orders. So each statement that
  //   changes pets appends what it changed to pet_count_changes (no row is shared, no lock is
  //   taken), and the chores fold those rows into pet_counts every second; the inventory reads
  //   both in one snapshot.
  // - The same Idempotency-Key on createPet and on placeOrder names two requests: placeOrder's
  //   records have a table of their own, and idempotency_keys stays as it was, so that instances
  //   of the previous version, which write it, keep working while the others are rolled.
  `
  CREATE TABLE orders (
    id         bigint  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    pet_id     bigint  NOT NULL CHECK (pet_id >= 1),
    account    text    NOT NULL REFERENCES accounts (id),
    status     text    NOT NULL CHECK (status IN ('placed', 'approved', 'completed', 'cancelled')),
    placed_at  bigint  NOT NULL,
    updated_at bigint  NOT NULL,
    version    integer NOT NULL DEFAULT 1 CHECK (version >= 1)
  );
  CREATE UNIQUE INDEX orders_open_pet ON orders (pet_id) WHERE status IN ('placed', 'approved');
  CREATE INDEX orders_account_id ON orders (account, id);
  CREATE INDEX orders_account_status_id ON orders (account, status, id);
  CREATE INDEX orders_status_id ON orders (status, id);

  CREATE TABLE pet_counts (
    status text   PRIMARY KEY CHECK (status IN ('available', 'pending', 'sold')),
    pets   bigint NOT NULL
  );
  INSERT INTO pet_counts (status, pets)
    SELECT s.status, (SELECT count(*) FROM pets WHERE pets.status = s.status)
      FROM (VALUES ('available'), ('pending'), ('sold')) AS s(status);
  CREATE TABLE pet_count_changes (
    id     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    status text   NOT NULL,
    change bigint NOT NULL
  );
  CREATE FUNCTION count_inserted_pets() RETURNS trigger LANGUAGE plpgsql AS $fn$
  BEGIN
    INSERT INTO pet_count_changes (status, change) SELECT status, count(*) FROM inserted GROUP BY status;
    RETURN NULL;
  END;
  $fn$;
  CREATE FUNCTION count_deleted_pets() RETURNS trigger LANGUAGE plpgsql AS $fn$
  BEGIN
    INSERT INTO pet_count_changes (status, change) SELECT status, -count(*) FROM deleted GROUP BY status;
    RETURN NULL;
  END;
  $fn$;
  CREATE FUNCTION count_changed_pets() RETURNS trigger LANGUAGE plpgsql AS $fn$
  BEGIN
    INSERT INTO pet_count_changes (status, change)
      SELECT status, sum(change) FROM (
        SELECT o.status, -1 AS change FROM before o JOIN after n USING (id) WHERE o.status <> n.status
        UNION ALL
        SELECT n.status, 1 FROM before o JOIN after n USING (id) WHERE o.status <> n.status
      ) AS moves GROUP BY status;
    RETURN NULL;
  END;
  $fn$;
  CREATE TRIGGER pets_counted_on_insert AFTER INSERT ON pets REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION count_inserted_pets();
  CREATE TRIGGER pets_counted_on_delete AFTER DELETE ON pets REFERENCING OLD TABLE AS deleted
    FOR EACH STATEMENT EXECUTE FUNCTION count_deleted_pets();
  CREATE TRIGGER pets_counted_on_update AFTER UPDATE ON pets REFERENCING OLD TABLE AS before NEW TABLE AS after
    FOR EACH STATEMENT EXECUTE FUNCTION count_changed_pets();

  CREATE TABLE order_idempotency_keys (
    api_key_id       text    NOT NULL,
    idempotency_key  text    NOT NULL CHECK (length(idempotency_key) BETWEEN 1 AND 255),
    fingerprint      text    NOT NULL,
    response_status  integer NOT NULL,
    response_headers text    NOT NULL,
    response_body    text    NOT NULL,
    created_at       bigint  NOT NULL,
    PRIMARY KEY (api_key_id, idempotency_key)
  );
  CREATE INDEX order_idempotency_keys_created_at ON order_idempotency_keys (created_at);
  `,
  // 5: take_tokens with less work per call, same arguments and same answers. A batch is mostly
  // many takes of few callers (one key, many requests). Version 2 cost PostgreSQL 300 us of CPU
  // (user time, median of 5 runs) per call of 45 takes of one key; store_caller, a SQL function
  // parsed and planned again at every call, was 66 us of it. Here the row is written back by an
  // UPDATE of the function itself (its plan kept), the takes are grouped by caller, and a caller
  // whose takes share one limit, with no ban and a token in both buckets for each, is answered by
  // one query: 217 us per call measured the same way. Replaced in place, so that instances of the
  // previous version, while they are rolled, get the same decisions from it.
  `
  CREATE OR REPLACE FUNCTION take_tokens(
    p_callers text[], p_per_minute bigint[], p_per_day bigint[],
    p_now bigint, p_ban_threshold integer, p_ban_ms bigint, p_max_addresses bigint
  ) RETURNS TABLE (ord integer, minute_units bigint, day_units bigint, updated_at bigint, code text, retry_after integer)
  LANGUAGE plpgsql AS $fn$
  DECLARE
    minute_ms constant bigint := 60000;
    day_ms    constant bigint := 86400000;
    g record;
    r rate_limit_callers%ROWTYPE;
    untracked boolean;
    k integer;
    i integer;
    pm bigint;
    pd bigint;
    elapsed bigint;
    wait_ms double precision;
    n integer;
  BEGIN
    -- A batch that brings a new address takes the count's lock before any caller's row, as the
    -- purge does, so that two batches never wait for each other in a cycle.
    IF EXISTS (SELECT 1 FROM unnest(p_callers) AS c(caller)
                WHERE c.caller LIKE 'ip:%' AND NOT EXISTS (SELECT 1 FROM rate_limit_callers WHERE caller = c.caller)) THEN
      PERFORM 1 FROM rate_limit_address_count FOR UPDATE;
    END IF;
    -- Callers in order (rows are locked in that order), each with its takes in batch order.
    FOR g IN
      SELECT x.caller, array_agg(x.i ORDER BY x.i) AS ords, max(x.pm) = min(x.pm) AND max(x.pd) = min(x.pd) AS one_limit
        FROM (SELECT s.i, p_callers[s.i] AS caller, p_per_minute[s.i] AS pm, p_per_day[s.i] AS pd
                FROM generate_subscripts(p_callers, 1) AS s(i)) AS x
       GROUP BY x.caller
       ORDER BY x.caller
    LOOP
      untracked := false;
      LOOP
        SELECT * INTO r FROM rate_limit_callers WHERE caller = g.caller FOR UPDATE;
        EXIT WHEN FOUND;
        -- An address the limiter cannot track is refused, never let through unlimited.
        IF g.caller LIKE 'ip:%' AND NOT make_room_for_address(p_now, p_max_addresses) THEN
          untracked := true;
          EXIT;
        END IF;
        -- A new caller starts with full buckets, under the limits of its first take. Another
        -- instance may insert it first, or the idle purge delete it in between: then look again.
        INSERT INTO rate_limit_callers (caller, per_minute, per_day, minute_units, day_units, updated_at)
        VALUES (g.caller, p_per_minute[g.ords[1]], p_per_day[g.ords[1]], p_per_minute[g.ords[1]] * minute_ms, p_per_day[g.ords[1]] * day_ms, p_now)
        ON CONFLICT (caller) DO NOTHING;
      END LOOP;

      IF untracked THEN
        RETURN QUERY SELECT o, 0::bigint, p_per_day[o] * day_ms, p_now, 'rate_limited'::text, greatest(1, ceil(minute_ms::numeric / p_per_minute[o] / 1000))::integer
                       FROM unnest(g.ords) AS o;
        CONTINUE;
      END IF;

      k := cardinality(g.ords);
      FOREACH i IN ARRAY g.ords LOOP
        pm := p_per_minute[i];
        pd := p_per_day[i];
        -- Refill to now under this take's limits (clamped to a lowered capacity).
        elapsed := p_now - r.updated_at;
        IF elapsed > 0 THEN
          r.minute_units := CASE WHEN elapsed >= minute_ms THEN pm * minute_ms ELSE least(pm * minute_ms, r.minute_units + elapsed * pm) END;
          r.day_units := CASE WHEN elapsed >= day_ms THEN pd * day_ms ELSE least(pd * day_ms, r.day_units + elapsed * pd) END;
          r.updated_at := p_now;
        ELSE
          r.minute_units := least(r.minute_units, pm * minute_ms);
          r.day_units := least(r.day_units, pd * day_ms);
        END IF;
        r.per_minute := pm;
        r.per_day := pd;
        -- The caller's first take, under one limit for all, no ban, and a token in both buckets
        -- for each: all are allowed, and one query answers them. Every take of a batch has the
        -- same p_now, so the refill of the takes after the first would change nothing.
        IF i = g.ords[1] AND g.one_limit AND p_now >= r.banned_until AND r.minute_units >= k * minute_ms AND r.day_units >= k * day_ms THEN
          RETURN QUERY SELECT g.ords[j], r.minute_units - j * minute_ms, r.day_units - j * day_ms, r.updated_at, NULL::text, 0
                         FROM generate_subscripts(g.ords, 1) AS j;
          r.minute_units := r.minute_units - k * minute_ms;
          r.day_units := r.day_units - k * day_ms;
          EXIT;
        END IF;
        ord := i;
        IF p_now < r.banned_until THEN
          code := 'temporarily_banned';
          retry_after := greatest(1, ceil((r.banned_until - p_now) / 1000.0))::integer;
        ELSIF r.minute_units < minute_ms OR r.day_units < day_ms THEN
          r.recent_rejections := r.recent_rejections || p_now;
          n := cardinality(r.recent_rejections);
          IF n > p_ban_threshold THEN
            r.recent_rejections := r.recent_rejections[n - p_ban_threshold + 1 : n];
            n := p_ban_threshold;
          END IF;
          IF n = p_ban_threshold AND p_now - r.recent_rejections[1] < minute_ms THEN
            IF p_now >= r.banned_until + day_ms THEN r.ban_count := 0; END IF;
            r.banned_until := p_now + least(p_ban_ms * power(2::numeric, least(r.ban_count, 32)), day_ms)::bigint;
            r.ban_count := r.ban_count + 1;
            r.recent_rejections := '{}';
            code := 'temporarily_banned';
            retry_after := greatest(1, ceil((r.banned_until - p_now) / 1000.0))::integer;
          ELSE
            wait_ms := greatest(
              CASE WHEN r.minute_units >= minute_ms THEN 0 ELSE (minute_ms - r.minute_units)::double precision / pm END,
              CASE WHEN r.day_units >= day_ms THEN 0 ELSE (day_ms - r.day_units)::double precision / pd END);
            code := 'rate_limited';
            retry_after := greatest(1, ceil((r.updated_at + wait_ms - p_now) / 1000.0))::integer;
          END IF;
        ELSE
          r.minute_units := r.minute_units - minute_ms;
          r.day_units := r.day_units - day_ms;
          code := NULL;
          retry_after := 0;
        END IF;
        minute_units := r.minute_units;
        day_units := r.day_units;
        updated_at := r.updated_at;
        RETURN NEXT;
      END LOOP;

      UPDATE rate_limit_callers AS c
         SET (per_minute, per_day, minute_units, day_units, updated_at, banned_until, ban_count, recent_rejections)
           = (r.per_minute, r.per_day, r.minute_units, r.day_units, r.updated_at, r.banned_until, r.ban_count, r.recent_rejections)
       WHERE c.caller = r.caller;
    END LOOP;
  END;
  $fn$;
  `,
  // 6: holds that expire. A placed order holds its pet until expires_at (ms since the epoch);
  // the service sets it at placement and clears it at every step. An order placed before has no
  // hold time of its own: it gets the migration's time plus 48 h (ORDER_HOLD_SECONDS's default;
  // docs/upgrading.md says so), so that an upgrade frees no animal at once. The column's default
  // gives the same to an order that an instance of the previous version places while the
  // instances are rolled; such an instance's steps leave the column as it was, which the service
  // reads only while the order is placed. The sweep finds due orders by the partial index.
  `
  ALTER TABLE orders ADD COLUMN expires_at bigint
    DEFAULT (floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint + 172800000);
  UPDATE orders SET expires_at = NULL WHERE status <> 'placed';
  CREATE INDEX orders_placed_expires_at ON orders (expires_at) WHERE status = 'placed';
  `,
  // 7: the event log (storage/events.ts, event-log.ts). It starts empty: nothing is backfilled.
  // A write appends its events with a row key (`seq`) and no id; the sequencer gives each its
  // id, its position in the feed, from event_ids after the commit (event-log.ts says why).
  // `account` is the order's account of an order event (who may read it), null for a pet event;
  // `data` the pet or the order after the change; event_log keeps the highest id that retention
  // deleted (for 410).
  `
  CREATE TABLE events (
    seq           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id            bigint UNIQUE,
    type          text   NOT NULL CHECK (type IN ('pet.created', 'pet.updated', 'pet.deleted', 'order.placed', 'order.approved', 'order.completed', 'order.cancelled')),
    occurred_at   bigint NOT NULL,
    actor_account text,
    actor_key_id  text,
    account       text,
    data          text   NOT NULL
  );
  CREATE SEQUENCE event_ids;
  -- The events that wait for their id: usually none, read before every page of the feed.
  CREATE INDEX events_unsequenced ON events (seq) WHERE id IS NULL;
  CREATE TABLE event_log (
    one             integer PRIMARY KEY CHECK (one = 1),
    deleted_through bigint  NOT NULL CHECK (deleted_through >= 0)
  );
  INSERT INTO event_log (one, deleted_through) VALUES (1, 0);
  `,
  // 8: webhooks (storage/webhooks.ts), as on SQLite (its migration 9 says what each column is).
  // A delivery names its event by `seq`, the row key an event has from its insert (its id comes
  // later, from the sequencer); it is written by a statement trigger on events, in the very
  // transaction that appends them, so that no event commits without its deliveries, whichever
  // statement appended it. A claim takes deliveries with FOR UPDATE SKIP LOCKED and keeps them by
  // a lease (`holder`, `lease_until`) that another instance may take once it has ended
  // (docs/decisions/0027). The attempts log keeps the newest 100 per webhook.
  `
  CREATE TABLE webhooks (
    id            bigint  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account       text    NOT NULL REFERENCES accounts (id),
    url           text    NOT NULL,
    types         text[]  NOT NULL,
    orders        text    NOT NULL CHECK (orders IN ('own', 'all')),
    status        text    NOT NULL CHECK (status IN ('enabled', 'disabled')),
    secret        text    NOT NULL,
    created_at    bigint  NOT NULL,
    failing_since bigint
  );
  CREATE INDEX webhooks_account_id ON webhooks (account, id);

  CREATE TABLE webhook_deliveries (
    webhook_id  bigint  NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    event_seq   bigint  NOT NULL REFERENCES events (seq) ON DELETE CASCADE,
    attempt     integer NOT NULL DEFAULT 1 CHECK (attempt >= 1),
    due_at      bigint  NOT NULL,
    holder      text,
    lease_until bigint  NOT NULL DEFAULT 0,
    PRIMARY KEY (webhook_id, event_seq)
  );
  CREATE INDEX webhook_deliveries_due_at ON webhook_deliveries (due_at);
  CREATE INDEX webhook_deliveries_event_seq ON webhook_deliveries (event_seq);

  CREATE TABLE webhook_attempts (
    id           bigint  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    webhook_id   bigint  NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    event_id     bigint  NOT NULL,
    attempt      integer NOT NULL,
    attempted_at bigint  NOT NULL,
    status       integer,
    error        text,
    duration_ms  integer NOT NULL
  );
  CREATE INDEX webhook_attempts_webhook_id ON webhook_attempts (webhook_id, id);

  CREATE TABLE webhook_idempotency_keys (
    api_key_id       text    NOT NULL,
    idempotency_key  text    NOT NULL CHECK (length(idempotency_key) BETWEEN 1 AND 255),
    fingerprint      text    NOT NULL,
    response_status  integer NOT NULL,
    response_headers text    NOT NULL,
    response_body    text    NOT NULL,
    created_at       bigint  NOT NULL,
    PRIMARY KEY (api_key_id, idempotency_key)
  );
  CREATE INDEX webhook_idempotency_keys_created_at ON webhook_idempotency_keys (created_at);

  -- storage/webhooks.ts's sees(), in SQL: the type listed; a pet event (no account), or an order
  -- event of the webhook's account, or any with orders 'all'. With no webhook enabled, one probe.
  CREATE FUNCTION deliver_events() RETURNS trigger LANGUAGE plpgsql AS $fn$
  BEGIN
    IF EXISTS (SELECT 1 FROM webhooks WHERE status = 'enabled') THEN
      INSERT INTO webhook_deliveries (webhook_id, event_seq, due_at)
        SELECT w.id, e.seq, 0 FROM appended e JOIN webhooks w
            ON w.status = 'enabled' AND e.type = ANY (w.types)
           AND (e.account IS NULL OR w.orders = 'all' OR w.account = e.account);
    END IF;
    RETURN NULL;
  END;
  $fn$;
  CREATE TRIGGER events_delivered AFTER INSERT ON events REFERENCING NEW TABLE AS appended
    FOR EACH STATEMENT EXECUTE FUNCTION deliver_events();
  `,
  // 9: less work in each INSERT into events, which every write makes (event-log.ts; the figures
  // are in docs/decisions/0025). The events' type is checked by a domain: a table's CHECK is kept
  // as the text of its expression, which every statement that inserts rows reads back and parses
  // again (60,000 instructions, a fifth of what the event of a lone create cost), while each
  // session keeps a domain's check compiled. The column becomes the domain before the domain has
  // its check, so that the table is not rewritten, and the check then reads the rows there are
  // once. An event's id is unique among those that have one: the events that wait for theirs
  // are in events_unsequenced, and no longer also in the index of ids. Instances of the previous
  // version, while they are rolled, append the same rows (their text is assigned to the domain)
  // and read the feed the same way.
  `
  CREATE DOMAIN event_type AS text;
  ALTER TABLE events DROP CONSTRAINT events_type_check, ALTER COLUMN type TYPE event_type;
  ALTER DOMAIN event_type ADD CONSTRAINT event_type_check
    CHECK (VALUE IN ('pet.created', 'pet.updated', 'pet.deleted', 'order.placed', 'order.approved', 'order.completed', 'order.cancelled'));
  ALTER TABLE events DROP CONSTRAINT events_id_key;
  CREATE UNIQUE INDEX events_id ON events (id) WHERE id IS NOT NULL;
  `,
  // 10: ids given to blocks, not to rows (event-log.ts; docs/decisions/0029). The sequencer rewrote
  // every event to give it its id, which cost the server more than appending it. Now the events a
  // statement appends are one block: their row keys are consecutive from a base that
  // event_blocks draws, a multiple of 2^20 (EVENT_BLOCK_SPAN); the first row holds the block's
  // size and, once the sequencer has given it, its first id, and an event's id is that id plus its
  // distance from the first row. Each event already in the log is a block of its own (its size 1
  // from the column's default, which only those rows keep: no rewrite). The previous version
  // cannot run beside this one (its appends have no row key to draw any more, and its sequencer's
  // sequence is renamed, so that it fails rather than number rows one by one): every instance
  // is stopped before the first of this version starts (docs/upgrading.md).
  `
  ALTER TABLE events ALTER COLUMN seq DROP IDENTITY;
  ALTER TABLE events ADD COLUMN block_events integer DEFAULT 1;
  ALTER TABLE events ALTER COLUMN block_events DROP DEFAULT;
  DROP INDEX events_unsequenced;
  -- The blocks that wait for their first id: usually none, read before every page of the feed.
  CREATE INDEX events_unsequenced_blocks ON events (seq) WHERE id IS NULL AND block_events IS NOT NULL;
  ALTER SEQUENCE event_ids RENAME TO event_first_ids;
  CREATE SEQUENCE event_blocks INCREMENT BY 1048576 MINVALUE 1048576;
  SELECT setval('event_blocks', (coalesce(max(seq), 0) / 1048576 + 1) * 1048576, false) FROM events;
  `,
];
