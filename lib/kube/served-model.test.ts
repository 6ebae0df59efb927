import { describe, expect, test } from "vitest";
import { servedModelOf } from "./served-model.ts";

describe("servedModelOf", () => {
  test("the first --served-model-name, in either form", () => {
    expect(
      servedModelOf({ args: ["Qwen/Qwen3-0.6B", "--served-model-name", "qwen", "chat", "--port", "8080"] }),
    ).toBe("qwen");
    expect(servedModelOf({ args: ["Qwen/Qwen3-0.6B", "--served-model-name=qwen"] })).toBe("qwen");
  });
  test("else the model: --model, the positional after serve, or the image's first arg", () => {
    expect(servedModelOf({ args: ["--model", "Qwen/Qwen3-0.6B", "--port", "8080"] })).toBe("Qwen/Qwen3-0.6B");
    expect(servedModelOf({ command: ["vllm", "serve", "Qwen/Qwen3-0.6B"], args: ["--port", "8080"] })).toBe(
      "Qwen/Qwen3-0.6B",
    );
    expect(servedModelOf({ args: ["Qwen/Qwen3-0.6B", "--enable-sleep-mode"] })).toBe("Qwen/Qwen3-0.6B");
  });
  test("nothing to read: undefined (a flag's value is never taken for the model)", () => {
    expect(servedModelOf(undefined)).toBeUndefined();
    expect(servedModelOf({ args: ["--port", "8080"] })).toBeUndefined();
    expect(servedModelOf({ command: ["python", "-m", "server"], args: ["x"] })).toBeUndefined();
    expect(servedModelOf({ args: ["--served-model-name", "--port"] })).toBeUndefined();
  });
});
