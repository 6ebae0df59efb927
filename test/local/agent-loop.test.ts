/**
 * An agent through Snooze: the openai SDK's `runTools` loop against a model that is cold when the
 * loop starts and asleep when its tool returns (a tool that runs longer than the model stays
 * awake). The first request is held through the start, the follow-up with the tool's result wakes
 * the model, and the loop ends with the model's text, streamed and not.
 */
import OpenAI from "openai";
import { zodFunction } from "openai/helpers/zod";
import { afterAll, beforeAll, expect, test } from "vitest";
import { z } from "zod";
import type { LocalSnooze } from "../../cli/local-snooze.ts";
import { simCommand, startWith, until } from "../helpers/local-snooze.ts";

let snooze: LocalSnooze;
beforeAll(async () => {
  snooze = await startWith(`
models:
  agent:
    command: ${simCommand(["--enable-sleep-mode", "--enable-auto-tool-choice", "--tool-call-parser", "hermes"])}
`);
});
afterAll(() => snooze.close(1_000));

const tier = async () =>
  ((await (await fetch(`${snooze.url}/v1/models/agent`)).json()) as { snooze: { tier: string } }).snooze.tier;

const Weather = z.object({ city: z.string(), unit: z.enum(["celsius", "fahrenheit"]) });

test.each([false, true])(
  "runTools (stream: %s): held through the start, the follow-up wakes the model",
  async (stream) => {
    // Each case starts from a stopped model: the loop's first request is held through a start.
    await fetch(`${snooze.url}/snooze/v1/models/agent/stop`, { method: "POST" });
    await until(async () => (await tier()) === "cold", 10_000, "agent stopped");

    const calls: z.infer<typeof Weather>[] = [];
    const tiersInTool: string[] = [];
    const tool = zodFunction({
      name: "get_weather",
      parameters: Weather,
      // The tool outlasts the model's wakefulness: the model is put to sleep while it runs.
      function: async (args) => {
        calls.push(args);
        tiersInTool.push(await tier());
        expect((await fetch(`${snooze.url}/snooze/v1/models/agent/sleep`, { method: "POST" })).status).toBe(
          200,
        );
        await until(async () => (await tier()) === "asleep-1", 10_000, "agent asleep");
        return { temperature: 21 };
      },
    });
    const openai = new OpenAI({ baseURL: `${snooze.url}/v1`, apiKey: "none", maxRetries: 0 });
    const params = {
      model: "agent",
      messages: [{ role: "user" as const, content: "What is the weather in Paris?" }],
      tools: [tool],
    };
    const runner = stream
      ? openai.chat.completions.runTools({ ...params, stream: true })
      : openai.chat.completions.runTools(params);
    const content = await runner.finalContent();

    expect(content).toBeTruthy();
    expect(calls).toHaveLength(1);
    expect(Weather.parse(calls[0])).toEqual(calls[0]);
    expect(tiersInTool).toEqual(["ready"]);
    // Two requests to the model: the call, then the answer after the tool's result.
    const assistant = runner.messages.filter((m) => m.role === "assistant");
    expect(assistant).toHaveLength(2);
    expect(assistant[0]).toMatchObject({ tool_calls: [{ function: { name: "get_weather" } }] });
    expect(await tier()).toBe("ready");
  },
);
