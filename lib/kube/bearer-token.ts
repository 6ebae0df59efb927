/**
 * What keeps `token` from being sent as `Authorization: Bearer <token>`, in words that never show
 * the token, or undefined when it can be sent. A header value carries visible ASCII and spaces
 * only; fetch refuses anything else with an error that quotes the whole header, and that error
 * was logged at every retry: a kubeconfig token pasted with a line break (a YAML `|` block keeps
 * one), or a token file holding one inside, put the cluster credential into the components' logs
 * (found by an outside tester).
 */
export function bearerTokenProblem(token: string): string | undefined {
  for (let i = 0; i < token.length; i++) {
    const code = token.charCodeAt(i);
    if (code >= 0x20 && code <= 0x7e) continue;
    const what =
      code === 0x0a || code === 0x0d
        ? "a line break"
        : code === 0x09
          ? "a tab"
          : code < 0x20 || code === 0x7f
            ? "a control character"
            : "a character outside ASCII";
    return `holds ${what} at character ${i + 1} of ${token.length}, which an HTTP header cannot carry (the token is not shown)`;
  }
  return undefined;
}
