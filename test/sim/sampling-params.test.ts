import OpenAI from "openai";
import { describe, expect, test } from "vitest";
import { pythonFloat } from "../../hack/sim/lax-float.ts";
import { laxInt } from "../../hack/sim/lax-int.ts";
import { post, postJson, sim } from "./helpers.ts";

const messages = [{ role: "user" as const, content: "hi" }];

/** A raw JSON body, so numbers are sent exactly as written (`1e308`, not what JSON.stringify makes of it). */
async function postRaw(base: string, route: string, body: string) {
  const response = await post(base, route, undefined, {
    body,
    headers: { "content-type": "application/json" },
  });
  return { status: response.status, json: (await response.json()) as any };
}

describe("sampling parameters are checked as vLLM checks them", () => {
  test("a huge n is vLLM's 400, never a 500: past 64 bits as a float it is the schema's, else past VLLM_MAX_N_SEQUENCES", async () => {
    const engine = await sim();
    const client = new OpenAI({ baseURL: `${engine.url}/v1`, apiKey: "none", maxRetries: 0 });
    for (const create of [
      () => client.chat.completions.create({ model: "sim-model", messages, n: 1e308 }),
      () => client.completions.create({ model: "sim-model", prompt: "hi", n: 1e308 }),
    ]) {
      const error = await create().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(OpenAI.BadRequestError);
      const { status, error: body } = error as InstanceType<typeof OpenAI.BadRequestError>;
      expect(status).toBe(400);
      expect(body).toEqual({
        message:
          "1 validation error:\n  {'type': 'int_parsing_size', 'loc': 'body.n', 'msg': 'Unable to parse input string as an integer, exceeded maximum size', 'input': 1e+308}",
        type: "Bad Request",
        param: "body.n",
        code: 400,
      });
    }
    const tooMany = await postJson(engine.url, "/v1/completions", { prompt: "hi", n: 16_385 });
    expect(tooMany).toEqual({
      status: 400,
      json: {
        error: {
          message:
            "n must be at most 16384, got 16385. To increase this limit, set the VLLM_MAX_N_SEQUENCES environment variable.",
          type: "BadRequestError",
          param: null,
          code: 400,
        },
      },
    });
    // Written as digits, Python reads an int of any size: the schema takes it, the limit refuses it.
    const digits = await postRaw(engine.url, "/v1/completions", '{"prompt":"hi","n":100000000000000000000}');
    expect(digits.status).toBe(400);
    expect(digits.json.error.message).toMatch(/^n must be at most 16384, got 100000000000000000000\. /);
    const infinite = await postRaw(engine.url, "/v1/chat/completions", `{"messages":[],"max_tokens":1e400}`);
    expect(infinite.status).toBe(400);
    expect(infinite.json.error.message).toContain(
      "{'type': 'finite_number', 'loc': 'body.max_tokens', 'msg': 'Input should be a finite number', 'input': inf}",
    );
    const seed = await postRaw(engine.url, "/v1/completions", '{"prompt":"hi","seed":9223372036854775808}');
    expect(seed.json.error).toMatchObject({ type: "Bad Request", param: "body.seed" });
    expect(seed.json.error.message).toContain("'type': 'less_than_equal'");
    expect(seed.json.error.message).toContain("'ctx': {'le': 9223372036854775807}");
  });

  test("values sampling cannot use are a 400 BadRequestError with vLLM's message, in vLLM's order", async () => {
    const engine = await sim();
    const client = new OpenAI({ baseURL: `${engine.url}/v1`, apiKey: "none", maxRetries: 0 });
    const refused = async (extra: Record<string, unknown>) => {
      const error = await client.chat.completions
        .create({ model: "sim-model", messages, max_tokens: 4, ...extra } as never)
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(error, JSON.stringify(extra)).toBeInstanceOf(OpenAI.BadRequestError);
      return (error as InstanceType<typeof OpenAI.BadRequestError>).error as Record<string, unknown>;
    };
    expect(await refused({ temperature: -1 })).toEqual({
      message: "temperature must be non-negative, got -1.0. (parameter=temperature, value=-1.0)",
      type: "BadRequestError",
      param: "temperature",
      code: 400,
    });
    expect(await refused({ temperature: 2.5 })).toMatchObject({
      message: "temperature must be in [0, 2], got 2.5. (parameter=temperature, value=2.5)",
      param: "temperature",
    });
    expect(await refused({ top_p: 0 })).toMatchObject({
      message: "top_p must be in (0, 1], got 0.0. (parameter=top_p, value=0.0)",
      param: "top_p",
    });
    expect(await refused({ presence_penalty: 3 })).toMatchObject({
      message: "presence_penalty must be in [-2, 2], got 3.0.",
      param: null,
    });
    expect(await refused({ frequency_penalty: -2.5 })).toMatchObject({
      message: "frequency_penalty must be in [-2, 2], got -2.5.",
    });
    expect(await refused({ repetition_penalty: 0 })).toMatchObject({
      message: "repetition_penalty must be greater than zero, got 0.0.",
    });
    expect(await refused({ top_k: -2 })).toMatchObject({
      message: "top_k must be 0 (disable), or at least 1, got -2.",
    });
    expect(await refused({ min_p: 1.5 })).toMatchObject({ message: "min_p must be in [0, 1], got 1.5." });
    expect(await refused({ min_tokens: 5 })).toMatchObject({
      message: "min_tokens must be less than or equal to max_tokens=4, got 5.",
    });
    expect(await refused({ stop: ["end", ""] })).toMatchObject({
      message: "stop cannot contain an empty string.",
    });
    // n comes first in vLLM's checks, then the penalties, then temperature.
    expect(await refused({ n: 0, temperature: -1 })).toMatchObject({
      message: "n must be at least 1, got 0.",
    });
    expect(await refused({ presence_penalty: 9, temperature: -1 })).toMatchObject({
      message: "presence_penalty must be in [-2, 2], got 9.0.",
    });
    // A value that is not a number at all is the schema's, named by its place in the body.
    const hot = await postJson(engine.url, "/v1/completions", { prompt: "hi", temperature: "hot" });
    expect(hot.json.error).toMatchObject({ type: "Bad Request", param: "body.temperature" });
    expect(hot.json.error.message).toContain("'type': 'float_parsing'");

    // Values vLLM takes are served: greedy, edges of each range, numbers as strings.
    for (const extra of [
      { temperature: 0, top_p: 1, top_k: -1, min_p: 0 },
      { temperature: 2, presence_penalty: -2, frequency_penalty: 2, repetition_penalty: 1.2 },
      { temperature: "0.7", top_k: "40", min_tokens: 4, stop: ["x"] },
    ]) {
      const answer = await client.chat.completions.create({
        model: "sim-model",
        messages,
        max_tokens: 4,
        ...extra,
      } as never);
      expect(answer.choices).toHaveLength(1);
    }
  });
});

describe("prompt_logprobs are checked as vLLM checks them", () => {
  test("not with a stream, not below -1, not past the limit, an integer: each a 400 naming it", async () => {
    const engine = await sim();
    for (const route of ["/v1/chat/completions", "/v1/completions"]) {
      const body = (extra: Record<string, unknown>) =>
        route === "/v1/completions"
          ? { prompt: "hi", max_tokens: 2, ...extra }
          : { messages, max_tokens: 2, ...extra };
      const cases: [Record<string, unknown>, string][] = [
        [
          { prompt_logprobs: 1, stream: true },
          "`prompt_logprobs` are not available when `stream=True`. (parameter=prompt_logprobs)",
        ],
        [
          { prompt_logprobs: -2 },
          "`prompt_logprobs` must be a positive value or -1. (parameter=prompt_logprobs, value=-2)",
        ],
        [
          { prompt_logprobs: "two" },
          "`prompt_logprobs` must be an integer. (parameter=prompt_logprobs, value=two)",
        ],
        [
          { prompt_logprobs: 21 },
          "Requested prompt logprobs of 21, which is greater than max allowed: 20 (parameter=prompt_logprobs, value=21)",
        ],
      ];
      for (const [extra, message] of cases) {
        const { status, json } = await postJson(engine.url, route, body(extra));
        expect(status, `${route} ${JSON.stringify(extra)}`).toBe(400);
        expect(json.error).toEqual({ message, type: "BadRequestError", param: "prompt_logprobs", code: 400 });
      }
      // Within the limit it is served (the simulator does not make up prompt logprobs: null).
      const served = await post(engine.url, route, body({ prompt_logprobs: 0, stream: true }));
      expect(served.status).toBe(200);
      await served.text();
      expect((await postJson(engine.url, route, body({ prompt_logprobs: 5 }))).status).toBe(200);
    }
  });
});

describe("logit_bias as vLLM reads it", () => {
  test("keys are token ids: one that is not an integer, or outside the vocabulary, is vLLM's 400", async () => {
    const engine = await sim();
    const client = new OpenAI({ baseURL: `${engine.url}/v1`, apiKey: "none", maxRetries: 0 });
    const refused = async (logitBias: Record<string, number>) => {
      const error = await client.chat.completions
        .create({ model: "sim-model", messages, max_tokens: 2, logit_bias: logitBias })
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(error, JSON.stringify(logitBias)).toBeInstanceOf(OpenAI.BadRequestError);
      return (error as InstanceType<typeof OpenAI.BadRequestError>).error;
    };
    expect(await refused({ "12": 5, abc: 1, "1.5": 2 })).toEqual({
      message:
        "logit_bias contains key(s) that cannot be converted to integer token IDs: ['abc', '1.5'] " +
        "(parameter=logit_bias, value=['abc', '1.5'])",
      type: "BadRequestError",
      param: "logit_bias",
      code: 400,
    });
    expect(await refused({ "50256": -100, "-1": 1 })).toEqual({
      message:
        "token_id(s) [50256, -1] in logit_bias contain out-of-vocab token ids. Vocabulary size: 32000 " +
        "(parameter=logit_bias, value=[50256, -1])",
      type: "BadRequestError",
      param: "logit_bias",
      code: 400,
    });
    const notNumber = await postJson(engine.url, "/v1/completions", {
      prompt: "hi",
      logit_bias: { "5": "lots" },
    });
    expect(notNumber.json.error).toMatchObject({ type: "Bad Request", param: "body.logit_bias.5" });
    expect(notNumber.json.error.message).toContain("'type': 'float_parsing'");
    const notDict = await postJson(engine.url, "/v1/completions", { prompt: "hi", logit_bias: [1] });
    expect(notDict.json.error).toMatchObject({ type: "Bad Request", param: "body.logit_bias" });
    // Ids in the vocabulary, written as Python's int() reads them, are served.
    const served = await client.completions.create({
      model: "sim-model",
      prompt: "hi",
      max_tokens: 2,
      logit_bias: { "5": 100, " 31999 ": -100, "1_0": 1 },
    });
    expect(served.choices).toHaveLength(1);
  });
});

describe("the Responses API checks temperature and top_p as vLLM's sampling parameters do", () => {
  test("out of range is a 400 naming the parameter; in range, or as a numeric string, is served and echoed", async () => {
    const engine = await sim();
    const client = new OpenAI({ baseURL: `${engine.url}/v1`, apiKey: "none", maxRetries: 0 });
    const error = await client.responses.create({ model: "sim-model", input: "hi", temperature: -0.5 }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect((error as InstanceType<typeof OpenAI.BadRequestError>).error).toMatchObject({
      message: "temperature must be non-negative, got -0.5. (parameter=temperature, value=-0.5)",
      param: "temperature",
    });
    const topP = await postJson(engine.url, "/v1/responses", { input: "hi", top_p: 1.5 });
    expect(topP.status).toBe(400);
    expect(topP.json.error.param).toBe("top_p");
    const served = await postJson(engine.url, "/v1/responses", {
      input: "hi",
      temperature: "0.5",
      top_p: 0.9,
      max_output_tokens: 2,
    });
    expect(served.status).toBe(200);
    expect(served.json).toMatchObject({ temperature: 0.5, top_p: 0.9 });
  });
});

describe("numbers as pydantic and Python read them", () => {
  test("a float taken as an integer only when whole and within 64 bits; an int literal of any size", () => {
    expect(laxInt(3.0, true)).toEqual({ ok: true, value: 3 });
    expect(laxInt(2 ** 62, true)).toEqual({ ok: true, value: 2 ** 62 });
    expect(laxInt(2 ** 63, true)).toMatchObject({ ok: false, type: "int_parsing_size" });
    expect(laxInt(-(2 ** 63), true)).toMatchObject({ ok: false, type: "int_parsing_size" });
    expect(laxInt(2 ** 63, false)).toEqual({ ok: true, value: 2 ** 63 });
    expect(laxInt(Number.POSITIVE_INFINITY, true)).toMatchObject({ ok: false, type: "finite_number" });
  });

  test("floats are shown as Python's repr shows them", () => {
    expect(
      [-1, 0, 0.5, 1e-7, 2.5e-5, 1e16, 1e20, 123.25, Number.POSITIVE_INFINITY, Number.NaN].map(pythonFloat),
    ).toEqual(["-1.0", "0.0", "0.5", "1e-07", "2.5e-05", "1e+16", "1e+20", "123.25", "inf", "nan"]);
  });
});
