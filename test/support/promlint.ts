import { spawn } from "node:child_process";
import { goBinary } from "./go-binary.ts";

/**
 * Reads a /metrics text as a Prometheus server does and lints it: hack/promlint, the Prometheus Go
 * libraries' text parser (expfmt) and their linter (client_golang's testutil/promlint), built from
 * pinned Go modules by hack/build-promlint.sh. Not a hand-written parser: escaping, duplicate
 * series, HELP and TYPE lines and names are judged by the code Prometheus itself runs.
 */

export interface LintedFamily {
  /** COUNTER, GAUGE, HISTOGRAM, ... */
  type: string;
  help: string;
  /** Each series' labels as parsed (unescaped); a histogram's without `le`. */
  series: Record<string, string>[];
}

export interface Linted {
  /** Every family with at least one series (the parser drops empty ones), by name. */
  families: Record<string, LintedFamily>;
  /** What promlint finds wrong: names, units, HELP, counters without `_total`, ... */
  problems: { metric: string; text: string }[];
}

/** The linter binary: built (or found in the cache) by the project's script; never skipped. */
export const promlintBinary = (): Promise<string> => goBinary("build-promlint.sh", "the linter");

/** Parses and lints `text`; rejects with the parser's words when it does not parse. */
export async function lintExposition(text: string): Promise<Linted> {
  const binary = await promlintBinary();
  const child = spawn(binary, [], { stdio: ["pipe", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk: Buffer) => (stdout += chunk));
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk));
  const code = await new Promise<number | null>((done, fail) => {
    child.on("error", fail);
    child.on("close", done);
    child.stdin.end(text);
  });
  const out = JSON.parse(stdout || "{}") as Partial<Linted> & { error?: string };
  if (code !== 0 || out.error !== undefined)
    throw new Error(`the Prometheus text parser refused the exposition: ${out.error ?? stderr}`);
  return out as Linted;
}
