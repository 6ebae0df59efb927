import { expect, test } from "vitest";
import { failureWords, statesException } from "./failure-words.ts";

// vLLM 0.11's end when the engine core cannot allocate its KV cache, then Python's resource tracker.
const oom = [
  "(EngineCore_DP0 pid=412) ERROR 12-03 10:14:02 [core.py:708] EngineCore failed to start.",
  "(EngineCore_DP0 pid=412) ERROR 12-03 10:14:02 [core.py:708] Traceback (most recent call last):",
  '(EngineCore_DP0 pid=412) ERROR 12-03 10:14:02 [core.py:708]   File "/usr/lib/python3.12/site-packages/vllm/v1/engine/core.py", line 699, in run_engine_core',
  "(EngineCore_DP0 pid=412) ERROR 12-03 10:14:02 [core.py:708] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
  "Traceback (most recent call last):",
  '  File "/usr/bin/vllm", line 8, in <module>',
  "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
  "/usr/lib/python3.12/multiprocessing/resource_tracker.py:279: UserWarning: resource_tracker: There appear to be 1 leaked shared_memory objects to clean up at shutdown",
  "  warnings.warn('resource_tracker: There appear to be %d '",
];

test("a failure that points to its root cause above is told with that cause first", () => {
  expect(failureWords(oom)).toBe(`${oom[3]} … | ${oom.slice(-3).join(" | ")}`);
});

test("an exception pushed out of the last three lines by warnings is told before them", () => {
  const lines = [
    "INFO starting",
    "ValueError: max_model_len 40960 is larger than the KV cache",
    "warning a",
    "warning b",
    "warning c",
  ];
  expect(failureWords(lines)).toBe(`${lines[1]} … | warning a | warning b | warning c`);
});

test("last lines that state their exception are told as they are; so are lines with none anywhere", () => {
  const stated = ["ValueError: an old one", "x", "y", "OSError: [Errno 98] Address already in use"];
  expect(failureWords(stated)).toBe("x | y | OSError: [Errno 98] Address already in use");
  expect(failureWords(["a", "b", "c", "d"])).toBe("b | c | d");
  expect(failureWords(["only"])).toBe("only");
});

// A Node.js program's end when its port is taken: the error, then more than three lines of details.
const nodeCrash = [
  "node:events:505",
  "    throw er; // Unhandled 'error' event",
  "    ^",
  "Error: listen EADDRINUSE: address already in use 127.0.0.1:48120",
  "    at Server.setupListenHandle [as _listen2] (node:net:2328:16)",
  "Emitted 'error' event on Server instance at:",
  "    at emitErrorNT (node:net:2416:8) {",
  "  code: 'EADDRINUSE',",
  "  port: 48120",
  "}",
  "Node.js v24.21.0",
];

test("a bare Error or Exception (Node's fatal error, Python's raise Exception) is the cause told first", () => {
  expect(failureWords(nodeCrash)).toBe(`${nodeCrash[3]} … | ${nodeCrash.slice(-3).join(" | ")}`);
  const python = ["Traceback (most recent call last):", "Exception: no GPU found", "a", "b", "c"];
  expect(failureWords(python)).toBe("Exception: no GPU found … | a | b | c");
});

test("what states an exception, and what does not", () => {
  for (const line of [
    "torch.OutOfMemoryError: CUDA out of memory.",
    "ERROR [core.py:708] ValueError: bad",
    "KeyError: 'x'",
    "asyncio.exceptions.CancelledError: x",
    "vllm.engine.EngineDeadError: dead",
    "RuntimeException: boom",
    "Exception: the bare base class",
    "Error: listen EADDRINUSE: address already in use 127.0.0.1:8000",
  ])
    expect(statesException(line), line).toBe(true);
  for (const line of [
    "UserWarning: resource_tracker",
    "no error here",
    "Error:",
    "INFO: Errors: 0",
    "ErrorCount: 3",
  ])
    expect(statesException(line), line).toBe(false);
});
