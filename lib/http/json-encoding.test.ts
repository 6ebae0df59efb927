import { expect, test } from "vitest";
import { jsonText } from "./json-encoding.ts";

const json = '{"model":"café","x":1}';
const utf16be = (text: string) => Buffer.from(text, "utf16le").swap16();

test("UTF-8 with or without a mark, UTF-16 in either order with or without a mark: the same text", () => {
  expect(jsonText(Buffer.from(json))).toEqual({ text: json, utf8: true });
  expect(jsonText(Buffer.from(`\ufeff${json}`))).toEqual({ text: json, utf8: false });
  expect(jsonText(Buffer.from(json, "utf16le"))).toEqual({ text: json, utf8: false });
  expect(jsonText(Buffer.from(`\ufeff${json}`, "utf16le"))).toEqual({ text: json, utf8: false });
  expect(jsonText(utf16be(json))).toEqual({ text: json, utf8: false });
  expect(jsonText(utf16be(`\ufeff${json}`))).toEqual({ text: json, utf8: false });
});

/** `text` in UTF-32, little- or big-endian (Node has no such encoding to write it with). */
function utf32(text: string, order: "le" | "be"): Buffer {
  const points = [...text].map((c) => c.codePointAt(0)!);
  const out = Buffer.alloc(points.length * 4);
  for (const [i, p] of points.entries()) {
    if (order === "le") out.writeUInt32LE(p, i * 4);
    else out.writeUInt32BE(p, i * 4);
  }
  return out;
}

test("UTF-32 in either order, with or without a mark, as vLLM reads it (found by an outside tester)", () => {
  for (const order of ["le", "be"] as const) {
    expect(jsonText(utf32(json, order))).toEqual({ text: json, utf8: false });
    expect(jsonText(utf32(`\ufeff${json} 🙂`, order))).toEqual({ text: `${json} 🙂`, utf8: false });
  }
});

test("short or odd bodies are read as UTF-8", () => {
  expect(jsonText(Buffer.from("1"))).toEqual({ text: "1", utf8: true });
  expect(jsonText(Buffer.from("12"))).toEqual({ text: "12", utf8: true });
});
