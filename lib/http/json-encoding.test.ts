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

test("short or odd bodies are read as UTF-8", () => {
  expect(jsonText(Buffer.from("1"))).toEqual({ text: "1", utf8: true });
  expect(jsonText(Buffer.from([0xff, 0xfe, 0, 0, 0x7b, 0, 0, 0])).utf8).toBe(true);
});
