import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, test } from "vitest";
import { replaceSection, writeSection } from "./docs-section.ts";

describe("a section of a shared document", () => {
  test("is appended once, then replaced in place, leaving the rest alone", () => {
    const others = "# Benchmarks\n\n<!-- proxy:begin -->\nproxy numbers\n<!-- proxy:end -->\n";
    const once = replaceSection(others, "slots", "first");
    expect(once).toBe(`${others}\n<!-- slots:begin -->\nfirst\n<!-- slots:end -->\n`);
    const later = `${once}\nmore text by someone else\n`;
    expect(replaceSection(later, "slots", "second")).toBe(
      `${others}\n<!-- slots:begin -->\nsecond\n<!-- slots:end -->\n\nmore text by someone else\n`,
    );
  });

  test("a broken pair of markers is an error, not a guess", () => {
    expect(() => replaceSection("<!-- slots:end -->\n", "slots", "x")).toThrow(/enclose/);
  });

  const dir = mkdtemp(join(tmpdir(), "slots-doc-"));
  afterAll(async () => rm(await dir, { recursive: true, force: true }));

  test("writing re-reads the file, and creates it when missing", async () => {
    const path = join(await dir, "benchmarks.md");
    await writeSection(path, "slots", "one", "Benchmarks");
    expect(await readFile(path, "utf8")).toBe(
      "# Benchmarks\n\n<!-- slots:begin -->\none\n<!-- slots:end -->\n",
    );
    await writeFile(path, `${await readFile(path, "utf8")}\nadded meanwhile\n`);
    await writeSection(path, "slots", "two", "Benchmarks");
    expect(await readFile(path, "utf8")).toBe(
      "# Benchmarks\n\n<!-- slots:begin -->\ntwo\n<!-- slots:end -->\n\nadded meanwhile\n",
    );
  });
});
