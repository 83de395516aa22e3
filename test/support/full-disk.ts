/**
 * A full disk on either engine, made by the database itself, so that a write fails exactly as it
 * does when the disk is full, on whichever connection or thread writes: small rows still fit, and
 * a row of LARGE characters does not.
 */
import type { PostgresSql } from '../../src/storage/postgres/driver.ts';

/** A length no page holds: a row this large needs pages that a full disk does not have. */
export const LARGE = 64 * 1024;

/**
 * Leaves the SQLite connection that runs it no free page and no page more (max_page_count is per
 * connection, and never below the file's size): a write that needs another page fails with
 * SQLITE_FULL, as on a full disk.
 */
export const FULL_DISK = 'VACUUM; PRAGMA max_page_count = 1';

/**
 * PostgreSQL's full disk (SQLSTATE 53100, disk_full), raised to the statement that writes an
 * Idempotency-Key record of LARGE characters (its fingerprint), of either operation.
 */
export async function fillPostgresDisk(sql: PostgresSql): Promise<void> {
  await sql.unsafe(`
    CREATE FUNCTION full_disk() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF length(NEW.fingerprint) >= ${LARGE} THEN
        RAISE EXCEPTION 'could not extend file: No space left on device' USING ERRCODE = 'disk_full';
      END IF;
      RETURN NEW;
    END $$;
    CREATE TRIGGER full_disk BEFORE INSERT ON idempotency_keys FOR EACH ROW EXECUTE FUNCTION full_disk();
    CREATE TRIGGER full_disk BEFORE INSERT ON order_idempotency_keys FOR EACH ROW EXECUTE FUNCTION full_disk();`);
}
