import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

/**
 * Markdown as the repository's formatter (Biome) writes it, so a generated
 * section passes `biome check` (aligned tables, list spacing). Without Biome
 * installed the text is returned as it is.
 */
const biome = fileURLToPath(new URL("../../../node_modules/.bin/biome", import.meta.url));

export function formatMarkdown(text: string): string {
  if (!existsSync(biome)) return text;
  const result = spawnSync(biome, ["format", "--stdin-file-path=docs/section.md"], {
    input: text,
    encoding: "utf8",
    timeout: 30_000,
  });
  if (result.status !== 0) throw new Error(`biome could not format the section: ${result.stderr}`);
  return result.stdout;
}
