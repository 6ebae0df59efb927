import { expect, test } from "vitest";
import { planToolCall, type ToolUse, toolCallContent, toolCallFinishReason } from "./tool-call.ts";

const tools = [
  { name: "a", parameters: { type: "object", properties: { q: { type: "string" } } } },
  { name: "b", parameters: undefined },
];
const use = (choice: ToolUse["choice"], afterToolResult = false): ToolUse => ({
  choice,
  tools,
  afterToolResult,
});

test("auto calls a tool picked by the seed, unless the last message is a tool's result", () => {
  expect(planToolCall(use("auto"), 0, 100)?.name).toBe("a");
  expect(planToolCall(use("auto"), 1, 100)?.name).toBe("b");
  expect(planToolCall(use("auto", true), 0, 100)).toBeUndefined();
  expect(planToolCall(use("required", true), 1, 100)?.name).toBe("b");
  expect(planToolCall(use({ name: "a" }, true), 1, 100)?.name).toBe("a");
});

test("the tokens are the call's opening, then the arguments; max_tokens cuts them", () => {
  const whole = planToolCall(use("auto"), 0, 100)!;
  expect(whole.tokens[0]).toBe("");
  expect(JSON.parse(whole.tokens.join(""))).toEqual({ q: "stone" });
  expect(whole.finishReason).toBe("stop");
  expect(planToolCall(use({ name: "b" }), 0, 100)!.tokens.join("")).toBe("{}");
  expect(planToolCall(use("auto"), 0, 3)).toEqual({
    name: "a",
    tokens: ["", "{", '"'],
    finishReason: "length",
  });
  expect(planToolCall(use("auto"), 0, 1)).toEqual({ name: "a", tokens: [""], finishReason: "length" });
});

test("finish_reason and content beside a call, as vLLM reports them", () => {
  expect(toolCallFinishReason("auto", "stop")).toBe("tool_calls");
  expect(toolCallFinishReason("required", "stop")).toBe("tool_calls");
  expect(toolCallFinishReason({ name: "a" }, "stop")).toBe("stop");
  expect(toolCallFinishReason("auto", "length")).toBe("length");
  expect([toolCallContent("auto"), toolCallContent("required"), toolCallContent({ name: "a" })]).toEqual([
    null,
    "",
    "",
  ]);
});
