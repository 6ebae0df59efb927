/**
 * `tools` and `tool_choice` of a chat request, as vLLM 0.33 reads them: tools given without a
 * `tool_choice` mean `auto`. Without a tool parser (`--enable-auto-tool-choice` with
 * `--tool-call-parser`) every choice but `none` is refused; with one, the choice and the tools
 * are what the simulated model calls from (tool-call.ts). The request's own consistency (an
 * empty list, a choice without tools, a named tool that is not listed) is checked first, on the
 * raw body, as vLLM's `check_tool_usage` does before the fields are read.
 */
import { pythonTruthy } from "./python-truthy.ts";
import type { ToolUse } from "./tool-call.ts";
import { badRequest, invalidParameter, type VllmHttpError } from "./vllm-error.ts";

const correctUsage = 'Correct usage: `{"type": "function", "function": {"name": "my_function"}}`';

/** vLLM's `check_tool_usage`: the tool choice this body means, or its 400. */
export function checkToolUsage(body: Record<string, unknown>): unknown {
  const tools = body.tools;
  if (Array.isArray(tools) && tools.length === 0)
    throw invalidParameter(
      "`tools` must not be an empty array. Either provide at least one tool or omit the field entirely.",
      "tools",
    );
  const toolChoice = "tool_choice" in body ? body.tool_choice : pythonTruthy(tools) ? "auto" : "none";
  if (toolChoice === "none" || toolChoice === null || toolChoice === undefined) return toolChoice;
  if (tools === undefined || tools === null)
    throw invalidParameter("When using `tool_choice`, `tools` must be set.", "tool_choice");
  const named = !!toolChoice && typeof toolChoice === "object" && !Array.isArray(toolChoice);
  if (toolChoice !== "auto" && toolChoice !== "required" && !named)
    throw invalidParameter(
      `Invalid value for \`tool_choice\`: ${pythonText(toolChoice)}! ` +
        'Only named tools, "none", "auto" or "required" are supported.',
      "tool_choice",
    );
  if (!named) return toolChoice;
  const fn = (toolChoice as { function?: unknown }).function;
  if (!fn || typeof fn !== "object" || Array.isArray(fn))
    throw invalidParameter(
      `Invalid value for \`function\`: \`${pythonText(fn)}\` in \`tool_choice\`! ${correctUsage}`,
      "tool_choice.function",
    );
  if (!("name" in fn))
    throw invalidParameter(
      `Expected field \`name\` in \`function\` in \`tool_choice\`! ${correctUsage}`,
      "tool_choice.function.name",
    );
  const name = (fn as { name: unknown }).name;
  if (typeof name !== "string" || name === "")
    throw invalidParameter(
      `Invalid \`name\` in \`function\`: \`${pythonText(name)}\` in \`tool_choice\`! ${correctUsage}`,
      "tool_choice.function.name",
    );
  const listed = Array.isArray(tools) && tools.some((tool) => tool?.function?.name === name);
  if (!listed)
    throw invalidParameter(
      "The tool specified in `tool_choice` does not match any of the specified `tools`",
      "tool_choice",
    );
  return toolChoice;
}

/**
 * The tools a checked tool choice may call, or undefined when none may be (`none`, no tools).
 * The body's `messages` tell whether the conversation ends with a tool's result.
 */
export function toolUse(body: Record<string, unknown>, toolChoice: unknown): ToolUse | undefined {
  if (toolChoice === "none" || toolChoice === null || toolChoice === undefined) return undefined;
  const tools = (Array.isArray(body.tools) ? body.tools : []).flatMap((tool) => {
    const fn = (tool as { function?: { name?: unknown; parameters?: unknown } } | null)?.function;
    return typeof fn?.name === "string" ? [{ name: fn.name, parameters: fn.parameters }] : [];
  });
  const last = Array.isArray(body.messages) ? (body.messages.at(-1) as { role?: unknown } | null) : null;
  const choice =
    toolChoice === "auto" || toolChoice === "required"
      ? toolChoice
      : { name: (toolChoice as { function: { name: string } }).function.name };
  return { choice, tools, afterToolResult: last?.role === "tool" };
}

/**
 * What vLLM answers, while rendering the chat, for a tool choice it has no parser for: its tool
 * parser exists only with both `--enable-auto-tool-choice` and `--tool-call-parser`, so even a
 * named or `required` choice (served through structured output) needs both.
 */
export function unparsedToolChoice(toolChoice: unknown): VllmHttpError | undefined {
  if (toolChoice === null || toolChoice === undefined || toolChoice === "none") return undefined;
  if (toolChoice === "auto")
    return badRequest(
      '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
    );
  const described =
    typeof toolChoice === "string"
      ? `"${toolChoice}"`
      : `function "${(toolChoice as { function: { name: string } }).function.name}"`;
  return badRequest(`tool_choice=${described} requires --tool-call-parser to be set`);
}

/** A JSON value as Python's `str` prints it, near enough for a message. */
function pythonText(value: unknown): string {
  if (value === null || value === undefined) return "None";
  if (value === true) return "True";
  if (value === false) return "False";
  if (typeof value === "string" || typeof value === "number") return String(value);
  return JSON.stringify(value).replaceAll('"', "'");
}
