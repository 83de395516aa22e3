/**
 * Reading the repository's Markdown as GitHub renders it, for the documentation tests
 * (test/docs/): which files there are, the anchors their headings get, and where their links go.
 *
 * Enough of CommonMark for these pages, not all of it: ATX headings (`## Title`), inline links and
 * images (`[text](target)`), reference definitions (`[name]: target`); fenced code blocks and code
 * spans are skipped, since a link there is not a link.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository's root folder. */
export const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** Folders never searched for Markdown (besides hidden ones): installed packages, bench output. */
const SKIPPED = new Set(['node_modules', 'bench/results']);

/** Every Markdown file of the repository, as paths relative to the root with `/`, sorted. */
export function markdownFiles(root: string = ROOT): string[] {
  const found: string[] = [];
  const walk = (folder: string) => {
    for (const entry of readdirSync(folder, { withFileTypes: true })) {
      const path = join(folder, entry.name);
      if (entry.name.startsWith('.') || SKIPPED.has(relative(root, path).split(sep).join('/'))) continue;
      if (entry.isDirectory()) walk(path);
      else if (entry.isFile() && entry.name.endsWith('.md')) found.push(relative(root, path).split(sep).join('/'));
    }
  };
  walk(root);
  return found.sort();
}

/** The text outside fenced code blocks, line by line (a fenced line becomes empty). */
function proseLines(markdown: string): string[] {
  let fence: string | null = null;
  return markdown.split('\n').map((line) => {
    const marker = /^ {0,3}(`{3,}|~{3,})(.*)$/.exec(line);
    if (fence === null) {
      if (!marker) return line;
      fence = marker[1]!;
      return '';
    }
    // A closing fence: the same character, at least as many, nothing after it.
    if (marker && marker[1]![0] === fence[0] && marker[1]!.length >= fence.length && marker[2]!.trim() === '') fence = null;
    return '';
  });
}

/** `text` without code spans: a link inside backticks is not a link. */
function withoutCodeSpans(text: string): string {
  return text.replace(/(`+)[^`]*?\1/g, '');
}

/**
 * GitHub's anchor for a heading's text (as github-slugger makes it): lower case; every character
 * that is not a letter, a mark, a digit, `_`, `-` or a space removed; each space a hyphen.
 */
export function slug(heading: string): string {
  const text = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1') // links and images: their text
    .replace(/<[^>]+>/g, ''); // inline HTML tags
  return text.toLowerCase().replace(/[^\p{L}\p{M}\p{N}_\- ]/gu, '').replace(/ /g, '-');
}

/** The anchors of a Markdown text's headings, in order, with GitHub's `-1`, `-2` for repeats. */
export function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const result = new Set<string>();
  for (const line of proseLines(markdown)) {
    const heading = /^ {0,3}#{1,6}[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$/.exec(line);
    if (!heading) continue;
    const base = slug(heading[1]!);
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    result.add(count === 0 ? base : `${base}-${count}`);
  }
  return result;
}

/** The targets of a Markdown text's links, images and reference definitions, with their line. */
export function links(markdown: string): { target: string; line: number }[] {
  const found: { target: string; line: number }[] = [];
  proseLines(markdown).forEach((raw, index) => {
    const line = withoutCodeSpans(raw);
    for (const match of line.matchAll(/\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+"[^"]*")?\s*\)/g)) {
      found.push({ target: match[1]!.replace(/^<|>$/g, ''), line: index + 1 });
    }
    const definition = /^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)/.exec(line);
    if (definition) found.push({ target: definition[1]!.replace(/^<|>$/g, ''), line: index + 1 });
  });
  return found;
}

/** Whether a target leaves the document set: a URL with a scheme, checked by nobody here. */
function isAbsoluteUrl(target: string): boolean {
  return /^[a-z][a-z0-9+.-]*:/i.test(target);
}

/**
 * Every link of `files` (paths relative to `root`) that does not resolve: a relative path that
 * leaves the repository or names nothing, or an `#anchor` that no heading of its Markdown file
 * has. Absolute URLs (`https:`, `mailto:`) are not checked. Returns `file:line: target (why)`.
 */
export function brokenLinks(files: readonly string[], read: (file: string) => string, root: string = ROOT): string[] {
  const broken: string[] = [];
  const anchorsOf = new Map<string, Set<string>>();
  const anchorsIn = (file: string) => {
    let found = anchorsOf.get(file);
    if (!found) anchorsOf.set(file, (found = anchors(read(file))));
    return found;
  };
  for (const file of files) {
    for (const { target, line } of links(read(file))) {
      if (isAbsoluteUrl(target)) continue;
      const hash = target.indexOf('#');
      const pathPart = decodeURIComponent(hash === -1 ? target : target.slice(0, hash));
      const fragment = hash === -1 ? null : decodeURIComponent(target.slice(hash + 1));
      const where = `${file}:${line}: ${target}`;
      // `/x` is the repository's root on GitHub, not the file system's.
      const absolute = pathPart === '' ? resolve(root, file) : pathPart.startsWith('/') ? resolve(root, `.${pathPart}`) : resolve(root, dirname(file), pathPart);
      const inside = relative(root, absolute);
      if (inside === '..' || inside.startsWith(`..${sep}`) || resolve(root, inside) !== absolute) {
        broken.push(`${where} (outside the repository)`);
        continue;
      }
      if (!existsSync(absolute)) {
        broken.push(`${where} (no such file or folder)`);
        continue;
      }
      if (fragment === null) continue;
      const targetFile = inside.split(sep).join('/');
      if (!targetFile.endsWith('.md')) {
        broken.push(`${where} (an anchor into a file that is not Markdown)`);
        continue;
      }
      if (!anchorsIn(targetFile).has(fragment)) broken.push(`${where} (no heading has the anchor #${fragment})`);
    }
  }
  return broken;
}

/** A file of the repository as text. */
export function readRepoFile(file: string, root: string = ROOT): string {
  return readFileSync(join(root, file), 'utf8');
}
