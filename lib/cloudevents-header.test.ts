import { expect, test } from "vitest";
import { decodeHeaderValue, encodeAttributeHeaders, encodeHeaderValue } from "./cloudevents-header.ts";

// The binding's own example (HTTP protocol binding 1.0.2, 3.1.3.2).
const euro = "Euro \u20AC \u{1F600}";
const euroOnTheWire = "Euro%20%E2%82%AC%20%F0%9F%98%80";

test("encoded as the binding says: space, quote, percent and anything outside printable ASCII", () => {
  expect(encodeHeaderValue(euro)).toBe(euroOnTheWire);
  expect(encodeHeaderValue('say "100%"')).toBe("say%20%22100%25%22");
  expect(encodeHeaderValue("café")).toBe("caf%C3%A9");
  expect(encodeHeaderValue("a\tb\u007f")).toBe("a%09b%7F");
  expect(encodeHeaderValue("dev.snooze.model-1/x_y~z")).toBe("dev.snooze.model-1/x_y~z");
});

test("decoded: one round, lower-case hex, quoted strings, unnecessary encoding; invalid UTF-8 refused", () => {
  expect(decodeHeaderValue(euroOnTheWire)).toBe(euro);
  expect(decodeHeaderValue("caf%c3%a9")).toBe("café");
  expect(decodeHeaderValue("%2541")).toBe("%41");
  expect(decodeHeaderValue('"a \\"quoted\\" value"')).toBe('a "quoted" value');
  expect(decodeHeaderValue("llam%61")).toBe("llama");
  expect(decodeHeaderValue("100% sure, %zz")).toBe("100% sure, %zz");
  expect(decodeHeaderValue("ünïcödé")).toBe("ünïcödé");
  // UTF-8 bytes sent unencoded, as Node reads them (Latin-1): read as UTF-8.
  expect(decodeHeaderValue(Buffer.from("模型 café", "utf8").toString("latin1"))).toBe("模型 café");
  expect(decodeHeaderValue("%C0%A0")).toBeUndefined();
  expect(decodeHeaderValue("%FF")).toBeUndefined();
  expect(decodeHeaderValue("%F0%9F%98")).toBeUndefined();
});

test("a message's ce-* headers are encoded, and only those", () => {
  expect(
    encodeAttributeHeaders({ "ce-subject": "模型", "content-type": "application/json; charset=utf-8" }),
  ).toEqual({ "ce-subject": "%E6%A8%A1%E5%9E%8B", "content-type": "application/json; charset=utf-8" });
});
