import type { ConfigProblem } from "./config-error.ts";

/**
 * Why a settings file's bytes are not UTF-8 text, located at the first byte that is not, or
 * undefined when they are. Decoding them anyway would turn a Latin-1 `café` into `caf\uFFFD` and
 * run a model nobody named; a UTF-16 file would read as noise. A UTF-8 byte order mark is fine.
 */
export function utf8Problem(bytes: Uint8Array): ConfigProblem | undefined {
  const fileStart = { key: "", line: 1, column: 1 };
  // UTF-32LE's mark begins with UTF-16LE's, so it is looked for first.
  if (startsWith(bytes, [0xff, 0xfe, 0, 0]) || startsWith(bytes, [0, 0, 0xfe, 0xff]))
    return { ...fileStart, message: "the file is UTF-32; save it as UTF-8" };
  if (startsWith(bytes, [0xff, 0xfe]) || startsWith(bytes, [0xfe, 0xff]))
    return { ...fileStart, message: "the file is UTF-16; save it as UTF-8" };
  const bad = firstInvalidByte(bytes);
  if (bad === undefined) return undefined;
  const lineStart = bytes.lastIndexOf(0x0a, bad - 1) + 1;
  let line = 1;
  for (let i = 0; i < lineStart; i++) if (bytes[i] === 0x0a) line++;
  // Columns count characters as the YAML parser does (UTF-16 units); the line is valid up to `bad`.
  const column = Buffer.from(bytes.subarray(lineStart, bad)).toString("utf8").length + 1;
  const byte = bytes[bad]!.toString(16).toUpperCase().padStart(2, "0");
  return {
    key: "",
    line,
    column,
    message: `the file is not UTF-8 (byte 0x${byte} here is not valid UTF-8); save it as UTF-8`,
  };
}

function startsWith(bytes: Uint8Array, prefix: number[]): boolean {
  return prefix.every((byte, i) => bytes[i] === byte);
}

/** The offset of the first byte of the first ill-formed sequence (Unicode table 3-7), if any. */
function firstInvalidByte(bytes: Uint8Array): number | undefined {
  let i = 0;
  while (i < bytes.length) {
    const lead = bytes[i]!;
    if (lead < 0x80) {
      i++;
      continue;
    }
    // How many continuation bytes follow, and the range of the first one (which rules out
    // overlong forms, surrogates and code points past U+10FFFF).
    let count: number;
    let low = 0x80;
    let high = 0xbf;
    if (lead >= 0xc2 && lead <= 0xdf) count = 1;
    else if (lead >= 0xe0 && lead <= 0xef) {
      count = 2;
      if (lead === 0xe0) low = 0xa0;
      if (lead === 0xed) high = 0x9f;
    } else if (lead >= 0xf0 && lead <= 0xf4) {
      count = 3;
      if (lead === 0xf0) low = 0x90;
      if (lead === 0xf4) high = 0x8f;
    } else return i;
    for (let k = 1; k <= count; k++) {
      const byte = bytes[i + k];
      if (byte === undefined || byte < (k === 1 ? low : 0x80) || byte > (k === 1 ? high : 0xbf)) return i;
    }
    i += count + 1;
  }
  return undefined;
}
