import { readFile, rename, writeFile } from "node:fs/promises";

/**
 * Writes one section of a document that others edit too: only the text
 * between this section's own markers is replaced (or the section appended),
 * and the file is read right before it is written.
 */
export function markers(name: string): { begin: string; end: string } {
  return { begin: `<!-- ${name}:begin -->`, end: `<!-- ${name}:end -->` };
}

/** `document` with the section `name` set to `body`. */
export function replaceSection(document: string, name: string, body: string): string {
  const { begin, end } = markers(name);
  const section = `${begin}\n${body.trim()}\n${end}`;
  const from = document.indexOf(begin);
  const to = document.indexOf(end);
  if (from >= 0 && to > from) return document.slice(0, from) + section + document.slice(to + end.length);
  if (from >= 0 || to >= 0) throw new Error(`${begin} and ${end} do not enclose a section`);
  const separator =
    document.length === 0 || document.endsWith("\n\n") ? "" : document.endsWith("\n") ? "\n" : "\n\n";
  return `${document}${separator}${section}\n`;
}

export async function writeSection(path: string, name: string, body: string, title: string): Promise<void> {
  const current = await readFile(path, "utf8").catch((error: NodeJS.ErrnoException) => {
    if (error.code === "ENOENT") return `# ${title}\n`;
    throw error;
  });
  const next = replaceSection(current, name, body);
  // Write beside it and rename, so a reader never sees half a file.
  const temporary = `${path}.${process.pid}.tmp`;
  await writeFile(temporary, next);
  await rename(temporary, path);
}
