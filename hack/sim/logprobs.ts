/**
 * Log probabilities of generated tokens, shaped as vLLM returns them: chat's
 * `{content: [{token, logprob, bytes, top_logprobs: [...]}]}` and the legacy
 * completions' `{text_offset, token_logprobs, tokens, top_logprobs: [{token: logprob}]}`.
 * The simulator samples greedily in spirit: the token it emits is always the most likely, and
 * the alternatives are other words, less likely. Values are deterministic and cheap: made only
 * when a request asks for them.
 */

const alternatives = ["the", " a", " and", " of", ",", ".", " to", " in", " is", " it", " that", " for"];

/** vLLM's default `--max-logprobs`. */
export const maxLogprobs = 20;

/** The vocabulary a `-1` ("all of them") asks for, which vLLM refuses past `--max-logprobs`. */
export const simVocabSize = 32_000;

interface Candidate {
  token: string;
  logprob: number;
}

/** The emitted token first, then `count - 1` less likely ones (vLLM's order: sampled first). */
export function candidates(token: string, position: number, count: number): Candidate[] {
  // A small, position-dependent logprob for the emitted token, as a confident model gives.
  const top = -((((position + 1) * 2_654_435_761) >>> 0) % 1_000) / 2_000;
  const list: Candidate[] = [{ token, logprob: top }];
  for (let i = 0; list.length < count && i < alternatives.length; i++) {
    const alternative = alternatives[(position + i) % alternatives.length]!;
    if (alternative === token) continue;
    list.push({ token: alternative, logprob: top - 1.5 * list.length });
  }
  return list;
}

const bytes = (text: string) => [...Buffer.from(text, "utf8")];

/** One chat `logprobs.content` entry; `top` candidates listed (0: none, as vLLM's default). */
export function chatLogprob(token: string, position: number, top: number) {
  const list = candidates(token, position, Math.max(top, 1));
  return {
    token,
    logprob: list[0]!.logprob,
    bytes: bytes(token),
    top_logprobs: list.slice(0, top).map((candidate) => ({ ...candidate, bytes: bytes(candidate.token) })),
  };
}

/**
 * Completions' logprobs of `tokens`, the first starting at character `offset`; `top` + 1
 * candidates each. `prompt`: the pieces of an echoed prompt, listed first as vLLM lists its prompt
 * logprobs (the prompt's first token has none: `null` in both lists).
 */
export function completionLogprobs(
  tokens: readonly string[],
  firstPosition: number,
  offset: number,
  top: number,
  prompt: readonly string[] = [],
) {
  const textOffset: number[] = [];
  const tokenLogprobs: (number | null)[] = [];
  const topLogprobs: (Record<string, number> | null)[] = [];
  let at = offset;
  prompt.forEach((piece, i) => {
    textOffset.push(at);
    at += piece.length;
    const list = i === 0 ? undefined : candidates(piece, i, top + 1);
    tokenLogprobs.push(list ? list[0]!.logprob : null);
    topLogprobs.push(
      list ? Object.fromEntries(list.map((candidate) => [candidate.token, candidate.logprob])) : null,
    );
  });
  tokens.forEach((token, i) => {
    const list = candidates(token, firstPosition + i, top + 1);
    textOffset.push(at);
    at += token.length;
    tokenLogprobs.push(list[0]!.logprob);
    topLogprobs.push(Object.fromEntries(list.map((candidate) => [candidate.token, candidate.logprob])));
  });
  return {
    text_offset: textOffset,
    token_logprobs: tokenLogprobs,
    tokens: [...prompt, ...tokens],
    top_logprobs: topLogprobs,
  };
}
