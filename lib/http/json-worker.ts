/**
 * The worker thread `readJsonBodyOffLoop` parses large JSON bodies in: it answers each text with
 * the routing view of its value, or why it is not JSON.
 */
import { parentPort } from "node:worker_threads";
import { routingView } from "./json-body.ts";

parentPort?.on("message", ({ id, text }: { id: number; text: string }) => {
  try {
    parentPort!.postMessage({ id, parsed: routingView(JSON.parse(text)) });
  } catch (error) {
    parentPort!.postMessage({ id, invalid: (error as Error).message });
  }
});
