import { brotliCompressSync, gzipSync } from "node:zlib";
import { describe, expect, test } from "vitest";
import { engineErrorAnswer, engineErrorEvent, errorBodyText, readableCoding } from "./engine-error.ts";

const event = (status: number, body: string) => JSON.parse(engineErrorEvent(status, body));

describe("an engine's error answer as the data of an SSE event", () => {
  test("vLLM's own shape passes as the engine wrote it", () => {
    const body =
      '{"error":{"message":"max_tokens is too large","type":"BadRequestError","param":"max_tokens","code":400}}';
    expect(event(400, body)).toEqual(JSON.parse(body));
  });

  test("older vLLM's flat error keeps its message, type, param and code", () => {
    const body =
      '{"object":"error","message":"The model `x` does not exist.","type":"NotFoundError","param":null,"code":404}';
    expect(event(404, body)).toEqual({
      error: { message: "The model `x` does not exist.", type: "NotFoundError", param: null, code: "404" },
    });
  });

  test("FastAPI's detail and a plain-text 500 become an engine_error with the status and the words", () => {
    expect(event(404, '{"detail":"Not Found"}')).toEqual({
      error: {
        message: "The engine answered 404: Not Found.",
        type: "invalid_request_error",
        code: "engine_error",
        param: null,
      },
    });
    expect(event(422, '{"detail":[{"loc":["body","messages"],"msg":"field required"}]}').error.message).toBe(
      'The engine answered 422: [{"loc":["body","messages"],"msg":"field required"}].',
    );
    expect(event(500, "Internal Server Error\n")).toEqual({
      error: {
        message: "The engine answered 500: Internal Server Error.",
        type: "server_error",
        code: "engine_error",
        param: null,
      },
    });
  });

  test("an empty body, JSON that is not an object, and a long text are told too, the text clipped", () => {
    expect(event(503, "").error.message).toBe("The engine answered 503.");
    expect(event(400, "[1,2]").error.message).toBe("The engine answered 400: [1,2].");
    const long = event(502, "x".repeat(5_000)).error.message as string;
    expect(long.length).toBeLessThan(1_100);
    expect(long).toMatch(/^The engine answered 502: x+…\.$/);
  });
});

describe("an engine's error answer passed on as the answer", () => {
  test("vLLM's own shape is left untouched (undefined: pass the bytes as they came)", () => {
    expect(engineErrorAnswer(400, '{"error":{"message":"bad","code":400}}')).toBeUndefined();
  });

  test("any other gets an `error` object beside the engine's own fields; text becomes the error alone", () => {
    expect(JSON.parse(engineErrorAnswer(404, '{"detail":"Not Found"}')!)).toEqual({
      detail: "Not Found",
      error: {
        message: "The engine answered 404: Not Found.",
        type: "invalid_request_error",
        param: null,
        code: "engine_error",
      },
    });
    expect(JSON.parse(engineErrorAnswer(500, "Internal Server Error")!)).toEqual({
      error: {
        message: "The engine answered 500: Internal Server Error.",
        type: "server_error",
        param: null,
        code: "engine_error",
      },
    });
  });
});

describe("what engines send at the edges (found by an outside tester)", () => {
  test("a body nested too deep to write again is told by its words, in a stream as in an answer", () => {
    const deep = `{"detail":${"[".repeat(10_000)}${"]".repeat(10_000)}}`;
    expect(event(400, deep).error.code).toBe("engine_error");
    expect(JSON.parse(engineErrorAnswer(400, deep)!).error.code).toBe("engine_error");
  });

  test("an empty message is no message; a long one is clipped, never inside an emoji", () => {
    expect(event(400, '{"message":""}').error.message).toBe('The engine answered 400: {"message":""}.');
    const long = event(500, `a${"😀".repeat(2_000)}`).error.message as string;
    expect(long.isWellFormed()).toBe(true);
  });

  test("a compressed error body is read; a corrupt one, or a coding not known, is not", () => {
    const gzipped = gzipSync('{"detail":"x"}');
    expect(errorBodyText(gzipped, "gzip")).toBe('{"detail":"x"}');
    expect(errorBodyText(brotliCompressSync("y"), "br")).toBe("y");
    expect(errorBodyText(Buffer.from("not gzip"), "gzip")).toBeUndefined();
    expect(readableCoding("compress")).toBe(false);
    expect(errorBodyText(gzipSync("z".repeat(1 << 20)), "gzip")).toBeUndefined();
    // An empty body is empty, whatever its coding says.
    expect(errorBodyText(Buffer.alloc(0), "gzip")).toBe("");
  });

  test("TGI's error, a string with its `error_type` beside it, keeps its words and type, not the body's JSON text (found by an outside tester)", () => {
    const body =
      '{"error":"Input validation error: `max_new_tokens` must be <= 4096","error_type":"validation"}';
    const expected = {
      message: "The engine answered 422: Input validation error: `max_new_tokens` must be <= 4096.",
      type: "validation",
      code: "engine_error",
      param: null,
    };
    expect(JSON.parse(engineErrorAnswer(422, body)!)).toEqual({ error: expected, error_type: "validation" });
    expect(event(422, body)).toEqual({ error: expected });
  });

  test("an `error` that is not an object is replaced, not written twice (found by an outside tester)", () => {
    const answer = engineErrorAnswer(400, '{"error":"just a string","id":1}')!;
    expect(answer.match(/"error"/g)).toHaveLength(1);
    expect(JSON.parse(answer)).toMatchObject({ id: 1, error: { code: "engine_error" } });
  });
});
