/**
 * The known key a misspelt one most likely meant (`sleepAftr` → `sleepAfter`), or undefined when
 * none is close. Close: the same but for case, `-` and `_` (`sleep-after`, the annotation's
 * spelling), or within a few edits (one per four letters, at least one) of a known key.
 */
export function closestKey(word: string, known: readonly string[]): string | undefined {
  const plain = (key: string) => key.toLowerCase().replace(/[-_]/g, "");
  const same = known.find((key) => plain(key) === plain(word));
  if (same) return same;
  const most = Math.max(1, Math.floor(word.length / 4));
  let best: { key: string; distance: number } | undefined;
  for (const key of known) {
    const distance = editDistance(plain(word), plain(key));
    if (distance <= most && (!best || distance < best.distance)) best = { key, distance };
  }
  return best?.key;
}

/** Edits (insert, delete, replace, swap two neighbours) that turn `a` into `b`. */
function editDistance(a: string, b: string): number {
  const rows = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i <= a.length; i++)
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min(rows[i - 1]![j]! + 1, rows[i]![j - 1]! + 1, rows[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        d = Math.min(d, rows[i - 2]![j - 2]! + 1);
      rows[i]![j] = d;
    }
  return rows[a.length]![b.length]!;
}
