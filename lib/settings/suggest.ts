/**
 * The known key a misspelt one most likely meant (`sleepAftr` → `sleepAfter`), or undefined when
 * none is close. Close: the same but for case, `-` and `_` (`sleep-after`, the annotation's
 * spelling), or within a few edits (one per four letters, at least one) of a known key.
 */
export function closestKey(word: string, known: readonly string[]): string | undefined {
  const plain = (key: string) => key.toLowerCase().replace(/[-_]/g, "");
  const written = plain(word);
  const same = known.find((key) => plain(key) === written);
  if (same) return same;
  const most = Math.max(1, Math.floor(word.length / 4));
  let best: { key: string; distance: number } | undefined;
  for (const key of known) {
    const candidate = plain(key);
    // Each edit changes the length by one at most, so a key whose length differs by more cannot be
    // near; not compared, a key of a million letters costs no table of a million rows (found by an
    // outside tester: such a key in a settings file took 27 s and 900 MB to be refused).
    if (Math.abs(written.length - candidate.length) > most) continue;
    const distance = editDistance(written, candidate);
    if (distance <= most && (!best || distance < best.distance)) best = { key, distance };
  }
  return best?.key;
}

/** Edits (insert, delete, replace, swap two neighbours) that turn `a` into `b`. */
function editDistance(a: string, b: string): number {
  // Three rows of the table (a swap looks two back), not the whole table of arrays.
  let before = new Uint32Array(b.length + 1);
  let previous = Uint32Array.from({ length: b.length + 1 }, (_, j) => j);
  let current = new Uint32Array(b.length + 1);
  for (let i = 1; i <= a.length; i++) {
    current[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        d = Math.min(d, before[j - 2]! + 1);
      current[j] = d;
    }
    [before, previous, current] = [previous, current, before];
  }
  return previous[b.length]!;
}
