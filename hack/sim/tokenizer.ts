/**
 * The simulator's tokenizer behind vLLM's `/tokenize` and `/detokenize`: the same tokens the
 * rest of the simulator counts (a word or a punctuation mark, here with the spaces before it, so
 * the text can be rebuilt), each with an id below `simVocabSize`. A chat is rendered with a
 * ChatML-like template whose markers make up the few tokens `countChatTokens` adds, so a
 * tokenized chat counts what its `usage.prompt_tokens` says.
 *
 * Ids of the simulator's own words and marks are fixed; any other piece is hashed, and its text
 * is remembered (the newest `remembered` pieces) so that `/detokenize` can give it back.
 */
import { keepNewest } from "../../lib/keep-newest.ts";
import { simVocabSize } from "./logprobs.ts";
import { hashString } from "./random.ts";
import { contentText } from "./text.ts";

/** Pieces that join back to `text`; whitespace before a piece belongs to it, trailing to the last. */
export function splitPieces(text: string): string[] {
  const pieces = text.match(/\s*(?:[\p{L}\p{N}_]+|[^\p{L}\p{N}_\s])/gu) ?? [];
  const rest = text.slice(pieces.join("").length);
  if (rest !== "" && pieces.length > 0) pieces[pieces.length - 1] += rest;
  return pieces;
}

const special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "\n"];
const remembered = 65_536;

export class SimTokenizer {
  private readonly known = new Map<string, number>();
  private readonly pieces: string[] = [];
  private readonly seen = new Map<number, string>();

  constructor() {
    for (const piece of special) this.add(piece);
  }

  /** Pieces that join back to `text` (splitPieces). */
  split(text: string): string[] {
    return splitPieces(text);
  }

  encode(text: string): { ids: number[]; pieces: string[] } {
    const pieces = this.split(text);
    return { ids: pieces.map((piece) => this.id(piece)), pieces };
  }

  /** A chat as the template renders it, then encoded. */
  encodeChat(messages: readonly { role?: unknown; content?: unknown }[], addGenerationPrompt: boolean) {
    const pieces: string[] = [];
    for (const message of messages) {
      pieces.push(
        "<|im_start|>",
        String(message.role),
        "\n",
        ...this.split(contentText(message.content)),
        "<|im_end|>",
      );
    }
    if (addGenerationPrompt) pieces.push("<|im_start|>", "assistant", "\n");
    return { ids: pieces.map((piece) => this.id(piece)), pieces };
  }

  /** The text of `ids`; an id no text was seen for reads as the end-of-text marker. */
  decode(ids: readonly number[]): string {
    return ids.map((id) => this.pieces[id] ?? this.seen.get(id) ?? special[0]).join("");
  }

  private id(piece: string): number {
    const fixed = this.known.get(piece);
    if (fixed !== undefined) return fixed;
    const id = this.pieces.length + (hashString(piece) % (simVocabSize - this.pieces.length));
    keepNewest(this.seen, id, piece, remembered);
    return id;
  }

  private add(piece: string): void {
    this.known.set(piece, this.pieces.length);
    this.pieces.push(piece);
  }
}
