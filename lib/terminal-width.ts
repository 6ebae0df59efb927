/**
 * How many columns a terminal gives `text`, for lining up a table of names from elsewhere (model
 * ids are any Unicode): East Asian wide and fullwidth characters and emoji shown as such take two,
 * combining marks, format characters and variation selectors none, the rest one. Close to wcwidth;
 * a sequence of emoji joined by U+200D, which terminals disagree on, counts each of its emoji.
 */
export function terminalWidth(text: string): number {
  let width = 0;
  for (const char of text) {
    const code = char.codePointAt(0)!;
    if (zeroWidth.test(char)) continue;
    width += isWide(code) || emoji.test(char) ? 2 : 1;
  }
  return width;
}

/** `text` padded with spaces to `width` terminal columns (padEnd counts UTF-16 units). */
export function padToWidth(text: string, width: number): string {
  return text + " ".repeat(Math.max(0, width - terminalWidth(text)));
}

// Variation selectors are nonspacing marks (Mn) too.
const zeroWidth = /[\p{Mn}\p{Me}\p{Cf}]/u;
const emoji = /\p{Emoji_Presentation}/u;

/** East Asian Wide (W) and Fullwidth (F) blocks, as wcwidth reads them. */
function isWide(code: number): boolean {
  return (
    (code >= 0x1100 && code <= 0x115f) || // Hangul Jamo initial consonants
    (code >= 0x2e80 && code <= 0x303e) || // CJK radicals, Kangxi, CJK symbols and punctuation
    (code >= 0x3041 && code <= 0x33ff) || // Hiragana, Katakana, Bopomofo, CJK compatibility
    (code >= 0x3400 && code <= 0x4dbf) || // CJK extension A
    (code >= 0x4e00 && code <= 0x9fff) || // CJK unified ideographs
    (code >= 0xa000 && code <= 0xa4cf) || // Yi
    (code >= 0xac00 && code <= 0xd7a3) || // Hangul syllables
    (code >= 0xf900 && code <= 0xfaff) || // CJK compatibility ideographs
    (code >= 0xfe30 && code <= 0xfe4f) || // CJK compatibility forms
    (code >= 0xff00 && code <= 0xff60) || // fullwidth forms
    (code >= 0xffe0 && code <= 0xffe6) ||
    (code >= 0x20000 && code <= 0x3fffd) // CJK extensions B and beyond
  );
}
