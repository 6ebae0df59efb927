/**
 * A chat's `messages` list as vLLM's schema checks it, for every route that takes one (chat
 * completions, `/tokenize`): each message must be an object with a string `role`. The issues
 * are the simplified pydantic ones the simulator reports, under `loc` (the list's place).
 */
import type { SchemaIssue } from "./vllm-error.ts";

export function messageIssues(messages: readonly unknown[], loc: string): SchemaIssue[] {
  const issues: SchemaIssue[] = [];
  messages.forEach((message, i) => {
    if (!message || typeof message !== "object" || Array.isArray(message))
      issues.push({
        type: "dict_type",
        loc: `${loc}.${i}`,
        msg: "Input should be a valid dictionary",
        input: message,
      });
    else if (typeof (message as { role?: unknown }).role !== "string")
      issues.push({ type: "missing", loc: `${loc}.${i}.role`, msg: "Field required", input: message });
  });
  return issues;
}
