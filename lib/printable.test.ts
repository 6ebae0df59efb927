import { expect, test } from "vitest";
import { printable } from "./printable.ts";

test("the server's words are made safe to print: control characters and reordering marks shown, not obeyed", () => {
  expect(printable("\x1b[31mred\x07\r\u009b\u202eevil\u2066")).toBe(
    "\\x1b[31mred\\x07\\x0d\\x9b\\u202eevil\\u2066",
  );
  // Newlines and tabs belong in a message, not in a name or a table cell.
  expect(printable("a\n\tb")).toBe("a\n\tb");
  expect(printable("a\n\tb", true)).toBe("a\\n\\tb");
  expect(printable("qwen-3 ✓ 😀")).toBe("qwen-3 ✓ 😀");
  // A line's end to some readers, though not to a terminal.
  expect(printable("a\u2028b\u2029c")).toBe("a\\u2028b\\u2029c");
});
