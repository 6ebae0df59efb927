import { afterEach, expect, test } from "vitest";
import { forgetKnownMethods, spanMethod } from "./known-method.ts";

afterEach(() => {
  delete process.env.OTEL_INSTRUMENTATION_HTTP_KNOWN_METHODS;
  forgetKnownMethods();
});

test("a known method names the span and is its http.request.method; another is _OTHER, kept in http.request.method_original", () => {
  for (const method of ["GET", "POST", "OPTIONS", "QUERY"])
    expect(spanMethod(method)).toEqual({ name: method, attributes: { "http.request.method": method } });
  for (const method of ["PROPFIND", "PURGE", "M-SEARCH"])
    expect(spanMethod(method)).toEqual({
      name: "HTTP",
      attributes: { "http.request.method": "_OTHER", "http.request.method_original": method },
    });
});

test("OTEL_INSTRUMENTATION_HTTP_KNOWN_METHODS replaces the list", () => {
  process.env.OTEL_INSTRUMENTATION_HTTP_KNOWN_METHODS = "GET, PURGE";
  forgetKnownMethods();
  expect(spanMethod("PURGE").name).toBe("PURGE");
  expect(spanMethod("POST").attributes).toEqual({
    "http.request.method": "_OTHER",
    "http.request.method_original": "POST",
  });
});
