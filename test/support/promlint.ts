import { execFile, spawn } from "node:child_process";
import { join, resolve } from "node:path";
import { promisify } from "node:util";

/**
 * Reads a /metrics text as a Prometheus server does and lints it: hack/promlint, the Prometheus Go
 * libraries' text parser (expfmt) and their linter (client_golang's testutil/promlint), built from
 * pinned Go modules by hack/build-promlint.sh. Not a hand-written parser: escaping, duplicate
 * series, HELP and TYPE lines and names are judged by the code Prometheus itself runs.
 */

const repo = resolve(import.meta.dirname, "../..");
const run = promisify(execFile);

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
export async function promlintBinary(): Promise<string> {
  const script = join(repo, "hack/build-promlint.sh");
  try {
    const { stdout } = await run(script, ["--print-path"]);
    return stdout.trim();
  } catch {
    // Not built yet: build it now (seconds with the modules cached; .ci/run builds it before the tests).
    try {
      const { stdout } = await run(script, [], { maxBuffer: 64 * 2 ** 20 });
      return stdout.trim().split("\n").at(-1)!;
    } catch (error) {
      throw new Error(
        `hack/build-promlint.sh could not build the linter this test needs: ${(error as Error).message}`,
      );
    }
  }
}

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
