/** A JSON value read from outside (a request, an engine's answer, a kubeconfig) that is an object. */
export type JsonObject = Record<string, unknown>;

/** Whether untrusted JSON is an object (not null, not an array), so its fields can be read. */
export const isObject = (value: unknown): value is JsonObject =>
  typeof value === "object" && value !== null && !Array.isArray(value);

/** JSON text read from outside, parsed; undefined when it is not JSON. */
export function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
