import { isLoopbackHost } from "../activator/admin-guard.ts";
import { adminTokenEnv } from "../lib/admin-token-env.ts";
import { type Flag, type FlagValues, UsageError } from "../lib/cli-flags.ts";
import { maxTokenFileBytes, readSmallFileSync } from "../lib/small-file.ts";

/**
 * `--admin-token-file`: a file, not the token itself, so the token shows neither in `ps` nor in
 * shell history. On Kubernetes it is a mounted Secret.
 */
export const adminTokenFlags: Record<"admin-token-file", Flag> = {
  "admin-token-file": {
    type: "string",
    description: `file holding the admin API's bearer token (default: $${adminTokenEnv})`,
    placeholder: "file",
  },
};

/** The admin token of `--admin-token-file` (it wins) or `$SNOOZE_ADMIN_TOKEN`; undefined when neither is set. */
export function adminTokenFrom(
  values: FlagValues,
  env: Record<string, string | undefined> = process.env,
): string | undefined {
  const file = values["admin-token-file"];
  if (typeof file === "string") {
    let text: string;
    try {
      // Bounded and never blocking: `--admin-token-file` given a named pipe hung the command for
      // good, deaf to SIGTERM, and /dev/urandom filled memory until the kernel killed it (found by
      // a probe).
      text = readSmallFileSync(file, maxTokenFileBytes).toString("utf8");
    } catch (error) {
      throw new UsageError(`cannot read --admin-token-file ${file}: ${(error as Error).message}`);
    }
    const token = text.trim();
    if (!token) throw new UsageError(`--admin-token-file ${file} is empty`);
    return checkedToken(token, `--admin-token-file ${file}`);
  }
  const fromEnv = env[adminTokenEnv]?.trim();
  if (fromEnv === undefined || fromEnv === "") return undefined;
  return checkedToken(fromEnv, `$${adminTokenEnv}`);
}

/**
 * `token` if an HTTP header can carry it as it is: visible ASCII. Found by an outside tester: a
 * control character or a byte that is not UTF-8 made every client command say it "cannot reach"
 * Snooze, and a server took "tökén", which curl sends as UTF-8 bytes and Node's fetch as Latin-1
 * (a 401 for the one, accepted for the other).
 */
function checkedToken(token: string, source: string): string {
  if (/\s/.test(token)) throw new UsageError(`${source}: the token may not contain whitespace`);
  const bad = /[^\x21-\x7e]/.exec(token);
  if (bad)
    throw new UsageError(
      `${source}: the token may hold only visible ASCII characters (letters, digits and punctuation), not ${JSON.stringify(bad[0])} (character ${bad.index + 1})`,
    );
  return token;
}

/**
 * The admin token a server listening on `host` uses. A bind that other machines can reach (anything
 * but loopback) needs one: without it anyone who can reach the port could stop every model.
 */
export function serverAdminToken(
  values: FlagValues,
  host: string,
  env: Record<string, string | undefined> = process.env,
): string | undefined {
  const token = adminTokenFrom(values, env);
  if (token === undefined && !isLoopbackHost(host))
    throw new UsageError(
      `--host ${host || '""'} is not a loopback address, so the admin API needs a token: pass --admin-token-file <file> or set $${adminTokenEnv} (e.g. to the output of \`openssl rand -hex 32\`), or listen on 127.0.0.1`,
    );
  return token;
}

/** Request headers that carry the admin token, when there is one. */
export function adminHeaders(token: string | undefined): Record<string, string> {
  return token === undefined ? {} : { authorization: `Bearer ${token}` };
}
