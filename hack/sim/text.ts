/**
 * The simulated model: a tokenizer that counts words and punctuation, and a
 * generator whose output depends only on the prompt, the seeds and the choice
 * index. No real language, just plausible-looking deterministic text.
 */
import { createRandom, hashString } from "./random.ts";

const words = (
  "the a of and to in is that it for on with as was at by this be from or an are " +
  "model sleep wake engine request token memory weights cache server quiet morning river " +
  "light small warm simple fast slow ready gentle signal answer question stone window " +
  "garden paper bridge cloud number pattern music silver"
).split(" ");

/** Shortest and longest natural answer, in tokens, when `max_tokens` does not cut it. */
export const naturalLengthRange = { min: 16, max: 64 } as const;

/** What a model with freshly mapped but never reloaded weights says. */
const garbageToken = "!";

/** Tokens in a piece of text: one per word, one per punctuation mark. */
export function countTokens(text: string): number {
  return text.match(/[\p{L}\p{N}_]+|[^\p{L}\p{N}_\s]/gu)?.length ?? 0;
}

/** Text of an OpenAI message `content`: a string or an array of parts. */
export function contentText(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .map((part) => (part && typeof part === "object" && "text" in part ? String(part.text) : ""))
    .join(" ");
}

/**
 * Prompt tokens of a chat: the messages' tokens plus what a chat template adds
 * (role markers per message and the assistant header at the end).
 */
export function countChatTokens(messages: readonly { role?: unknown; content?: unknown }[]): number {
  let total = 3;
  for (const message of messages) total += 4 + countTokens(contentText(message.content));
  return total;
}

export interface PlannedOutput {
  tokens: string[];
  /** `length` when `max_tokens` cut the natural answer, else `stop`. */
  finishReason: "stop" | "length";
}

export interface GenerateInput {
  /** The rendered prompt: the same prompt gives the same answer. */
  prompt: string;
  engineSeed: number;
  requestSeed?: number | undefined;
  choiceIndex: number;
  maxTokens?: number | undefined;
  minTokens?: number | undefined;
  ignoreEos?: boolean | undefined;
  /** After a level-2 wake without `reload_weights` the weights are garbage, so is the text. */
  garbage?: boolean | undefined;
}

/** The whole answer for one choice, decided up front so it can be streamed token by token. */
export function planOutput(input: GenerateInput): PlannedOutput {
  const seed = hashString(
    `${input.requestSeed ?? ""}|${input.choiceIndex}|${input.prompt}`,
    input.engineSeed,
  );
  const random = createRandom(seed);
  const span = naturalLengthRange.max - naturalLengthRange.min + 1;
  let natural = naturalLengthRange.min + Math.floor(random() * span);
  if (input.minTokens !== undefined) natural = Math.max(natural, input.minTokens);
  let length = natural;
  let finishReason: PlannedOutput["finishReason"] = "stop";
  if (input.maxTokens !== undefined && (input.ignoreEos || input.maxTokens < natural)) {
    length = input.maxTokens;
    finishReason = "length";
  }
  const tokens: string[] = [];
  let sentenceStart = true;
  for (let i = 0; i < length; i++) {
    if (input.garbage) {
      tokens.push(garbageToken);
      continue;
    }
    // A sentence ends now and then, and always on the last token of a natural stop.
    const last = i === length - 1;
    if (!sentenceStart && (random() < 0.12 || (last && finishReason === "stop"))) {
      tokens.push(".");
      sentenceStart = true;
      continue;
    }
    const word = words[Math.floor(random() * words.length)]!;
    const text = sentenceStart ? word[0]!.toUpperCase() + word.slice(1) : word;
    tokens.push(i === 0 ? text : ` ${text}`);
    sentenceStart = false;
  }
  return { tokens, finishReason };
}
