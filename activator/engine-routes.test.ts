import { afterEach, expect, test } from "vitest";
import { httpEngine, startActivator, type TestActivator } from "../test/abuse/harness.ts";

/** Routes vLLM serves beside the OpenAI ones, as the clients written for them call them. */
let snooze: TestActivator | undefined;
const closers: (() => void)[] = [];
afterEach(async () => {
  await snooze?.close();
  snooze = undefined;
  for (const close of closers.splice(0)) close();
});

/** An engine that answers every request with `answer` and notes each as `METHOD path model`. */
async function recordingEngine(answer: string) {
  const seen: string[] = [];
  const engine = await httpEngine((req, res) => {
    let body = "";
    req.on("data", (chunk) => {
      body += chunk;
    });
    req.on("end", () => {
      seen.push(`${req.method} ${req.url} ${JSON.parse(body).model}`);
      res.writeHead(200, { "content-type": "application/json" });
      res.end(answer);
    });
  });
  closers.push(() => engine.server.close());
  return { engine, seen };
}

test("Cohere's v2 rerank (/v2/rerank, which vLLM serves) is held for the model and reaches its engine", async () => {
  // Found by an outside tester: cohere.ClientV2(base_url="http://host:8080").rerank(...) posts to
  // /v2/rerank, which vLLM answers as /v1/rerank; Snooze said "No route for POST /v2/rerank.".
  const { engine, seen } = await recordingEngine(
    '{"id":"rerank-1","results":[{"index":0,"relevance_score":0.9}]}',
  );
  snooze = await startActivator({ holdBudget: 5_000 }, { allowedOrigins: ["https://rag.example"] });
  const answer = fetch(`${snooze.url}/v2/rerank`, {
    method: "POST",
    headers: { "content-type": "application/json", origin: "https://rag.example" },
    body: JSON.stringify({ model: "m", query: "q", documents: ["a"] }),
    signal: AbortSignal.timeout(10_000),
  });
  // Held until the model is ready, as on /v1/rerank.
  await new Promise((resolve) => setTimeout(resolve, 200));
  expect(snooze.plane.demands.map((d) => d.model)).toEqual(["m"]);
  snooze.plane.readyAt("m", engine.address);
  const response = await answer;
  expect(response.status).toBe(200);
  expect(response.headers.get("access-control-allow-origin")).toBe("https://rag.example");
  expect(await response.json()).toEqual({ id: "rerank-1", results: [{ index: 0, relevance_score: 0.9 }] });
  expect(seen).toEqual(["POST /v2/rerank m"]);
  // A browser's preflight is answered as for /v1/; other /v2/ paths reach no engine.
  const preflight = await fetch(`${snooze.url}/v2/rerank`, {
    method: "OPTIONS",
    headers: { origin: "https://rag.example", "access-control-request-method": "POST" },
  });
  expect(preflight.status).toBe(204);
  const other = await fetch(`${snooze.url}/v2/chat`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "m" }),
  });
  expect(other.status).toBe(404);
  expect(((await other.json()) as any).error.code).toBe("not_found");
  expect(seen).toHaveLength(1);
});

test("vLLM's inference routes outside /v1 are held for the body's model and reach its engine as written", async () => {
  // Found by an outside tester: POST /tokenize (and /pooling, /classify, /score, /rerank,
  // /invocations), which vLLM serves beside /v1, got "No route" through Snooze.
  const { engine, seen } = await recordingEngine('{"count":1,"tokens":[1]}');
  snooze = await startActivator({ holdBudget: 5_000 });
  const post = (path: string) =>
    fetch(`${snooze!.url}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "m", prompt: "hi" }),
      signal: AbortSignal.timeout(10_000),
    });
  const held = post("/tokenize");
  await new Promise((resolve) => setTimeout(resolve, 200));
  expect(snooze.plane.demands.map((d) => d.model)).toEqual(["m"]);
  snooze.plane.readyAt("m", engine.address);
  expect((await held).status).toBe(200);
  // And Anthropic's Messages API, which vLLM serves for Anthropic's clients (Claude Code).
  const routes = [
    "/detokenize",
    "/pooling",
    "/classify",
    "/score",
    "/rerank",
    "/invocations",
    "/v1/messages",
    "/v1/messages/count_tokens",
    "/v1/chat/completions/render",
    "/v1/completions/render",
  ];
  for (const path of routes) expect((await post(path)).status, path).toBe(200);
  expect(seen).toEqual(["/tokenize", ...routes].map((path) => `POST ${path} m`));
});

test("vLLM's engine-private routes and /health are refused, saying why and where to go instead", async () => {
  const seen: string[] = [];
  const engine = await httpEngine((req, res) => {
    seen.push(`${req.method} ${req.url}`);
    res.end("{}");
  });
  closers.push(() => engine.server.close());
  snooze = await startActivator({ holdBudget: 5_000 });
  snooze.plane.readyAt("m", engine.address);
  const ask = async (method: string, path: string) => {
    const response = await fetch(`${snooze!.url}${path}`, {
      method,
      ...(method === "POST"
        ? { headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "m" }) }
        : {}),
    });
    return { status: response.status, error: ((await response.json()) as any).error };
  };
  for (const path of ["/sleep?level=1", "/wake_up", "/collective_rpc", "/reset_prefix_cache"]) {
    const { status, error } = await ask("POST", path);
    expect(status, path).toBe(404);
    expect(error.code).toBe("not_found");
    expect(error.message).toContain("engine-private API");
    expect(error.message).toContain("/snooze/v1/models/{model}/sleep");
  }
  const lora = await ask("POST", "/v1/load_lora_adapter");
  expect(lora.status).toBe(404);
  expect(lora.error.message).toContain("--lora-modules");
  // Asked under /v1/, as a client whose base URL ends in /v1 would: told where it is.
  const under = await ask("POST", "/v1/tokenize");
  expect(under.status).toBe(404);
  expect(under.error.message).toContain("outside /v1/, as POST /tokenize");
  for (const path of ["/health", "/version"]) {
    const { status, error } = await ask("GET", path);
    expect(status, path).toBe(404);
    expect(error.message).toContain("/healthz");
  }
  expect(seen).toEqual([]);
});

test("a route with a trailing slash or in other case is a 404 naming the route it meant, and reaches no engine", async () => {
  // Found by an outside tester: `POST /v1/chat/completions/` (a URL joined by hand), which vLLM
  // itself redirects to the route, was told only "not an OpenAI route the engine serves".
  const { engine, seen } = await recordingEngine("{}");
  snooze = await startActivator({ holdBudget: 5_000 });
  snooze.plane.readyAt("m", engine.address);
  for (const [path, meant, why] of [
    ["/v1/chat/completions/", "/v1/chat/completions", "without the trailing slash"],
    ["/v1/embeddings/", "/v1/embeddings", "without the trailing slash"],
    ["/tokenize/", "/tokenize", "without the trailing slash"],
    ["/v1/Chat/Completions", "/v1/chat/completions", "case-sensitive"],
    ["/V1/chat/completions", "/v1/chat/completions", "case-sensitive"],
    ["/V1/CHAT/COMPLETIONS/", "/v1/chat/completions", "and take no trailing slash"],
  ] as const) {
    const answer = await fetch(`${snooze.url}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "m" }),
    });
    expect(answer.status, path).toBe(404);
    const { error } = (await answer.json()) as { error: { code: string; message: string } };
    expect(error.code, path).toBe("not_found");
    expect(error.message, path).toContain(`did you mean POST ${meant}`);
    expect(error.message, path).toContain(why);
  }
  // The route itself still works, and a path near no route keeps the plain answer.
  const other = await fetch(`${snooze.url}/v1/nothing/`, { method: "POST", body: "{}" });
  expect(((await other.json()) as { error: { message: string } }).error.message).not.toContain(
    "did you mean",
  );
  expect(seen).toEqual([]);
});
