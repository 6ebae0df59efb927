/**
 * Tidies a generated Markdown section the way the docs' writers do by hand:
 * the columns of each table padded to one width (so the source reads as a
 * table), no trailing spaces, no runs of blank lines, one final newline.
 * Biome leaves Markdown alone in this repository (biome.json), so the writer
 * formats its own output, in-process, with nothing to install.
 */
export function formatMarkdown(text: string): string {
  const lines = text.replace(/\r\n/g, "\n").split("\n");
  const out: string[] = [];
  let inFence = false;
  for (let i = 0; i < lines.length; ) {
    const line = lines[i]!;
    if (/^\s*(```|~~~)/.test(line)) inFence = !inFence;
    if (!inFence && isTableRow(line) && i + 1 < lines.length && isDelimiterRow(lines[i + 1]!)) {
      let end = i + 2;
      while (end < lines.length && isTableRow(lines[end]!)) end++;
      out.push(...alignTable(lines.slice(i, end)));
      i = end;
      continue;
    }
    out.push(inFence ? line : line.replace(/[ \t]+$/, ""));
    i++;
  }
  const joined = out.join("\n").replace(/\n{3,}/g, "\n\n");
  return `${joined.replace(/\n+$/, "")}\n`;
}

const isTableRow = (line: string) => /^\s*\|.*\|\s*$/.test(line);
const isDelimiterRow = (line: string) => /^\s*\|(\s*:?-+:?\s*\|)+\s*$/.test(line);

/** Cells of one row; a `\|` inside a cell is text, not a border. */
function cells(row: string): string[] {
  const inner = row.trim().slice(1, -1);
  const result: string[] = [];
  let cell = "";
  for (let i = 0; i < inner.length; i++) {
    const c = inner[i]!;
    if (c === "\\" && inner[i + 1] === "|") {
      cell += "\\|";
      i++;
    } else if (c === "|") {
      result.push(cell.trim());
      cell = "";
    } else cell += c;
  }
  result.push(cell.trim());
  return result;
}

/** Display width as a reader's editor counts it: code points, not UTF-16 units. */
const width = (s: string) => [...s].length;

function alignTable(rows: string[]): string[] {
  const parsed = rows.map(cells);
  const delimiter = parsed[1]!;
  const columns = Math.max(...parsed.map((r) => r.length));
  const align = Array.from({ length: columns }, (_, c) => {
    const d = delimiter[c] ?? "---";
    return d.startsWith(":") && d.endsWith(":") ? "center" : d.endsWith(":") ? "right" : "left";
  });
  const widths = Array.from({ length: columns }, (_, c) =>
    Math.max(3, ...parsed.map((r, i) => (i === 1 ? 3 : width(r[c] ?? "")))),
  );
  const pad = (s: string, c: number) => {
    const gap = widths[c]! - width(s);
    if (align[c] === "right") return " ".repeat(gap) + s;
    if (align[c] === "center") return " ".repeat(gap >> 1) + s + " ".repeat(gap - (gap >> 1));
    return s + " ".repeat(gap);
  };
  return parsed.map((r, i) => {
    const row = Array.from({ length: columns }, (_, c) => {
      if (i !== 1) return pad(r[c] ?? "", c);
      const w = widths[c]!;
      if (align[c] === "right") return `${"-".repeat(w - 1)}:`;
      if (align[c] === "center") return `:${"-".repeat(w - 2)}:`;
      return "-".repeat(w);
    });
    return `| ${row.join(" | ")} |`;
  });
}
