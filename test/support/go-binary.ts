import { execFile } from "node:child_process";
import { join, resolve } from "node:path";
import { promisify } from "node:util";

const repo = resolve(import.meta.dirname, "../..");
const run = promisify(execFile);

/**
 * The path of a Go program a test needs, built by its script under hack/ (`build-otelcol.sh`,
 * `build-promlint.sh`): found in the cache (`--print-path`), else built now (.ci/run builds them
 * before the tests). A build that fails fails the test with the script's words; it is never skipped.
 */
export async function goBinary(script: string, what: string): Promise<string> {
  const path = join(repo, "hack", script);
  try {
    const { stdout } = await run(path, ["--print-path"]);
    return stdout.trim();
  } catch {
    try {
      const { stdout } = await run(path, [], { maxBuffer: 64 * 2 ** 20 });
      return stdout.trim().split("\n").at(-1)!;
    } catch (error) {
      throw new Error(`hack/${script} could not build ${what} this test needs: ${(error as Error).message}`);
    }
  }
}
