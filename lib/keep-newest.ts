/**
 * Sets `key` to `value` as the newest entry of an insertion-ordered `map` (a key set again moves to
 * the end), then drops the oldest entries past `max`: the one way this code base bounds a memory of
 * recent things (response ids, access reviews, Event series, engine exits) so that a process that
 * runs for weeks cannot grow it without end.
 */
export function keepNewest<K, V>(map: Map<K, V>, key: K, value: V, max: number): void {
  map.delete(key);
  map.set(key, value);
  while (map.size > max) map.delete(map.keys().next().value as K);
}
