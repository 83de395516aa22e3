/**
 * The columns of pets and orders as every SQLite statement selects them: int64 ids of categories
 * and pets as text, so that values above 2^53 keep their exact digits.
 */
export const PET_COLUMNS = 'id, name, CAST(category_id AS TEXT) AS category_id, status, version';
export const ORDER_COLUMNS = 'id, CAST(pet_id AS TEXT) AS pet_id, account, status, placed_at, updated_at, expires_at, version';
