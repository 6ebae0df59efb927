/**
 * The tool call a simulated model makes, for an engine served with `--enable-auto-tool-choice`
 * and `--tool-call-parser` (vLLM's tool parser then turns the model's markup into `tool_calls`).
 * A pure decision, so the same request and seeds make the same call:
 * - `auto` calls a tool unless the conversation ends with a tool's result, so a client's agent
 *   loop (call, run the tool, send its result) ends with a text answer;
 * - `required` always calls one; a named tool choice calls that tool;
 * - the tool is picked by the seed among those listed, its arguments are an instance of its
 *   `parameters` schema, as structured output writes one (json-output.ts).
 * The call is one token for its opening (the parser's markup and the name), then the arguments'
 * tokens, so `max_tokens` cuts the arguments as it cuts text (`finish_reason: "length"`).
 */
import { planJson } from "./json-output.ts";
import type { PlannedOutput } from "./text.ts";

export interface ToolUse {
  /** `auto`, `required`, or the one tool a named choice asks for. */
  choice: "auto" | "required" | { name: string };
  tools: readonly { name: string; parameters: unknown }[];
  /** The last message is a tool's result (role `tool`). */
  afterToolResult: boolean;
}

/** A call's tokens join to its arguments; the first, the call's opening, has no text of them. */
export interface ToolCallPlan extends PlannedOutput {
  name: string;
}

/** The call to make, `maxTokens` at most, or undefined when the model answers in text. */
export function planToolCall(use: ToolUse, seed: number, maxTokens: number): ToolCallPlan | undefined {
  if (use.choice === "auto" && use.afterToolResult) return undefined;
  const tool =
    typeof use.choice === "object"
      ? use.tools.find((t) => t.name === (use.choice as { name: string }).name)
      : use.tools[seed % use.tools.length];
  if (!tool) return undefined;
  // A function without parameters takes an empty object, as clients send it.
  const schema = tool.parameters ?? { type: "object", properties: {} };
  const args = planJson({ kind: "schema", schema }, seed, maxTokens - 1);
  return { name: tool.name, tokens: ["", ...args.tokens], finishReason: args.finishReason };
}

/**
 * A finished call's `finish_reason`, as vLLM (and OpenAI) report it: `tool_calls` for `auto` and
 * `required`, but `stop` for a named tool; a call cut by `max_tokens` stays `length`.
 */
export function toolCallFinishReason(choice: ToolUse["choice"], finishReason: string): string {
  return finishReason === "stop" && typeof choice === "string" ? "tool_calls" : finishReason;
}

/**
 * The message `content` beside a call: vLLM's parser finds no text before an `auto` call (null),
 * while `required` and named choices, served through structured output, give "".
 */
export function toolCallContent(choice: ToolUse["choice"]): string | null {
  return choice === "auto" ? null : "";
}
