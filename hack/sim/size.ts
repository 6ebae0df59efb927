/**
 * Memory sizes in flags, written like `80GiB`, `16Gi`, `512MiB`, `24GB` or a plain
 * byte count. Binary units (Ki, Mi, Gi, Ti, with or without a trailing B) are
 * powers of 1024; decimal units (K, M, G, T, with or without B) powers of 1000,
 * as Kubernetes quantities read them.
 */
const unitBytes: Record<string, number> = {
  "": 1,
  b: 1,
  k: 1e3,
  kb: 1e3,
  m: 1e6,
  mb: 1e6,
  g: 1e9,
  gb: 1e9,
  t: 1e12,
  tb: 1e12,
  ki: 2 ** 10,
  kib: 2 ** 10,
  mi: 2 ** 20,
  mib: 2 ** 20,
  gi: 2 ** 30,
  gib: 2 ** 30,
  ti: 2 ** 40,
  tib: 2 ** 40,
};

/** Bytes in `text`, or undefined when it is not a size. */
export function parseSize(text: string): number | undefined {
  const match = /^(\d+(?:\.\d+)?)\s*([a-z]*)$/i.exec(text.trim());
  if (!match) return undefined;
  const unit = unitBytes[match[2]!.toLowerCase()];
  if (unit === undefined) return undefined;
  return Math.round(Number(match[1]) * unit);
}

/** `17.18 GiB`: the form vLLM's own memory messages use. */
export function formatGiB(bytes: number): string {
  return `${(bytes / 2 ** 30).toFixed(2)} GiB`;
}
