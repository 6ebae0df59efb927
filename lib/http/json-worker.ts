/**
 * The worker thread `readJsonBodyOffLoop` parses large JSON bodies in: it answers each text with
 * the routing view of its value, or why it is not JSON.
 */
import { answerOffLoop } from "../off-loop-worker.ts";
import { routingView } from "./json-body.ts";
import { parseAsPython } from "./python-json.ts";

answerOffLoop((text: string) => {
  try {
    return { parsed: routingView(parseAsPython(text)) };
  } catch (error) {
    return { invalid: (error as Error).message };
  }
});
