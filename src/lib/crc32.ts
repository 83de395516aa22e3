/**
 * CRC-32 (the checksum of zlib, gzip and PNG) of a string's UTF-8 bytes: the number node:zlib's
 * `crc32(text)` gives. Written here because node:zlib costs a start about 3 ms to load (19 of
 * Node's modules) for this one function, which the API key check (keys/api-keys.ts) needs before
 * the first answer. Table-driven, one step a byte: linear in the input.
 */

/** The remainders of the 256 byte values under the reflected polynomial 0xEDB88320, built on first use. */
let table: Int32Array | undefined;

function remainders(): Int32Array {
  const built = new Int32Array(256);
  for (let byte = 0; byte < 256; byte++) {
    let value = byte;
    for (let bit = 0; bit < 8; bit++) value = value & 1 ? 0xedb88320 ^ (value >>> 1) : value >>> 1;
    built[byte] = value;
  }
  return built;
}

/** The CRC-32 of `text` encoded as UTF-8, an unsigned 32-bit integer. */
export function crc32(text: string): number {
  const steps = (table ??= remainders());
  let crc = -1;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    // Beyond ASCII a character is several bytes: encode the whole text (a key never gets here).
    if (code > 0x7f) return crc32OfBytes(Buffer.from(text, 'utf8'), steps);
    crc = steps[(crc ^ code) & 0xff]! ^ (crc >>> 8);
  }
  return ~crc >>> 0;
}

function crc32OfBytes(bytes: Uint8Array, steps: Int32Array): number {
  let crc = -1;
  for (const byte of bytes) crc = steps[(crc ^ byte) & 0xff]! ^ (crc >>> 8);
  return ~crc >>> 0;
}
