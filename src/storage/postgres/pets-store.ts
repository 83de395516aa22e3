/**
 * Pets and Idempotency-Key records in PostgreSQL, shared by every instance: the reads
 * (pet-reads.ts), the creations with their records (pet-creations.ts) and the changes
 * (pet-changes.ts), batched by the write paths and by the reads' own group commit.
 *
 * categoryId travels as text both ways (`::bigint` in, `::text` out): no JS number holds it.
 */
import { IDEMPOTENCY_TTL_MS } from '../idempotency.ts';
import type { PetsStore } from '../pets.ts';
import { guard, guardRead } from './database.ts';
import type { PostgresSql } from './driver.ts';
import { changeMany } from './pet-changes.ts';
import { insertMany } from './pet-creations.ts';
import { createPetReads } from './pet-reads.ts';
import { findRecord, RECORD_TABLES } from './idempotency-records.ts';

/** The pets store over a migrated database. */
export function createPetsStore(sql: PostgresSql): PetsStore {
  const reads = createPetReads(sql);
  return {
    insertMany: (creations) => insertMany(sql, creations),

    findIdempotencyRecord: (apiKeyId, key, now) => guardRead(() => findRecord(sql, 'createPet', apiKeyId, key, now)),

    async purgeIdempotencyRecords(now, limit) {
      // createPet's records, then placeOrder's and createWebhook's (tables of their own, see
      // migrations 4 and 8), up to `limit` in all.
      let purged = 0;
      for (const table of Object.values(RECORD_TABLES)) {
        if (purged >= limit) break;
        const result = await guard(() => sql.unsafe(
          `DELETE FROM ${table} WHERE (api_key_id, idempotency_key) IN (
             SELECT api_key_id, idempotency_key FROM ${table} WHERE created_at <= $1::bigint ORDER BY created_at LIMIT $2)`,
          [now - IDEMPOTENCY_TTL_MS, limit - purged],
          { prepare: true },
        ));
        purged += result.count;
      }
      return purged;
    },

    get: reads.get,

    list: reads.list,

    changeMany: (changes) => changeMany(sql, changes),

    // Other instances write too, and nothing cheap tells this one when: no answer is cached, so
    // the journal is never asked; were it asked, "anything may have changed" is the safe answer.
    revision: () => null,
    writtenSince: () => true,
  };
}
