/**
 * Which of several Models that serve one model id gets its requests: the oldest
 * (`metadata.creationTimestamp`), then by namespace and name. A sortable key, so every activator
 * and every autoscaler replica picks the same one whatever order their watches saw the Models in
 * (before, the first one seen won: a restarted autoscaler woke one Model's pods while the
 * activators held the requests for the other's, and a Model deleted left its id served by nobody
 * until another Model changed).
 */
export function modelPrecedence(metadata: {
  name: string;
  namespace?: string;
  creationTimestamp?: unknown;
}): string {
  // RFC 3339 in UTC, as the API writes it, sorts as text; a space sorts before any name character.
  const created = typeof metadata.creationTimestamp === "string" ? metadata.creationTimestamp : "~";
  return `${created} ${metadata.namespace ?? "default"} ${metadata.name}`;
}
