import type { Attributes } from "@opentelemetry/api";

/** The methods OpenTelemetry's HTTP conventions know (RFC 9110's, PATCH and QUERY). */
const defaultMethods = [
  "CONNECT",
  "DELETE",
  "GET",
  "HEAD",
  "OPTIONS",
  "PATCH",
  "POST",
  "PUT",
  "QUERY",
  "TRACE",
];

interface SpanMethod {
  /** The method in the span's name. */
  name: string;
  attributes: Attributes;
}

let known: Map<string, SpanMethod> | undefined;

/**
 * The known methods, each with what its spans say (made once: no object more per request):
 * `OTEL_INSTRUMENTATION_HTTP_KNOWN_METHODS` (comma-separated, case-sensitive) replaces the list,
 * as the conventions ask of an instrumentation that may call a valid method `_OTHER`.
 */
function knownMethods(): Map<string, SpanMethod> {
  if (!known) {
    const listed = process.env.OTEL_INSTRUMENTATION_HTTP_KNOWN_METHODS?.split(",")
      .map((m) => m.trim())
      .filter((m) => m !== "");
    known = new Map(
      (listed?.length ? listed : defaultMethods).map((m) => [
        m,
        { name: m, attributes: { "http.request.method": m } },
      ]),
    );
  }
  return known;
}

/**
 * How a span names a request's method: its own when known, else `_OTHER` with the method as the
 * client sent it in `http.request.method_original`, and `HTTP` in the span's name, as
 * OpenTelemetry's HTTP conventions require. Found by an outside tester: `PROPFIND`, `PURGE`,
 * `M-SEARCH` (any method Node's parser takes) named spans and set `http.request.method` as sent.
 */
export function spanMethod(method: string): SpanMethod {
  return (
    knownMethods().get(method) ?? {
      name: "HTTP",
      attributes: { "http.request.method": "_OTHER", "http.request.method_original": method },
    }
  );
}

/** For tests: the list is read again from the environment. */
export function forgetKnownMethods(): void {
  known = undefined;
}
