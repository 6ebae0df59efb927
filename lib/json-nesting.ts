/**
 * Where a parsed JSON value nests objects and arrays more than `max` deep, as a dotted path (`data.x.0`),
 * or undefined. Walked with a stack of its own, not by recursion: `JSON.parse` takes 20,000 levels in
 * 40 kB, and anything that walks or encodes such a value recursively (a validator, `JSON.stringify`)
 * overflows the call stack.
 */
export function tooDeepAt(value: unknown, max: number): string | undefined {
  const stack: [unknown, string, number][] = [[value, "", 0]];
  while (stack.length > 0) {
    const [item, path, depth] = stack.pop()!;
    if (typeof item !== "object" || item === null) continue;
    if (depth >= max) return path;
    for (const [key, child] of Object.entries(item))
      stack.push([child, path ? `${path}.${key}` : key, depth + 1]);
  }
  return undefined;
}
