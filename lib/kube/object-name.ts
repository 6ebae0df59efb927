import { createHash } from "node:crypto";

/** The longest name most Kubernetes objects may have (a DNS subdomain's): Leases, Events, ... */
export const maxObjectName = 253;

/**
 * `name` if it is at most `max` characters; else its first part and a hash of `identity` (by
 * default the name itself), `<first part>-<16 hex digits>`, at most `max`. So a name made from
 * another object's name stays valid at the length limit (not cut into one ending in `-` or `.`,
 * which the API server refuses), stays readable, and two long names never become one. `name` is
 * assumed to be a DNS subdomain already; `identity` is what tells two objects apart when the name
 * was normalized from it.
 */
export function fitName(name: string, max = maxObjectName, identity = name): string {
  if (name.length <= max) return name;
  const hash = createHash("sha256").update(identity).digest("hex").slice(0, 16);
  const head = name.slice(0, max - hash.length - 1).replace(/[^a-z0-9]+$/, "");
  return `${head}-${hash}`;
}
