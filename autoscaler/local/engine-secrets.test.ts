import { expect, test } from "vitest";
import { EngineSecrets } from "./engine-secrets.ts";

test("the command shows no secret flag's value, also inside a shell's script; output lines lose every known secret", () => {
  const secrets = new EngineSecrets(
    ["serve", "m", "--api-key", "sekrit-1", "--hf-token=hf_0123", "--port", "8000"],
    {},
  );
  expect(secrets.command("vllm")).toBe("vllm serve m --api-key [redacted] --hf-token=[redacted] --port 8000");
  expect(secrets.hide("args: {'api_key': ['sekrit-1'], 'hf_token': 'hf_0123'}")).toBe(
    "args: {'api_key': ['[redacted]'], 'hf_token': '[redacted]'}",
  );
  const shell = new EngineSecrets(["-c", 'exec vllm serve m --api-key "$KEY" --api-key=abc --port 1'], {});
  expect(shell.command("sh")).toBe(
    "sh -c exec vllm serve m --api-key [redacted] --api-key=[redacted] --port 1",
  );
  // VLLM_API_KEY from the environment is the key vLLM takes when no flag says one.
  expect(new EngineSecrets(["serve"], { VLLM_API_KEY: "from-env" }).hide("key from-env")).toBe(
    "key [redacted]",
  );
  // A key too short to look for is not searched for in output (it would garble every line).
  expect(new EngineSecrets(["--api-key", "ab"], {}).hide("table")).toBe("table");
  // One secret inside another: the longer is hidden whole.
  expect(new EngineSecrets(["--api-key", "abcd", "--hf-token", "abcdefgh"], {}).hide("t=abcdefgh")).toBe(
    "t=[redacted]",
  );
});

test("the secret flags in every spelling vLLM reads are hidden: underscores, shortened, after =", () => {
  const secrets = new EngineSecrets(
    ["serve", "m", "--api_key", "sekrit-1", "--hf-t=hf_0123", "--api-k", "sekrit-2"],
    {},
  );
  expect(secrets.command("vllm")).toBe(
    "vllm serve m --api_key [redacted] --hf-t=[redacted] --api-k [redacted]",
  );
  expect(secrets.hide("args: sekrit-1 sekrit-2 hf_0123")).toBe("args: [redacted] [redacted] [redacted]");
  expect(new EngineSecrets(["-c", "exec vllm serve m --api_key sekrit-3"], {}).command("sh")).toBe(
    "sh -c exec vllm serve m --api_key [redacted]",
  );
});
