import { Lexer, LineCounter, Parser } from "yaml";
import type { ConfigProblem } from "./config-error.ts";
import { positionAt } from "./yaml-paths.ts";

/**
 * How deep lists and mappings may sit inside each other. Settings need four levels
 * (`models.qwen.env.NAME`); anchors shared under `x-` keys a few more. The YAML library builds a
 * document recursively, so a file nested thousands deep would overflow the stack (and report that
 * as a string of "invalid YAML" errors); it is refused before it is built.
 */
export const maxNesting = 64;

const collections = new Set(["block-map", "block-seq", "flow-collection"]);

/**
 * Where the file nests deeper than `maxNesting`, or undefined. The YAML parser (not the document
 * builder) keeps its open collections on a stack of its own, so it can be watched token by token,
 * stopping at the first one too deep.
 */
export function nestingProblem(text: string): ConfigProblem | undefined {
  const lines = new LineCounter();
  lines.addNewLine(0);
  for (const newline of text.matchAll(/\n/g)) lines.addNewLine(newline.index + 1);
  const parser = new Parser();
  for (const lexeme of new Lexer().lex(text)) {
    const before = parser.offset;
    for (const _ of parser.next(lexeme));
    let depth = 0;
    for (const token of parser.stack) if (collections.has(token.type)) depth++;
    if (depth > maxNesting) {
      return {
        key: "",
        message: `the file nests lists and mappings more than ${maxNesting} deep here; settings need only a few levels, so take the extra ones out`,
        ...positionAt(lines, before),
      };
    }
  }
  return undefined;
}
