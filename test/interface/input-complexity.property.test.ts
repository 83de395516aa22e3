/**
 * The property beside input-complexity.test.ts: not only the worst cases thought of, but random
 * ones. A surface is picked among all of them, with the head and tail of one of its worst cases
 * (so that the bytes reach the parser behind: `Bearer `, `{"name":`), and its repeated unit is
 * made of a few random tokens of the kind of bytes that may stand there, some numbered so that
 * names differ. At n and 4n bytes the time grows at most about linearly, the answer is one its
 * operation documents, and an error answer is at most 1 KiB.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { startTestServer } from '../support/test-server.ts';
import { checkAnswer, complexityFixtures, COMPLEXITY_SERVER, growth, isAboutLinear } from '../support/complexity.ts';
import { settings } from '../support/property.ts';
import { worstCases, worstRequest, type Surface, type WorstCase } from '../support/worst-cases.ts';

/** Tokens that may stand in each kind of place; `{i}` becomes the unit's number. */
const TARGET_TOKENS = ['a', 'Z', '0', '9', '&', '=', '%41', '%FF', '%', ',', '-', '.', '_', '~', '/', '?', 'n{i}', 'limit', 'cursor', 'status'];
const TOKENS: Readonly<Record<Exclude<Surface['kind'], 'lines'>, readonly string[]>> = {
  target: TARGET_TOKENS,
  header: [...TARGET_TOKENS, ' ', '\t', '"', 'W/', ';', ':', '[', ']', '*', '(', ')', '\u00e9', '"{i}.0"', '10.0.0.{i}'],
  body: ['{', '}', '[', ']', '"a{i}"', ':', ',', '0', '1', '-', '.', 'e', '"\\u0041"', ' ', 'true', 'null', '"', '\\', '\u00e9', '"p{i}":0,', '"name":', '"petId":'],
};

test('random repetitions on any surface cost at most linear time, answer as documented, and an error stays under 1 KiB', async (t) => {
  const server = await startTestServer(t, COMPLEXITY_SERVER);
  const cases = worstCases(await complexityFixtures(server)).filter((worst) => worst.surface.kind !== 'lines');
  const randomCase = fc.constantFrom(...cases).chain((worst) =>
    fc.record({
      pieces: fc.array(fc.constantFrom(...TOKENS[worst.surface.kind as keyof typeof TOKENS]), { minLength: 1, maxLength: 4 }),
      nested: fc.boolean(),
    }).map(({ pieces, nested }): WorstCase => {
      const text = (index: number) => pieces.join('').replaceAll('{i}', String(index));
      // Half the time the pieces open and close around each other, as nesting does.
      const unit = nested && pieces.length > 1
        ? (index: number) => [text(index), pieces.slice(1).join('').replaceAll('{i}', String(index))] as const
        : text;
      return { surface: worst.surface, shape: { ...worst.shape, name: `random ${JSON.stringify(pieces)}${nested ? ' nested' : ''}`, unit } };
    }),
  );
  await fc.assert(
    fc.asyncProperty(randomCase, async (worst) => {
      const { cap } = worst.surface;
      const context = `${worst.surface.label}: ${worst.shape.name}`;
      const [empty, small, large] = [0, cap / 4, cap].map((size) => worstRequest(worst, size));
      let measured = await growth(server.url, empty!, small!, large!);
      if (!isAboutLinear(measured)) measured = await growth(server.url, empty!, small!, large!);
      for (const [size, response] of Object.entries(measured.answers)) checkAnswer(worst, response, `${context} (${size})`);
      assert.ok(isAboutLinear(measured), `${context}: ${measured.empty.toFixed(2)}, ${measured.small.toFixed(2)}, ${measured.large.toFixed(2)} ms`);
    }),
    settings(40),
  );
  assert.equal((await fetch(`${server.url}/healthz`)).status, 200);
});
