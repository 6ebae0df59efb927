import { readFile } from "node:fs/promises";
import { isNode, LineCounter, parseDocument } from "yaml";
import type { z } from "zod";
import { ConfigError, type ConfigProblem } from "./config-error.ts";
import { snoozeFile } from "./file.ts";
import { resolveConfig, type SnoozeConfig } from "./resolve.ts";

/** Reads, validates and resolves a snooze.yaml; throws ConfigError naming file, line, key and reason. */
export async function loadConfigFile(path: string): Promise<SnoozeConfig> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (error) {
    throw new ConfigError(path, [{ key: "", message: `cannot read the file: ${(error as Error).message}` }]);
  }
  return parseConfig(text, path);
}

export function parseConfig(text: string, file = "snooze.yaml"): SnoozeConfig {
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, uniqueKeys: true });
  if (doc.errors.length > 0) {
    throw new ConfigError(
      file,
      doc.errors.map((error) => {
        const at = error.linePos?.[0];
        return {
          key: "",
          message: `invalid YAML: ${error.message.split("\n")[0]}`,
          line: at?.line,
          column: at?.col,
        };
      }),
    );
  }
  const locate = (path: PropertyKey[]): Pick<ConfigProblem, "line" | "column"> => {
    // Point at the deepest node that exists: a missing key is reported at its parent.
    for (let depth = path.length; depth >= 0; depth--) {
      const node = doc.getIn(path.slice(0, depth) as unknown[], true);
      if (isNode(node) && node.range) {
        const pos = lines.linePos(keyOffset(doc, path.slice(0, depth)) ?? node.range[0]);
        return { line: pos.line, column: pos.col };
      }
    }
    return {};
  };
  const parsed = snoozeFile.safeParse(doc.toJS() ?? {});
  if (!parsed.success)
    throw new ConfigError(
      file,
      parsed.error.issues.map((issue) => toProblem(issue, locate)),
    );
  const { config, problems } = resolveConfig(parsed.data);
  if (problems.length > 0) {
    throw new ConfigError(
      file,
      problems.map((p) => ({
        ...locate(p.key.split(".").map((k) => (/^\d+$/.test(k) ? Number(k) : k))),
        ...p,
      })),
    );
  }
  return config;
}

/** The offset of the key (not the value) of a mapping entry, so errors point at `sleepAfter:`. */
function keyOffset(doc: ReturnType<typeof parseDocument>, path: PropertyKey[]): number | undefined {
  if (path.length === 0) return undefined;
  const parent = doc.getIn(path.slice(0, -1) as unknown[], true) as {
    items?: { key?: { value?: unknown; range?: number[] } }[];
  };
  const pair = parent?.items?.find((item) => item.key?.value === path.at(-1));
  return pair?.key?.range?.[0];
}

function toProblem(
  issue: z.core.$ZodIssue,
  locate: (path: PropertyKey[]) => Pick<ConfigProblem, "line" | "column">,
): ConfigProblem {
  let path = issue.path;
  let message = issue.message;
  if (issue.code === "unrecognized_keys") {
    // Point at the unknown key itself, and say which keys are allowed nearby.
    path = [...issue.path, issue.keys[0]!];
    message = `unknown key "${issue.keys.join('", "')}"`;
  }
  if (issue.code === "invalid_type" && issue.input === undefined) message = "is required";
  return { key: path.map(String).join("."), message, ...locate(path) };
}
