/**
 * What an engine's output says of why it failed, for the error a failed start, an exit or a start
 * timeout carries: its last three lines, and before them the nearest exception stated earlier when
 * the three state none (Python's resource tracker warns after the traceback) or point above it.
 * vLLM ends a failed start with `RuntimeError: Engine core initialization failed. See root cause
 * above.`, its cause (`torch.OutOfMemoryError: CUDA out of memory …`) ending the engine core's
 * traceback before it: three lines alone lost the cause (found by an outside tester).
 */
export function failureWords(output: readonly string[]): string {
  const last = output.slice(-3);
  const told = last.join(" | ");
  const pointsAbove = last.some((line) => /root cause above/i.test(line));
  if (last.some(statesException) && !pointsAbove) return told;
  const cause = output.slice(-causeWindow, -3).findLast(statesException);
  return cause ? `${cause} … | ${told}` : told;
}

/** How far back, in lines, the cause is looked for: about one traceback and what follows it. */
const causeWindow = 100;

/**
 * A line stating an exception: its class (`…Error`, `…Exception`), a colon, the message. The class
 * may be the bare base class: Python's `raise Exception(…)`, and what Node and Rust's `anyhow` print
 * as a program's fatal error (`Error: listen EADDRINUSE: …`, followed by more than three lines of
 * stack and details). Found by a probe: an engine that could not bind its port was told as
 * `engine exited (code 1):   port: 48120 | } | Node.js v24.21.0`, its cause left out.
 */
export function statesException(line: string): boolean {
  return /(?:^|[\s\]:|])(?:[A-Za-z_][\w.]*)?(?:Error|Exception): \S/.test(line);
}
