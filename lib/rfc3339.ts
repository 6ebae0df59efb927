const timestamp = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|[+-](\d{2}):(\d{2}))$/i;

/**
 * Whether `value` is an RFC 3339 date-time (CloudEvents' `time`), each field in its range.
 * `Date.parse` alone is not enough: V8 reads `2026-02-30` as 2 March and `T24:00:00` as the next
 * day's midnight, where Go's time.Parse (Knative's) refuses them. A leap second (`:60`) is refused
 * as Go refuses it.
 */
export function isRfc3339(value: unknown): boolean {
  if (typeof value !== "string") return false;
  const match = timestamp.exec(value);
  if (!match) return false;
  const [year, month, day, hour, minute, second] = match.slice(1, 7).map(Number) as number[];
  const leap = year! % 4 === 0 && (year! % 100 !== 0 || year! % 400 === 0);
  const daysInMonth = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month! - 1] ?? 0;
  const offsetHour = match[9] === undefined ? 0 : Number(match[9]);
  const offsetMinute = match[10] === undefined ? 0 : Number(match[10]);
  return (
    month! >= 1 &&
    month! <= 12 &&
    day! >= 1 &&
    day! <= daysInMonth &&
    hour! <= 23 &&
    minute! <= 59 &&
    second! <= 59 &&
    offsetHour <= 23 &&
    offsetMinute <= 59
  );
}
