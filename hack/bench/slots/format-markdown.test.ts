import { describe, expect, test } from "vitest";
import { formatMarkdown } from "./format-markdown.ts";

describe("formatMarkdown", () => {
  test("pads every column of a table to one width, counting code points", () => {
    const text = "Intro  \n\n| a | long head |\n| --- | ---: |\n| µs × | 1 |\n| x | 12345678901 |\n";
    expect(formatMarkdown(text)).toBe(
      [
        "Intro",
        "",
        "| a    |   long head |",
        "| ---- | ----------: |",
        "| µs × |           1 |",
        "| x    | 12345678901 |",
        "",
      ].join("\n"),
    );
  });

  test("keeps escaped pipes inside a cell, fenced code as it is, one blank line at most", () => {
    const text = "| a\\|b | c |\n|---|---|\n| 1 | 2 |\n\n\n\n```\n| not | a table |\n|---|---|\n```\n";
    expect(formatMarkdown(text)).toBe(
      "| a\\|b | c   |\n| ---- | --- |\n| 1    | 2   |\n\n```\n| not | a table |\n|---|---|\n```\n",
    );
  });

  test("needs no external formatter: works on text biome would refuse", () => {
    expect(formatMarkdown("# Title\n\n- item\n")).toBe("# Title\n\n- item\n");
  });
});
