/**
 * JSON as vLLM reads it. vLLM parses a request body with Python's `json.loads`, which also takes
 * `NaN`, `Infinity` and `-Infinity` (what Python's `json.dumps` writes for such floats, so a Python
 * client sending `temperature=float("nan")` sends them). `JSON.parse` refuses them, and Snooze
 * answered `400 invalid_json` for a body the engine takes (found by an outside tester). Routing
 * only reads a few top-level members, so such a number reads as `null` here; the engine still gets
 * the client's bytes.
 */
export function parseAsPython(text: string, reviver?: Parameters<typeof JSON.parse>[1]): unknown {
  try {
    return JSON.parse(text, reviver);
  } catch (error) {
    const finite = nonFiniteAsNull(text);
    if (finite === undefined) throw error;
    try {
      return JSON.parse(finite, reviver);
    } catch {
      // Not JSON for another reason: the first error says where.
      throw error;
    }
  }
}

const words = ["NaN", "Infinity", "-Infinity"];

/** `text` with every `NaN`, `Infinity` and `-Infinity` outside a string as `null`; undefined when it has none. */
export function nonFiniteAsNull(text: string): string | undefined {
  let out = "";
  let from = 0;
  for (let i = 0; i < text.length; i++) {
    const char = text[i];
    if (char === '"') {
      i++;
      while (i < text.length && text[i] !== '"') i += text[i] === "\\" ? 2 : 1;
      continue;
    }
    if (char !== "N" && char !== "I" && char !== "-") continue;
    const word = words.find((candidate) => text.startsWith(candidate, i));
    if (!word) continue;
    out += `${text.slice(from, i)}null`;
    i += word.length - 1;
    from = i + 1;
  }
  return from === 0 ? undefined : out + text.slice(from);
}
