/** RFC 6902 JSON Patch, the only patch type admission webhooks may return. */
export type JsonPatchOp =
  | { op: "add" | "replace"; path: string; value: unknown }
  | { op: "remove"; path: string };

export type JsonPatch = JsonPatchOp[];

/** One path segment as a JSON Pointer (RFC 6901): `snooze.dev/slot` → `snooze.dev~1slot`. */
export const pointerSegment = (segment: string | number) =>
  String(segment).replaceAll("~", "~0").replaceAll("/", "~1");

export const pointer = (...segments: (string | number)[]) => `/${segments.map(pointerSegment).join("/")}`;
